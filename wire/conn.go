package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection: a reader goroutine that decodes and handles
// requests in order, and a writer goroutine that resolves their replies and
// writes responses in the same order.
//
// What an idle connection holds is small (see TestIdleConnectionCost): the
// two goroutines' stacks, this struct with its read-ahead buffer, and the
// socket. Frame buffers are allocated per frame and charged to the
// server's Budget until the frame is answered; the reply queue grows on
// demand; response buffers come from a pool.
type conn struct {
	s *Server
	// nc is the accepted connection: deadlines and Close go to it, so that
	// Shutdown can reach it from another goroutine at any time. rw is what
	// requests are read from and responses written to (nc, or what
	// WrapConn made of it); only the connection's own goroutines use it.
	nc        net.Conn
	rw        net.Conn
	id        uint64
	principal string
	// logv is the connection's logger (remote address, connection id),
	// built on first use (log): most connections log nothing, and
	// zerolog's With allocates 500 bytes.
	logOnce sync.Once
	logv    zerolog.Logger
	// unservedLogged holds the API keys of unserved requests already
	// logged on this connection (unserved); reader goroutine only.
	unservedLogged map[int16]bool
	// refusalLogged: a handler logged a refusal on this connection at
	// info level (Request.LogRefused).
	refusalLogged atomic.Bool
	// sasl is the SASL state (nil when SASL is off); reader goroutine only.
	sasl    *connSASL
	stopped atomic.Bool
	// stop is closed by stopReading: it ends a wait for the budget.
	stop     chan struct{}
	stopOnce sync.Once
	queue    replyQueue
	// writeBroken: a response failed; the writer drains the rest
	// unanswered. Writer goroutine only (writers run one at a time).
	writeBroken bool
	// writeDeadline is the write deadline the writer last set (longDeadline).
	// Writer goroutine only.
	writeDeadline time.Time

	// in[inR:inW] are bytes read ahead of the current frame: the reader
	// waits for a request by reading into in (no buffer is held while
	// idle), and a frame's remaining bytes go straight into its own
	// buffer. Reader goroutine only.
	in       [readAheadBytes]byte
	inR, inW int
	// frames counts the frames read (the first one may be HTTP).
	frames int
	// clientID is the client id of the last request read, which the next
	// one's header reuses when it is the same (parseHeaderReusing).
	clientID *string
	// readDeadline is the read deadline the reader last set (not
	// stopReading's, which only ever makes it earlier).
	readDeadline time.Time

	// ip is the remote IP, the per-address limit's key (invalid for a
	// connection that is not TCP: not limited).
	ip netip.Addr
	// Idle tracking (Server.idleMu): inflight counts requests read but
	// not answered, waiting is set while the reader waits for the next
	// request; the connection is idle, and in the server's idle list,
	// when both say so.
	inflight           int
	waiting, listed    bool
	idleSince          time.Time
	idlePrev, idleNext *conn
}

func (c *conn) log() *zerolog.Logger {
	c.logOnce.Do(func() {
		c.logv = c.s.cfg.Log.With().Str("remote", c.nc.RemoteAddr().String()).Uint64("conn", c.id).Logger()
	})
	return &c.logv
}

// readAheadBytes is what the reader reads at once while waiting for a
// request: a small request (ApiVersions, EndTxn, a small Produce) arrives
// whole in one read, and pipelined small requests share reads.
const readAheadBytes = 512

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
	// t is the request's share of the budget, returned once the answer
	// is written.
	t *ticket
	// series are the request's per-API series (nil: none kept), start
	// when its frame was read.
	series *apiSeries
	start  time.Time
}

// stopReading makes the reader stop before its next request (Shutdown, or
// the writer after a failed response).
func (c *conn) stopReading() {
	c.stopped.Store(true)
	c.stopOnce.Do(func() { close(c.stop) })
	c.nc.SetReadDeadline(time.Now())
}

