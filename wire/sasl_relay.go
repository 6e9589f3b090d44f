package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SCRAM relaying, at a node whose process does not hold the user database
// (a leader, or a coordinator other than node 0, in a process of its own):
// the controller keeps the SCRAM users created with
// AlterUserScramCredentials, and no Kafka API hands out a stored
// credential. A Kafka broker has them from the replicated metadata log;
// here the node passes the client's SCRAM exchange, token for token, to
// the controller over a connection of its own (TLS as the cluster's, no
// SASL of its own) and learns the outcome from the controller's answer to
// the client-final message. The node never sees a password or a key, and
// the client cannot tell a relayed exchange from a local one.

// SASLRelay opens a relayed exchange for mechanism with the server that
// keeps the user database.
type SASLRelay func(ctx context.Context, mechanism string) (SASLExchange, error)

// SASLExchange is one relayed SASL exchange.
type SASLExchange interface {
	// Step sends one client token and returns the server's token; an
	// error is a failed authentication or an unreachable server.
	Step(ctx context.Context, token []byte) ([]byte, error)
	Close()
}

// relayTimeout bounds each relayed step: the client's reader waits on it.
const relayTimeout = 10 * time.Second

// DialSASLRelay relays to addr, connecting with cfg's TLS (cfg's SASL is
// not used: the exchange is the client's).
func DialSASLRelay(addr string, cfg DialConfig) SASLRelay {
	return DialSASLRelayTo(func() (string, error) { return addr, nil }, cfg)
}

// DialSASLRelayTo is DialSASLRelay to the address addr names at each
// login (the holder of the controller's lease); its error fails the login.
func DialSASLRelayTo(addr func() (string, error), cfg DialConfig) SASLRelay {
	return func(ctx context.Context, mechanism string) (SASLExchange, error) {
		to, err := addr()
		if err != nil {
			return nil, err
		}
		cl, err := DialWith(ctx, to, "txncoord-sasl-relay", DialConfig{TLS: cfg.TLS})
		if err != nil {
			return nil, err
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = mechanism
		raw, err := cl.Do(ctx, hs)
		if err == nil {
			if code := raw.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
				err = fmt.Errorf("handshake: %w", kerr.ErrorForCode(code))
			}
		}
		if err != nil {
			cl.Close()
			return nil, err
		}
		return clientExchange{cl}, nil
	}
}

type clientExchange struct{ cl *Client }

func (e clientExchange) Step(ctx context.Context, token []byte) ([]byte, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(1)
	req.SASLAuthBytes = token
	raw, err := e.cl.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("%w: the controller answered %v", errAuthFailed, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.SASLAuthBytes, nil
}

func (e clientExchange) Close() { e.cl.Close() }

// relayedSCRAM is a SCRAM exchange passed on to the user database's
// server: the client-first message, then the client-final one.
type relayedSCRAM struct {
	ex    SASLExchange
	user  string
	steps int
}

func (r *relayedSCRAM) step(token []byte) ([]byte, string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
	defer cancel()
	out, err := r.ex.Step(ctx, token)
	if err != nil {
		r.close()
		if !errors.Is(err, errAuthFailed) {
			err = fmt.Errorf("%w: relaying to the controller: %v", errAuthFailed, err)
		}
		return nil, r.user, false, err
	}
	r.steps++
	if r.steps == 2 { // the server-final message: the controller verified the proof
		r.close()
		return out, r.user, true, nil
	}
	return out, "", false, nil
}

func (r *relayedSCRAM) close() {
	if r.ex != nil {
		r.ex.Close()
		r.ex = nil
	}
}

// scramUser is the user name of a SCRAM client-first message
// ("n,,n=user,r=nonce", RFC 5802 §5.1, with "=2C" and "=3D" escaped).
func scramUser(clientFirst []byte) (string, bool) {
	parts := strings.SplitN(string(clientFirst), ",", 4)
	if len(parts) < 4 || !strings.HasPrefix(parts[2], "n=") {
		return "", false
	}
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(parts[2][2:]), true
}
