package wire

import (
	"bytes"
	"fmt"
	"time"
)

// httpMethods are the first four bytes of an HTTP/1 request line (and of
// the HTTP/2 preface). Read as a Kafka length prefix each is over 1 GiB,
// so a frame that starts with one can never be a valid request.
var httpMethods = [][]byte{
	[]byte("GET "), []byte("HEAD"), []byte("POST"), []byte("PUT "), []byte("DELE"),
	[]byte("OPTI"), []byte("PATC"), []byte("CONN"), []byte("TRAC"), []byte("PRI "),
}

// notKafka recognises, in the first length prefix of a connection that is
// already refused as too large, an HTTP request or a TLS handshake on a
// plaintext listener, and says so in one log line instead of a frame size
// warning. An HTTP client also gets a short 400 answer naming the
// problem, so that it reports it instead of retrying. It returns true when
// it handled the connection (which the caller then closes).
func (c *conn) notKafka(prefix []byte) bool {
	remote := c.nc.RemoteAddr().String()
	switch {
	case isHTTP(prefix):
		c.s.counters.notKafka.Add(1)
		c.log().Warn().Str("reason", "http on a kafka port").
			Msgf("HTTP request on a Kafka port from %s: this listener speaks the Kafka protocol (the admin API is on --admin-listen)", remote)
		c.answerHTTP()
		return true
	case !c.s.sec.tlsOn() && prefix[0] == 0x16 && prefix[1] == 0x03:
		// A TLS record header: handshake (22), version 3.x.
		c.s.counters.notKafka.Add(1)
		c.log().Warn().Str("reason", "tls on a plaintext port").
			Msgf("TLS handshake on a plaintext Kafka port from %s: this listener does not use TLS", remote)
		return true
	}
	return false
}

func isHTTP(prefix []byte) bool {
	for _, m := range httpMethods {
		if bytes.Equal(prefix, m) {
			return true
		}
	}
	return false
}

const httpAnswerBody = `{"error":"this is a Kafka protocol listener, not HTTP: the txncoord admin API listens on --admin-listen"}` + "\n"

// answerHTTP writes a 400 answer, then reads what the client sends for a
// moment before the connection closes: closing with unread request bytes
// would reset the connection, and the client could lose the answer.
func (c *conn) answerHTTP() {
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c.rw, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		len(httpAnswerBody), httpAnswerBody)
	if !c.setReadDeadline(time.Second) {
		return
	}
	for range 128 { // at most 64 KiB
		if _, err := c.rw.Read(c.in[:]); err != nil {
			return
		}
	}
}