// setReadDeadline sets the read deadline unless the connection is stopping.
// The order matters: the deadline is set before stopped is checked, so a
// concurrent stopReading either is seen here or overrides this deadline
// (stopReading stores stopped before its own SetReadDeadline). Checking
// first would let a far deadline replace stopReading's immediate one and
// keep a shutting-down reader blocked for IdleTimeout.
func (c *conn) setReadDeadline(d time.Duration) bool {
	c.readDeadline = time.Now().Add(d)
	c.nc.SetReadDeadline(c.readDeadline)
	return !c.stopped.Load()
}

// setIdleDeadline is setReadDeadline(IdleTimeout) for the wait for the
// next request, set only when the one in place is not long enough
// (longDeadline): a client that sends one request at a time waits for
// each, and a deadline set per request is a runtime timer moved per
// request. Skipping it never overrides stopReading's deadline.
func (c *conn) setIdleDeadline() bool {
	if d, ok := longDeadline(c.readDeadline, c.s.cfg.IdleTimeout); !ok {
		c.readDeadline = d
		c.nc.SetReadDeadline(d)
	}
	return !c.stopped.Load()
}

// longDeadline reports whether deadline, already set, bounds a wait
// starting now about as long as timeout: at least 7/8 of it. If not, it
// returns the deadline to set. A wait is so bounded by 7/8 to all of
// timeout, and the deadline is moved at most once per timeout/8 however
// many waits there are.
func longDeadline(deadline time.Time, timeout time.Duration) (time.Time, bool) {
	now := time.Now()
	if deadline.Sub(now) >= timeout-timeout/8 {
		return deadline, true
	}
	return now.Add(timeout), false
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer c.s.forget(c)
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
	if errors.Is(err, io.EOF) {
		// Closed before a byte was sent: a reachability check (a load
		// balancer's, or another coordinator's probe), not a failure.
		c.log().Debug().Err(err).Msg("connection ended before the TLS handshake")
		return
	}
	if err != nil {
		c.log().Warn().Err(err).Str("reason", "tls handshake failed").Msg("connection closed: handshake failed")
		return
	}
	c.rw, c.principal = rw, principal
	if c.s.cfg.WrapConn != nil {
		rw, principal, err := c.s.cfg.WrapConn(c.rw)
		if err != nil {
			c.log().Warn().Err(err).Msg("connection closed: handshake failed")
			return
		}
		c.rw, c.principal = rw, principal
	}
	c.readLoop()
	c.sasl.close()
	c.queue.wait() // the writer finishes what was queued
}

// eagerFrameBytes is the frame size up to which the whole frame buffer is
// allocated (and charged) at once. Larger frames are read in chunks of
// frameChunkBytes, each charged to the budget before it is read, so a
// client that claims a frame just under the limit and sends little holds
// little memory, and one whose frame does not fit the budget is read only
// as far as it fits: reading pauses until budget frees.
const (
	eagerFrameBytes = 1 << 20
	frameChunkBytes = 1 << 20
)

// frameChunks recycles the chunks of large frames.
var frameChunks = sync.Pool{New: func() any { b := make([]byte, frameChunkBytes); return &b }}

