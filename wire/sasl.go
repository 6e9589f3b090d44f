package wire

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/xdg-go/scram"
)

// connSASL is one connection's SASL state. Only the connection's reader
// goroutine touches it: the handshake and authenticate handlers run there,
// before the next frame is read.
type connSASL struct {
	sec *serverSecurity
	// mechanism is the one chosen by SaslHandshake ("" before it).
	mechanism string
	// raw: SaslHandshake v0 was used, so the next frames are raw SASL
	// tokens (length-prefixed, no Kafka header) until authentication ends.
	raw           bool
	session       saslSession
	authenticated bool
}

func (sec *serverSecurity) newConnSASL() *connSASL {
	if !sec.saslOn() {
		return nil
	}
	return &connSASL{sec: sec}
}

// pendingAuth reports whether the connection still has to authenticate.
func (s *connSASL) pendingAuth() bool { return s != nil && !s.authenticated }

// saslSession is the server side of one mechanism's exchange.
type saslSession interface {
	// step consumes one client token and returns the server's token.
	// done with a user name means authenticated; an error means the
	// client failed to authenticate (the message is safe to send).
	step(token []byte) (out []byte, user string, done bool, err error)
}

// errAuthFailed is what a client learns about any failed attempt: Kafka
// does not say whether the user or the password was wrong.
var errAuthFailed = errors.New("authentication failed")

func (s *connSASL) newSession(mechanism string) saslSession {
	switch mechanism {
	case MechanismPlain:
		return &plainSession{creds: s.sec.cfg.SASL.Credentials}
	case MechanismSCRAMSHA256:
		return &scramSession{conv: s.sec.scram256.NewConversation(), mechanism: mechanism, sasl: s.sec.cfg.SASL}
	default:
		return &scramSession{conv: s.sec.scram512.NewConversation(), mechanism: mechanism, sasl: s.sec.cfg.SASL}
	}
}

// close ends a relayed exchange the client left unfinished.
func (s *connSASL) close() {
	if s == nil {
		return
	}
	if sc, ok := s.session.(*scramSession); ok && sc.relayed != nil {
		sc.relayed.close()
	}
}

// failureMessage is the SaslAuthenticate error message, worded as Kafka's.
func failureMessage(mechanism string) string {
	if mechanism == MechanismPlain {
		return "Authentication failed: Invalid username or password"
	}
	return fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mechanism)
}

// plainSession is SASL PLAIN (RFC 4616): one message "authzid\0user\0pass".
type plainSession struct {
	creds Credentials
}

func (p *plainSession) step(token []byte) ([]byte, string, bool, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, "", false, fmt.Errorf("%w: malformed PLAIN message", errAuthFailed)
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	// Acting as another user is not supported, as in Kafka.
	if authzid != "" && subtle.ConstantTimeCompare([]byte(authzid), []byte(user)) != 1 {
		return nil, user, false, fmt.Errorf("%w: authorization id differs from user", errAuthFailed)
	}
	if !p.creds.VerifyPlain(user, pass) {
		return nil, user, false, fmt.Errorf("%w: invalid username or password", errAuthFailed)
	}
	return []byte{}, user, true, nil
}

// scramSession is SCRAM-SHA-256/512 (RFC 5802/7677) through xdg-go/scram:
// client-first → server-first, client-final → server-final.
type scramSession struct {
	conv      *scram.ServerConversation
	steps     int // the client messages answered
	mechanism string
	sasl      *SASLConfig
	// relayed: the user is not in the local database and the exchange
	// goes on at the server that has it (SASLConfig.Relay).
	relayed *relayedSCRAM
}

// errSCRAMNonce is a client-final message whose nonce is not the one the
// server sent. librdkafka before 2.6.1 (Debian 12's kcat among its users)
// sends such a message whatever the password, a client bug; the failure's
// log line says so.
var errSCRAMNonce = errors.New("the client's final SCRAM message carries another nonce")

func (s *scramSession) step(token []byte) ([]byte, string, bool, error) {
	if s.relayed != nil {
		return s.relayed.step(token)
	}
	if s.steps == 0 && s.sasl.Relay != nil {
		if user, ok := scramUser(token); ok {
			if _, known := s.sasl.Credentials.SCRAM(s.mechanism, user); !known {
				ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
				ex, err := s.sasl.Relay(ctx, s.mechanism)
				cancel()
				if err != nil {
					return nil, user, false, fmt.Errorf("%w: relaying to the controller: %v", errAuthFailed, err)
				}
				s.relayed = &relayedSCRAM{ex: ex, user: user}
				return s.relayed.step(token)
			}
		}
	}
	out, err := s.conv.Step(string(token))
	if err != nil {
		if s.steps == 1 && strings.Contains(err.Error(), "nonce received did not match") {
			return nil, s.conv.Username(), false, fmt.Errorf("%w: %w: %v", errAuthFailed, errSCRAMNonce, err)
		}
		return nil, s.conv.Username(), false, fmt.Errorf("%w: %v", errAuthFailed, err)
	}
	s.steps++
	if s.conv.Done() {
		if !s.conv.Valid() {
			return nil, s.conv.Username(), false, errAuthFailed
		}
		return []byte(out), s.conv.Username(), true, nil
	}
	return []byte(out), "", false, nil
}

// rawToken handles one raw SASL token after a SaslHandshake v0: the answer
// is a raw token too. A failure closes the connection without an answer,
// as Kafka does on this path (there is no frame to carry an error).
func (c *conn) rawToken(frame []byte) (pending, bool) {
	out, user, done, err := c.sasl.session.step(frame)
	if err != nil {
		c.logAuthFailed(c.log(), user, err)
		return pending{}, false
	}
	if done {
		c.authenticated(user)
	}
	return pending{isRaw: true, raw: out}, true
}

// logAuthFailed is the one line of a failed SASL exchange, with the likely
// cause where one is known.
func (c *conn) logAuthFailed(log *zerolog.Logger, user string, err error) {
	e := log.Warn().Str("mechanism", c.sasl.mechanism).Str("user", user).Err(err).Str("reason", "sasl authentication failed")
	if errors.Is(err, errSCRAMNonce) {
		e = e.Str("likely_cause", "librdkafka before 2.6.1 (Debian 12's kcat among its users) fails SCRAM this way whatever the password; use SASL PLAIN over TLS, or librdkafka 2.6.1 or later")
	}
	e.Msg("connection closed: SASL authentication failed")
}

// authenticated ends the SASL exchange: later requests carry the principal.
func (c *conn) authenticated(user string) {
	c.sasl.authenticated, c.sasl.raw, c.sasl.session = true, false, nil
	c.principal = "User:" + user
	c.log().Info().Str("mechanism", c.sasl.mechanism).Str("principal", c.principal).Msg("SASL authentication succeeded")
}
