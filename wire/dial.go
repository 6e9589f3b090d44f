package wire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// DialConfig is how a node reaches a secured listener of another node.
// The zero value dials plaintext without authentication (as Dial).
type DialConfig struct {
	// TLS, when set, wraps the connection in TLS. ServerName defaults to
	// the host of the address.
	TLS *tls.Config
	// SASL, when set, authenticates right after connecting
	// (SaslHandshake v1, then SaslAuthenticate v1 rounds).
	SASL *ClientSASL
}

// ClientSASL is a SASL identity: for inter-node traffic, the cluster
// principal's.
type ClientSASL struct {
	// Mechanism is MechanismPlain, MechanismSCRAMSHA256 or
	// MechanismSCRAMSHA512.
	Mechanism string
	User      string
	Pass      string
}

// DialWith connects to addr with TLS and SASL as cfg says. The returned
// Client is authenticated: its first request may be anything.
func DialWith(ctx context.Context, addr, clientID string, cfg DialConfig) (*Client, error) {
	var mech sasl.Mechanism
	if cfg.SASL != nil {
		var err error
		if mech, err = cfg.SASL.mechanism(); err != nil {
			return nil, err
		}
	}
	var nc net.Conn
	var err error
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		d := tls.Dialer{Config: tc}
		nc, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	cl := NewClient(nc, clientID)
	if mech != nil {
		if err := cl.authenticate(ctx, addr, mech); err != nil {
			cl.Close()
			return nil, fmt.Errorf("wire: SASL %s to %s: %w", mech.Name(), addr, err)
		}
	}
	return cl, nil
}

func (s *ClientSASL) mechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case MechanismPlain:
		return plain.Auth{User: s.User, Pass: s.Pass}.AsMechanism(), nil
	case MechanismSCRAMSHA256:
		return scram.Auth{User: s.User, Pass: s.Pass}.AsSha256Mechanism(), nil
	case MechanismSCRAMSHA512:
		return scram.Auth{User: s.User, Pass: s.Pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("wire: unsupported SASL mechanism %q", s.Mechanism)
}

// authenticate runs the KIP-152 flow: SaslHandshake v1, then one
// SaslAuthenticate per client token until the mechanism is done.
func (c *Client) authenticate(ctx context.Context, addr string, mech sasl.Mechanism) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	raw, err := c.Do(ctx, hs)
	if err != nil {
		return err
	}
	if hsResp := raw.(*kmsg.SASLHandshakeResponse); hsResp.ErrorCode != 0 {
		return fmt.Errorf("handshake: %w (server offers %v)", kerr.ErrorForCode(hsResp.ErrorCode), hsResp.SupportedMechanisms)
	}
	session, token, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for done := false; !done || len(token) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = token
		raw, err := c.Do(ctx, req)
		if err != nil {
			return err
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			err := kerr.ErrorForCode(resp.ErrorCode)
			if resp.ErrorMessage != nil {
				err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		token = nil
		if !done {
			if done, token, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// ErrAuthentication is matched by errors.Is for a failed DialWith whose
// server refused the credentials.
var ErrAuthentication = kerr.SaslAuthenticationFailed

// Forward answers req with the answer of another node (the controller),
// reached with fwd within timeout, at req's version: how a node serves a
// request that only the controller decides. When the controller cannot
// answer, the answer is unreachable(). synced, when set, runs before the
// answer leaves, so this node shows the change already.
func Forward(ctx context.Context, req *Request, timeout time.Duration, fwd func(context.Context, *Request) (kmsg.Response, error),
	unreachable func() kmsg.Response, synced func(context.Context)) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req.Body.SetVersion(req.Version)
	resp, err := fwd(ctx, req)
	if err != nil || resp == nil || resp.Key() != req.Key {
		req.Logger().Debug().AnErr("error", err).Msg("cannot forward to the controller: answering NOT_CONTROLLER")
		return unreachable(), nil
	}
	if synced != nil {
		synced(ctx)
	}
	resp.SetVersion(req.Version)
	return resp, nil
}