func (c *conn) readLoop() {
	for {
		if c.inR == c.inW {
			// Nothing read ahead: wait for the next request.
			c.s.waitingForRequest(c)
			if !c.setIdleDeadline() {
				return
			}
			if err := c.fill(1); err != nil {
				c.logReadEnd(err, "waiting for a request")
				return
			}
		}
		c.s.requestStarted(c)
		if c.frameBuffered() {
			// The whole frame came with its first byte (most
			// requests do): no read to bound, so the deadline, a
			// timer reset per request, stays as it is.
			if c.stopped.Load() {
				return
			}
		} else if !c.setReadDeadline(c.s.cfg.FrameTimeout) {
			return
		}
		if err := c.fill(4); err != nil {
			c.logReadEnd(eofIsUnexpected(err), "reading a frame size")
			return
		}
		sizeBytes := c.in[c.inR : c.inR+4]
		size := int32(binary.BigEndian.Uint32(sizeBytes))
		raw := c.sasl != nil && c.sasl.raw
		if err := c.checkFrameSize(size, raw); err != nil {
			if c.frames == 0 && c.notKafka(sizeBytes) {
				return
			}
			c.log().Warn().Err(err).Str("reason", "bad frame size").Msg("connection closed: bad frame size")
			return
		}
		c.inR += 4
		c.frames++
		t := c.s.budget.newTicket(c.s.ctx, c.stop)
		frame, err := c.readBody(t, int(size))
		if err != nil {
			t.finish()
			c.logReadEnd(err, "reading a frame")
			return
		}
		var p pending
		var ok bool
		if raw {
			p, ok = c.rawToken(frame)
		} else if m := c.s.cfg.Requests; m != nil {
			start := time.Now()
			if p, ok = c.handleFrame(t, frame); ok && !p.isRaw {
				if p.series = m.series(p.h.key, p.h.version); p.series != nil {
					p.series.requests.Inc()
					p.start = start
				}
			}
		} else {
			p, ok = c.handleFrame(t, frame)
		}
		t.doneGrowing()
		if !ok {
			t.finish()
			return
		}
		p.t = t
		if c.queue.push(p) {
			go c.writeLoop()
		}
		if p.closeAfter {
			return
		}
	}
}

// frameBuffered reports whether a whole frame, its size and body, is read
// ahead already.
func (c *conn) frameBuffered() bool {
	n := c.inW - c.inR
	if n < 4 {
		return false
	}
	size := int32(binary.BigEndian.Uint32(c.in[c.inR:]))
	return size >= 0 && int(size) <= n-4
}

// fill reads until at least n bytes are read ahead.
func (c *conn) fill(n int) error {
	for c.inW-c.inR < n {
		if c.inR > 0 {
			c.inW = copy(c.in[:], c.in[c.inR:c.inW])
			c.inR = 0
		}
		m, err := c.rw.Read(c.in[c.inW:])
		c.inW += m
		if err != nil && c.inW-c.inR < n {
			return err
		}
	}
	return nil
}

func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// checkFrameSize checks a frame's length prefix: before SASL
// authentication the limit is 512 KiB, a frame larger than the whole budget
// could never be read, and a raw SASL token (after SaslHandshake v0) has no
// request header, so it may be shorter than one.
func (c *conn) checkFrameSize(size int32, raw bool) error {
	limit := c.s.cfg.MaxFrameBytes
	if c.sasl.pendingAuth() {
		limit = min(limit, maxPreAuthFrameBytes)
	}
	if bl := c.s.budget.Limit(); bl < int64(limit) {
		limit = int32(bl)
	}
	if raw && size >= 0 && size <= limit {
		return nil
	}
	return checkFrameSize(size, limit)
}

// readBody reads a frame body of size bytes, size already checked against
// the limit, charging t as it goes (chargeFrame).
func (c *conn) readBody(t *ticket, size int) ([]byte, error) {
	if size <= eagerFrameBytes {
		if err := c.chargeFrame(t, size); err != nil {
			return nil, err
		}
		frame := make([]byte, size)
		if err := c.readFull(frame); err != nil {
			return nil, err
		}
		return frame, nil
	}
	chunks := make([]*[]byte, 0, (size+frameChunkBytes-1)/frameChunkBytes)
	defer func() {
		for _, ch := range chunks {
			frameChunks.Put(ch)
		}
	}()
	for got := 0; got < size; {
		n := min(frameChunkBytes, size-got)
		if err := c.chargeFrame(t, n); err != nil {
			return nil, err
		}
		ch := frameChunks.Get().(*[]byte)
		chunks = append(chunks, ch)
		if err := c.readFull((*ch)[:n]); err != nil {
			return nil, err
		}
		got += n
	}
	// One contiguous frame for the decoder; each chunk goes back to the
	// pool as soon as it is copied (the copy itself is not charged).
	frame := make([]byte, size)
	for i, ch := range chunks {
		copy(frame[i*frameChunkBytes:], (*ch)[:min(frameChunkBytes, size-i*frameChunkBytes)])
		frameChunks.Put(ch)
		chunks[i] = nil
	}
	chunks = chunks[:0]
	return frame, nil
}

