package wire

import (
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17), v0–v1: built into the server when
// SecurityConfig.SASL is set, never registered.
//
// Behavior:
//   - chooses the connection's mechanism; the answer always lists the
//     enabled mechanisms;
//   - a mechanism that is not enabled: UNSUPPORTED_SASL_MECHANISM (33),
//     then the connection is closed (as Kafka; kgo retries on a new
//     connection with another of its mechanisms);
//   - a second handshake, or one after authentication: ILLEGAL_SASL_STATE
//     (34), then the connection is closed (no KIP-368 re-authentication:
//     SaslAuthenticate answers SessionLifetimeMillis 0).
//
// Version notes: v0 is followed by raw SASL tokens (4-byte length, token,
// no Kafka header; kgo does this when a broker advertises max v0); v1 by
// SaslAuthenticate requests (KIP-152), what kgo, sarama and librdkafka use.

func (c *conn) saslHandshake(h header, req *kmsg.SASLHandshakeRequest, log zerolog.Logger) (pending, bool) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = c.sasl.sec.mechanisms
	p := pending{h: h, reply: Now(resp)}
	switch {
	case c.sasl.mechanism != "" || c.sasl.authenticated:
		resp.ErrorCode = 34 // ILLEGAL_SASL_STATE
		log.Warn().Str("mechanism", req.Mechanism).Str("reason", "illegal sasl state").Msg("connection closed: SaslHandshake repeated")
		p.closeAfter = true
	case !c.sasl.sec.enabled(req.Mechanism):
		resp.ErrorCode = 33 // UNSUPPORTED_SASL_MECHANISM
		log.Warn().Str("mechanism", req.Mechanism).Strs("enabled", c.sasl.sec.mechanisms).Str("reason", "unsupported sasl mechanism").Msg("connection closed: unsupported SASL mechanism")
		p.closeAfter = true
	default:
		c.sasl.mechanism = req.Mechanism
		c.sasl.session = c.sasl.newSession(req.Mechanism)
		c.sasl.raw = h.version == 0
		log.Debug().Str("mechanism", req.Mechanism).Bool("raw_tokens", c.sasl.raw).Msg("SASL handshake")
	}
	return p, true
}
