package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection: a reader goroutine that decodes and handles
// requests in order, and a writer goroutine that resolves their replies and
// writes responses in the same order.
type conn struct {
	s *Server
	// nc is the accepted connection: deadlines and Close go to it, so that
	// Shutdown can reach it from another goroutine at any time. rw is what
	// requests are read from and responses written to (nc, or what
	// WrapConn made of it); only the connection's own goroutines use it.
	nc        net.Conn
	rw        net.Conn
	id        uint64
	log       zerolog.Logger
	principal string
	// sasl is the SASL state (nil when SASL is off); reader goroutine only.
	sasl    *connSASL
	stopped atomic.Bool
}

type pending struct {
	h     header
	reply Reply
	// isRaw: answer with raw (a SASL token after SaslHandshake v0, no
	// Kafka header) instead of resolving reply.
	isRaw bool
	raw   []byte
	// closeAfter: the reader stops after queueing this answer, so the
	// connection closes once it is written (failed SASL authentication).
	closeAfter bool
}

// stopReading makes the reader stop before its next request (Shutdown, or
// the writer after a failed response).
func (c *conn) stopReading() {
	c.stopped.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

// setReadDeadline sets the read deadline unless the connection is stopping.
// The order matters: the deadline is set before stopped is checked, so a
// concurrent stopReading either is seen here or overrides this deadline
// (stopReading stores stopped before its own SetReadDeadline). Checking
// first would let a far deadline replace stopReading's immediate one and
// keep a shutting-down reader blocked for IdleTimeout.
func (c *conn) setReadDeadline(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	return !c.stopped.Load()
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	}()
	defer c.nc.Close()
	// The write deadline bounds the TLS handshake's writes; the read
	// deadline, set through setReadDeadline, its reads, and lets a
	// concurrent Shutdown interrupt it.
	if c.s.sec.tlsOn() {
		timeout := c.s.sec.handshakeTimeout(c.s.cfg.FrameTimeout)
		c.nc.SetWriteDeadline(time.Now().Add(timeout))
		if !c.setReadDeadline(timeout) {
			return
		}
	}
	rw, principal, err := c.s.sec.handshake(c.nc)
	if err != nil {
		c.log.Warn().Err(err).Str("reason", "tls handshake failed").Msg("connection closed: handshake failed")
		return
	}
	c.rw, c.principal = rw, principal
	if c.s.cfg.WrapConn != nil {
		rw, principal, err := c.s.cfg.WrapConn(c.rw)
		if err != nil {
			c.log.Warn().Err(err).Msg("connection closed: handshake failed")
			return
		}
		c.rw, c.principal = rw, principal
	}
	queue := make(chan pending, c.s.cfg.MaxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop(queue)
	}()
	c.readLoop(queue)
	close(queue)
	<-writerDone
}

// eagerFrameBytes is the frame size up to which the whole frame buffer is
// allocated at once. Larger frames grow their buffer as bytes arrive, so a
// client that claims a frame just under the limit and sends nothing costs
// almost no memory.
const eagerFrameBytes = 1 << 20

func (c *conn) readLoop(queue chan<- pending) {
	br := bufio.NewReaderSize(c.rw, 64<<10)
	var sizeBuf [4]byte
	for {
		if !c.setReadDeadline(c.s.cfg.IdleTimeout) {
			return
		}
		if _, err := br.Peek(1); err != nil {
			c.logReadEnd(err, "waiting for a request")
			return
		}
		if !c.setReadDeadline(c.s.cfg.FrameTimeout) {
			return
		}
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			c.logReadEnd(err, "reading a frame size")
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		raw := c.sasl != nil && c.sasl.raw
		if err := c.checkFrameSize(size, raw); err != nil {
			c.log.Warn().Err(err).Str("reason", "bad frame size").Msg("connection closed: bad frame size")
			return
		}
		frame, err := readFrame(br, int(size))
		if err != nil {
			c.logReadEnd(err, "reading a frame")
			return
		}
		var p pending
		var ok bool
		if raw {
			p, ok = c.rawToken(frame)
		} else {
			p, ok = c.handleFrame(frame)
		}
		if !ok {
			return
		}
		queue <- p
		if p.closeAfter {
			return
		}
	}
}