// chargeFrame charges n bytes of the frame being read. Time spent waiting
// for the budget does not count against FrameTimeout: the deadline starts
// again once the bytes are granted.
func (c *conn) chargeFrame(t *ticket, n int) error {
	waited, err := t.charge(int64(n))
	if err != nil {
		return err
	}
	if waited && !c.setReadDeadline(c.s.cfg.FrameTimeout) {
		return net.ErrClosed
	}
	return nil
}

// readFull fills b from what was read ahead, then from the connection.
func (c *conn) readFull(b []byte) error {
	n := copy(b, c.in[c.inR:c.inW])
	c.inR += n
	if n == len(b) {
		return nil
	}
	_, err := io.ReadFull(c.rw, b[n:])
	return eofIsUnexpected(err)
}

// logReadEnd logs why reading stopped; a clean close by the peer or a
// shutdown is not worth a warning.
func (c *conn) logReadEnd(err error, during string) {
	if c.stopped.Load() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		c.log().Debug().Err(err).Str("during", during).Msg("connection ended")
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.log().Warn().Str("during", during).Str("reason", "read timeout").Msg("connection closed: read timeout")
		return
	}
	c.log().Warn().Err(err).Str("during", during).Str("reason", "read error").Msg("connection closed: read error")
}

// handleFrame decodes one frame and runs its handler. It returns false when
// the connection must be closed.
//
// Every request runs its handler below this frame, a leader's Produce with
// its registration at the coordinator included: the refusals and the fault
// path are functions of their own, so that these frames stay small and the
// connection's stack seldom has to grow.
func (c *conn) handleFrame(t *ticket, frame []byte) (pending, bool) {
	h, body, err := parseHeaderReusing(frame, c.clientID)
	c.clientID = h.clientID
	if err != nil {
		c.log().Warn().Int16("api_key", h.key).Int16("api_version", h.version).Err(err).Str("reason", "bad request header").Msg("connection closed: bad request header")
		return pending{}, false
	}
	req := &Request{
		Key: h.key, Version: h.version, CorrelationID: h.correlationID, ClientID: h.clientID, Remote: c.nc.RemoteAddr(),
		ConnID: c.id, Principal: c.principal, Stopping: c.s.draining, Log: c.s.cfg.Log, sec: c.s.sec,
		refusalLogged: &c.refusalLogged,
	}
	if c.sasl.pendingAuth() && h.key != 18 && h.key != 17 && h.key != 36 {
		return c.refuseBeforeAuth(req)
	}
	if h.key == envelopeKey && c.s.cfg.Envelope {
		return c.envelope(t, h, body, req)
	}
	rng, known := c.s.advertised[h.key]
	if !known {
		return c.unserved(h, body, req)
	}
	if h.version < rng[0] || h.version > rng[1] || refused(h.key, h.version) {
		return c.refuseVersion(h, req, rng)
	}
	decoded, err := decodeBody(h, body)
	if err != nil {
		return c.refuseUndecodable(req, err)
	}
	if f := c.s.cfg.Faults; f.Armed() {
		return c.serveFaulty(t, h, req, decoded)
	}
	return c.serveDecoded(t, h, req, decoded)
}

// refuseBeforeAuth closes the connection: Kafka closes it too, since
// before authentication only ApiVersions and the SASL exchange are allowed.
func (c *conn) refuseBeforeAuth(req *Request) (pending, bool) {
	req.Logger().Warn().Str("reason", "not authenticated").Msg("connection closed: request before SASL authentication")
	return pending{}, false
}

