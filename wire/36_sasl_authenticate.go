package wire

import (
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), v0–v2: built into the server when
// SecurityConfig.SASL is set, never registered.
//
// Behavior:
//   - carries one token of the mechanism chosen by SaslHandshake v1 and
//     answers the server's token (PLAIN: one round; SCRAM: two);
//   - success: later requests on the connection carry the principal
//     "User:<name>" in Request.Principal;
//   - failure (unknown user, wrong password, malformed token):
//     SASL_AUTHENTICATION_FAILED (58) with an error message worded as
//     Kafka's, then the connection is closed;
//   - without a preceding SaslHandshake v1, or after authentication:
//     ILLEGAL_SASL_STATE (34), then the connection is closed.
//
// Version notes: v1 adds SessionLifetimeMillis (always 0 here: no
// re-authentication); v2 is flexible.

func (c *conn) saslAuthenticate(h header, req *kmsg.SASLAuthenticateRequest, log zerolog.Logger) (pending, bool) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	p := pending{h: h, reply: Now(resp)}
	if c.sasl.session == nil || c.sasl.raw {
		resp.ErrorCode = 34 // ILLEGAL_SASL_STATE
		msg := "SaslAuthenticate without a SaslHandshake v1"
		resp.ErrorMessage = &msg
		log.Warn().Str("reason", "illegal sasl state").Msg("connection closed: " + msg)
		p.closeAfter = true
		return p, true
	}
	out, user, done, err := c.sasl.session.step(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
		msg := failureMessage(c.sasl.mechanism)
		resp.ErrorMessage = &msg
		c.logAuthFailed(&log, user, err)
		p.closeAfter = true
		return p, true
	}
	resp.SASLAuthBytes = out
	if done {
		c.authenticated(user)
	}
	return p, true
}
