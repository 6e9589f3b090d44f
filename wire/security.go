package wire

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/xdg-go/scram"
)

// SecurityConfig turns on transport security, authentication and
// authorization for one listener. With Config.Security nil the server
// behaves as before: plaintext, Request.Principal "", everything allowed.
//
// The principal of a connection, as handlers see it in Request.Principal:
//   - SASL: "User:<sasl user name>" (it wins over a client certificate, as
//     Kafka's SASL_SSL does);
//   - TLS with a verified client certificate and no SASL: "User:<CN>";
//   - otherwise "User:ANONYMOUS" (Kafka's name for it).
type SecurityConfig struct {
	// TLS, when set, makes the listener TLS only: a connection that fails
	// the handshake is closed with a log line. Client certificates are
	// verified per TLS.ClientAuth (tls.RequireAndVerifyClientCert for
	// mTLS); Certificates or GetCertificate must be set.
	TLS *tls.Config
	// SASL, when set, requires SASL authentication (SaslHandshake v1 +
	// SaslAuthenticate, or v0 with raw tokens) before any request other
	// than ApiVersions.
	SASL *SASLConfig
	// Authorizer answers the per-request checks handlers make with
	// ClusterAction, TransactionalIDAllowed and Authorize. Required: use
	// AllowAll to authenticate without authorizing.
	Authorizer Authorizer
	// SuperUsers are principals no ACL restricts (Kafka's super.users):
	// the cluster principal and the security section's super_users. An
	// authorizer layered over Authorizer (ACLs) reads them.
	SuperUsers []string
	// HandshakeTimeout bounds the TLS handshake (default: FrameTimeout).
	HandshakeTimeout time.Duration
}

// SASL mechanism names, as Kafka spells them.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// AnonymousPrincipal is the principal of a connection that proved no
// identity on a secured listener (TLS without client certificate, no SASL).
const AnonymousPrincipal = "User:ANONYMOUS"

// SASLConfig enables SASL on a listener.
type SASLConfig struct {
	// Mechanisms enabled, in the order advertised; empty means all three
	// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
	Mechanisms []string
	// Credentials verifies users (package security implements it from a
	// credentials file).
	Credentials Credentials
	// Relay, when set, authenticates a SCRAM user Credentials does not
	// know at the server that keeps the user database (see SASLRelay).
	Relay SASLRelay
}

// Credentials is the server's view of the user database. Implementations
// must be safe for concurrent use: every connection calls them.
type Credentials interface {
	// SCRAM returns the stored SCRAM credentials of user for mechanism
	// (MechanismSCRAMSHA256 or MechanismSCRAMSHA512); ok is false for an
	// unknown user or a user without credentials for that mechanism.
	SCRAM(mechanism, user string) (cred ScramCredentials, ok bool)
	// VerifyPlain reports whether password is user's password (SASL
	// PLAIN). It must compare in constant time.
	VerifyPlain(user, password string) bool
}

// ScramCredentials are what a server stores for one user and one SCRAM hash
// (RFC 5802): never the password.
type ScramCredentials struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// maxPreAuthFrameBytes caps request frames before authentication, as
// Kafka's sasl.server.max.receive.size (512 KiB): an anonymous peer cannot
// make the server allocate a 100 MiB frame.
const maxPreAuthFrameBytes = 512 << 10

// serverSecurity is the validated, ready-to-use form of a SecurityConfig.
type serverSecurity struct {
	cfg        SecurityConfig
	mechanisms []string
	scram256   *scram.Server
	scram512   *scram.Server
}

func newServerSecurity(cfg *SecurityConfig, reg *Registry) (*serverSecurity, error) {
	if cfg == nil {
		return nil, nil
	}
	if cfg.Authorizer == nil {
		return nil, errors.New("wire: Security needs an Authorizer (wire.AllowAll to authenticate only)")
	}
	if cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil {
		return nil, errors.New("wire: Security.TLS has no server certificate")
	}
	sec := &serverSecurity{cfg: *cfg}
	if cfg.SASL == nil {
		return sec, nil
	}
	for _, key := range []int16{17, 36} {
		if _, _, dup := reg.Range(key); dup {
			return nil, fmt.Errorf("wire: API key %d is built in when SASL is on and must not be registered", key)
		}
	}
	if cfg.SASL.Credentials == nil {
		return nil, errors.New("wire: SASL needs Credentials")
	}
	sec.mechanisms = cfg.SASL.Mechanisms
	if len(sec.mechanisms) == 0 {
		sec.mechanisms = []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512}
	}
	for _, m := range sec.mechanisms {
		if m != MechanismPlain && m != MechanismSCRAMSHA256 && m != MechanismSCRAMSHA512 {
			return nil, fmt.Errorf("wire: unsupported SASL mechanism %q", m)
		}
	}
	creds := cfg.SASL.Credentials
	lookup := func(mechanism string) scram.CredentialLookup {
		return func(user string) (scram.StoredCredentials, error) {
			c, ok := creds.SCRAM(mechanism, user)
			if !ok {
				return scram.StoredCredentials{}, errUnknownUser
			}
			return scram.StoredCredentials{
				KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
				StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
			}, nil
		}
	}
	var err error
	if sec.scram256, err = scram.SHA256.NewServer(lookup(MechanismSCRAMSHA256)); err != nil {
		return nil, err
	}
	if sec.scram512, err = scram.SHA512.NewServer(lookup(MechanismSCRAMSHA512)); err != nil {
		return nil, err
	}
	return sec, nil
}

var errUnknownUser = errors.New("unknown user")

// builtinKeys are the keys the server answers itself besides ApiVersions.
func (sec *serverSecurity) builtinKeys() map[int16][2]int16 {
	if sec == nil || sec.cfg.SASL == nil {
		return nil
	}
	return map[int16][2]int16{17: {0, 1}, 36: {0, 2}}
}

func (sec *serverSecurity) tlsOn() bool { return sec != nil && sec.cfg.TLS != nil }

func (sec *serverSecurity) saslOn() bool { return sec != nil && sec.cfg.SASL != nil }

func (sec *serverSecurity) enabled(mechanism string) bool {
	return slices.Contains(sec.mechanisms, mechanism)
}

// handshake runs the TLS handshake of a new connection, when TLS is on,
// and returns the connection to read from and the principal so far. The
// caller has set nc's deadline.
func (sec *serverSecurity) handshake(nc net.Conn) (net.Conn, string, error) {
	if sec == nil {
		return nc, "", nil
	}
	if sec.cfg.TLS == nil {
		return nc, AnonymousPrincipal, nil
	}
	tc := tls.Server(nc, sec.cfg.TLS)
	if err := tc.Handshake(); err != nil {
		return nil, "", fmt.Errorf("tls handshake: %w", err)
	}
	principal := AnonymousPrincipal
	// VerifiedChains is empty unless the certificate chained to ClientCAs:
	// an unverified certificate (ClientAuth RequestClientCert) names no one.
	if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.VerifiedChains[0]) > 0 {
		if cn := st.VerifiedChains[0][0].Subject.CommonName; cn != "" {
			principal = "User:" + cn
		}
	}
	return tc, principal, nil
}

// handshakeTimeout bounds the TLS handshake.
func (sec *serverSecurity) handshakeTimeout(frameTimeout time.Duration) time.Duration {
	if sec != nil && sec.cfg.HandshakeTimeout > 0 {
		return sec.cfg.HandshakeTimeout
	}
	return frameTimeout
}