// refuseVersion answers a request at a version outside the advertised
// range, or advertised but refused.
func (c *conn) refuseVersion(h header, req *Request, rng [2]int16) (pending, bool) {
	if h.version < rng[0] || h.version > rng[1] {
		if h.key == 18 && h.version > rng[1] {
			// KIP-511: a newer client's ApiVersions gets a v0 answer
			// with UNSUPPORTED_VERSION and our ApiVersions range, so
			// it can retry at a version we speak.
			req.Logger().Debug().Int16("max_version", rng[1]).Msg("ApiVersions above our max: KIP-511 answer")
			return pending{h: header{key: 18, version: 0, correlationID: h.correlationID}, reply: Now(c.s.apiVersionsResponse(0, 35, ""))}, true
		}
		req.Logger().Warn().Int16("min_version", rng[0]).Int16("max_version", rng[1]).Str("reason", "unsupported version").Msg("connection closed: unsupported request")
		return pending{}, false
	}
	// Advertised but refused, as Kafka 4.x does (refused.go).
	req.Logger().Info().Str("client_id", derefOr(h.clientID, "")).Str("api", kmsg.NameForKey(h.key)).
		Int16("lowest_accepted", refusedBelow[h.key]).Str("reason", "version removed in Kafka 4.0 (KIP-896)").
		Msg("connection closed: advertised but refused request version, as Kafka 4.x does")
	return pending{}, false
}

// refuseUndecodable closes the connection on a body kmsg cannot decode.
func (c *conn) refuseUndecodable(req *Request, err error) (pending, bool) {
	req.Logger().Warn().Err(err).Str("reason", "undecodable request").Msg("connection closed: undecodable request")
	return pending{}, false
}

// serveFaulty is serveDecoded with the armed faults around it.
func (c *conn) serveFaulty(t *ticket, h header, req *Request, decoded kmsg.Request) (pending, bool) {
	d, answer, drop := c.s.faultBefore(c.stop, req, decoded)
	if drop {
		return pending{}, false
	}
	if answer != nil {
		return pending{h: h, reply: answer}, true
	}
	p, ok := c.serveDecoded(t, h, req, decoded)
	if ok && !p.isRaw {
		p.reply = c.s.faultAfter(d, c.stop, p.reply)
	}
	return p, ok
}

// serveDecoded answers a decoded request: ApiVersions and the SASL
// exchange here, everything else by its handler.
func (c *conn) serveDecoded(t *ticket, h header, req *Request, decoded kmsg.Request) (pending, bool) {
	if h.key == 18 || c.sasl != nil {
		if p, ok, done := c.serveOwn(h, req, decoded); done {
			return p, ok
		}
	}
	req.Body = decoded
	// The handler's context is the server's, carrying the request's
	// budget share (BudgetFrom).
	reply, err := c.s.callHandler(t, req)
	if err != nil {
		return c.handlerFailed(req, err)
	}
	return pending{h: h, reply: reply}, true
}

// serveOwn answers what the server answers itself: ApiVersions, and the
// SASL exchange when SASL is on (done false: a handler's request).
func (c *conn) serveOwn(h header, req *Request, decoded kmsg.Request) (p pending, ok, done bool) {
	if h.key == 18 {
		return pending{h: h, reply: Now(c.s.answerApiVersions(decoded.(*kmsg.ApiVersionsRequest)))}, true, true
	}
	switch body := decoded.(type) {
	case *kmsg.SASLHandshakeRequest:
		p, ok = c.saslHandshake(h, body, *req.Logger())
		return p, ok, true
	case *kmsg.SASLAuthenticateRequest:
		p, ok = c.saslAuthenticate(h, body, *req.Logger())
		return p, ok, true
	}
	return pending{}, false, false
}

// handlerFailed closes the connection after a handler failed.
func (c *conn) handlerFailed(req *Request, err error) (pending, bool) {
	req.Logger().Error().Err(err).Str("reason", "handler failed").Msg("connection closed: handler failed")
	return pending{}, false
}