// checkFrameSize checks a frame's length prefix: before SASL
// authentication the limit is 512 KiB, and a raw SASL token (after
// SaslHandshake v0) has no request header, so it may be shorter than one.
func (c *conn) checkFrameSize(size int32, raw bool) error {
	limit := c.s.cfg.MaxFrameBytes
	if c.sasl.pendingAuth() {
		limit = min(limit, maxPreAuthFrameBytes)
	}
	if raw && size >= 0 && size <= limit {
		return nil
	}
	return checkFrameSize(size, limit)
}

// readFrame reads a frame body of size bytes, size already checked against
// the limit.
func readFrame(r io.Reader, size int) ([]byte, error) {
	if size <= eagerFrameBytes {
		frame := make([]byte, size)
		_, err := io.ReadFull(r, frame)
		return frame, err
	}
	frame := make([]byte, 0, eagerFrameBytes)
	for len(frame) < size {
		if len(frame) == cap(frame) {
			// Double, so a large frame costs a few copies at most.
			grown := make([]byte, len(frame), min(2*cap(frame), size))
			copy(grown, frame)
			frame = grown
		}
		n, err := r.Read(frame[len(frame):cap(frame)])
		frame = frame[:len(frame)+n]
		if err != nil && len(frame) < size {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return frame, nil
}

// logReadEnd logs why reading stopped; a clean close by the peer or a
// shutdown is not worth a warning.
func (c *conn) logReadEnd(err error, during string) {
	if c.stopped.Load() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		c.log.Debug().Err(err).Str("during", during).Msg("connection ended")
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.log.Warn().Str("during", during).Str("reason", "read timeout").Msg("connection closed: read timeout")
		return
	}
	c.log.Warn().Err(err).Str("during", during).Str("reason", "read error").Msg("connection closed: read error")
}

// handleFrame decodes one frame and runs its handler. It returns false when
// the connection must be closed.
func (c *conn) handleFrame(frame []byte) (pending, bool) {
	h, body, err := parseHeader(frame)
	if err != nil {
		c.log.Warn().Int16("api_key", h.key).Int16("api_version", h.version).Err(err).Str("reason", "bad request header").Msg("connection closed: bad request header")
		return pending{}, false
	}
	req := &Request{
		Key: h.key, Version: h.version, CorrelationID: h.correlationID, ClientID: h.clientID, Remote: c.nc.RemoteAddr(),
		ConnID: c.id, Principal: c.principal, Stopping: c.s.draining, Log: c.log, sec: c.s.sec,
	}
	if c.sasl.pendingAuth() && h.key != 18 && h.key != 17 && h.key != 36 {
		// Kafka closes the connection too: before authentication only
		// ApiVersions and the SASL exchange are allowed.
		req.Logger().Warn().Str("reason", "not authenticated").Msg("connection closed: request before SASL authentication")
		return pending{}, false
	}
	rng, known := c.s.advertised[h.key]
	if !known {
		req.Logger().Warn().Str("reason", "unsupported api key").Msg("connection closed: unsupported request")
		return pending{}, false
	}
	if h.version < rng[0] || h.version > rng[1] {
		if h.key == 18 && h.version > rng[1] {
			// KIP-511: a newer client's ApiVersions gets a v0 answer
			// with UNSUPPORTED_VERSION and our ApiVersions range, so
			// it can retry at a version we speak.
			req.Logger().Debug().Int16("max_version", rng[1]).Msg("ApiVersions above our max: KIP-511 answer")
			return pending{h: header{key: 18, version: 0, correlationID: h.correlationID}, reply: Now(c.s.apiVersionsResponse(0, 35))}, true
		}
		req.Logger().Warn().Int16("min_version", rng[0]).Int16("max_version", rng[1]).Str("reason", "unsupported version").Msg("connection closed: unsupported request")
		return pending{}, false
	}
	decoded, err := decodeBody(h, body)
	if err != nil {
		req.Logger().Warn().Err(err).Str("reason", "undecodable request").Msg("connection closed: undecodable request")
		return pending{}, false
	}
	if h.key == 18 {
		return pending{h: h, reply: Now(c.s.apiVersionsResponse(h.version, 0))}, true
	}
	if c.sasl != nil {
		switch body := decoded.(type) {
		case *kmsg.SASLHandshakeRequest:
			return c.saslHandshake(h, body, *req.Logger())
		case *kmsg.SASLAuthenticateRequest:
			return c.saslAuthenticate(h, body, *req.Logger())
		}
	}
	req.Body = decoded
	reply, err := c.s.callHandler(c.s.ctx, req)
	if err != nil {
		req.Logger().Error().Err(err).Str("reason", "handler failed").Msg("connection closed: handler failed")
		return pending{}, false
	}
	return pending{h: h, reply: reply}, true
}

// callHandler runs req's handler, turning a panic into an error so that one
// bad request closes one connection (or fails one in-process call) and never
// the process. Connections and LocalClient both call it.
func (s *Server) callHandler(ctx context.Context, req *Request) (reply Reply, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	reg := s.cfg.Registry.handlers[req.Key]
	reply = reg.handle(ctx, req)
	if reply == nil {
		return nil, errors.New("handler returned a nil Reply")
	}
	return reply, nil
}

// resolveReply runs a handler's Reply for a request of key at version and
// checks its response: the key must match, and the response is set to the
// request's version. A panic in the Reply becomes an error. A nil response
// with a nil error means no response (Produce acks=0). Connections and
// LocalClient both call it.
func resolveReply(key, version int16, reply Reply) (resp kmsg.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, fmt.Errorf("reply panic: %v\n%s", r, debug.Stack())
		}
	}()
	resp, err = reply()
	if err != nil || resp == nil {
		return nil, err
	}
	if resp.Key() != key {
		return nil, fmt.Errorf("handler answered key %d with a response of key %d", key, resp.Key())
	}
	resp.SetVersion(version)
	return resp, nil
}