// unserved answers a request for an API this node does not advertise with
// UNSUPPORTED_VERSION (UnservedResponse), which clients treat as final, so
// they fail at once with a clear error rather than reconnect and retry in a
// silent loop after a closed connection (Kafka closes it). The first such
// request of each API on a connection is logged at info, naming the API. A
// key kmsg does not know, or a version it cannot decode, still closes the
// connection: there is no response format to answer with.
func (c *conn) unserved(h header, body []byte, req *Request) (pending, bool) {
	decoded, err := decodeBody(h, body)
	var resp kmsg.Response
	if err == nil {
		resp = UnservedResponse(decoded, kerr.UnsupportedVersion.Code)
	}
	if err != nil || (resp == nil && h.key != 0) {
		req.Logger().Warn().Str("reason", "unsupported api key").Msg("connection closed: unsupported request")
		return pending{}, false
	}
	if !c.unservedLogged[h.key] {
		if c.unservedLogged == nil {
			c.unservedLogged = map[int16]bool{}
		}
		c.unservedLogged[h.key] = true
		req.Logger().Info().Str("api", kmsg.NameForKey(h.key)).Str("client_id", derefOr(h.clientID, "")).
			Msg("request for an API this node does not serve: answered UNSUPPORTED_VERSION (logged once per connection and API)")
	}
	return pending{h: h, reply: Now(resp)}, true
}

func derefOr(s *string, or string) string {
	if s == nil {
		return or
	}
	return *s
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
func encodeReply(dst []byte, p pending) (frame []byte, resp kmsg.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			frame, resp, err = nil, nil, fmt.Errorf("encode panic: %v\n%s", r, debug.Stack())
		}
	}()
	if p.isRaw {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p.raw)))
		return append(dst, p.raw...), nil, nil
	}
	resp, err = resolveReply(p.h.key, p.h.version, p.reply)
	if err != nil || resp == nil {
		return nil, nil, err
	}
	return appendResponse(dst, p.h.correlationID, resp), resp, nil
}

// writeBufs recycles response buffers, so that an idle connection keeps
// none; buffers grown past maxPooledWriteBuf are left to the GC.
var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledWriteBuf = 1 << 20

// writeLoop writes the queued responses in order, and ends once the queue
// is empty: it runs only while the connection has something to answer
// (replyQueue.push starts it), so an idle connection has no writer
// goroutine.
func (c *conn) writeLoop() {
	defer c.queue.writerDone()
	for {
		p, ok := c.queue.pop()
		if !ok {
			return
		}
		if c.writeBroken {
			p.t.finish()
			continue // drain so the reader never blocks
		}
		buf := writeBufs.Get().(*[]byte)
		frame, resp, err := encodeReply((*buf)[:0], p)
		if p.series != nil {
			// Answered, dropped or failed: its time ends here.
			c.s.cfg.Requests.answered(p.series, p.h.key, p.h.version, p.start, resp)
		}
		if err != nil {
			writeBufs.Put(buf)
			p.t.finish()
			c.log().Error().Int16("api_key", p.h.key).Int16("api_version", p.h.version).Int32("correlation_id", p.h.correlationID).Err(err).Str("reason", "request failed").Msg("connection closed: request failed")
			c.writeBroken = true
			c.stopReading()
			continue
		}
		if frame == nil {
			writeBufs.Put(buf)
			p.t.finish()
			c.s.answered(c)
			continue // Produce with acks=0 has no response
		}
		// WriteTimeout bounds the write (to 7/8 of it at least):
		// longDeadline moves the deadline, a runtime timer, only when
		// it is not long enough, not once per response.
		if d, ok := longDeadline(c.writeDeadline, c.s.cfg.WriteTimeout); !ok {
			c.writeDeadline = d
			c.nc.SetWriteDeadline(d)
		}
		// Write per response: the next reply may block on an fsync, and
		// this response must not wait behind it.
		_, err = c.rw.Write(frame)
		if cap(frame) <= maxPooledWriteBuf {
			*buf = frame
			writeBufs.Put(buf)
		}
		p.t.finish()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.log().Warn().Err(err).Str("reason", "write failed").Msg("connection closed: write failed")
			}
			c.writeBroken = true
			c.stopReading()
			continue
		}
		c.s.answered(c)
	}
}