// encodeReply resolves a reply and appends its response frame to dst. It
// recovers panics from the Reply (resolveReply) and from encoding (a field
// the version cannot carry) so that a handler bug closes one connection,
// not the process. A nil frame with a nil error means no response (Produce
// acks=0).
func encodeReply(dst []byte, p pending) (frame []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			frame, err = nil, fmt.Errorf("encode panic: %v\n%s", r, debug.Stack())
		}
	}()
	if p.isRaw {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p.raw)))
		return append(dst, p.raw...), nil
	}
	resp, err := resolveReply(p.h.key, p.h.version, p.reply)
	if err != nil || resp == nil {
		return nil, err
	}
	return appendResponse(dst, p.h.correlationID, resp), nil
}

func (c *conn) writeLoop(queue <-chan pending) {
	var buf []byte
	broken := false
	for p := range queue {
		if broken {
			continue // drain so the reader never blocks
		}
		frame, err := encodeReply(buf[:0], p)
		if err != nil {
			c.log.Error().Int16("api_key", p.h.key).Int16("api_version", p.h.version).Int32("correlation_id", p.h.correlationID).Err(err).Str("reason", "request failed").Msg("connection closed: request failed")
			broken = true
			c.stopReading()
			continue
		}
		if frame == nil {
			continue // Produce with acks=0 has no response
		}
		buf = frame
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		// Write per response: the next reply may block on an fsync, and
		// this response must not wait behind it.
		if _, err = c.rw.Write(buf); err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.log.Warn().Err(err).Str("reason", "write failed").Msg("connection closed: write failed")
			}
			broken = true
			c.stopReading()
		}
	}
}
