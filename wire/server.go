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
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Addr is the address to listen on ("127.0.0.1:0" picks a free port).
	// Ignored when Listener is set.
	Addr     string
	Listener net.Listener
	// Registry holds the handlers. ApiVersions (key 18) is built in and
	// must not be registered.
	Registry *Registry
	// Profile caps the advertised maximum version of every key, as the
	// Kafka release this node pretends to be (kversion presets). A key the
	// profile lacks is not advertised. Nil advertises the registered ranges.
	Profile *kversion.Versions
	// Features returns the features advertised in ApiVersions v3+. It is
	// called per ApiVersions request, so it may change over time.
	Features func() Features
	// MaxFrameBytes is the largest request frame accepted (default 100 MiB).
	MaxFrameBytes int32
	// FrameTimeout bounds how long the rest of a frame may take once its
	// first byte arrived (default 30 s): a client that sends half a frame
	// and stalls is dropped.
	FrameTimeout time.Duration
	// IdleTimeout closes connections with no request for that long
	// (default 10 min, Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one response (default 30 s).
	WriteTimeout time.Duration
	// MaxConns caps concurrent connections (default 10,000); further
	// connections are closed at once with a log line.
	MaxConns int
	// MaxInFlight caps the requests read but not yet answered on one
	// connection (default 256); past it the server stops reading.
	MaxInFlight int
	// Log receives structured logs; the zero logger discards them.
	Log zerolog.Logger
	// WrapConn, when set, runs on every accepted connection before any
	// request is read (TLS, SASL). It returns the connection to use and
	// the authenticated principal.
	WrapConn func(net.Conn) (net.Conn, string, error)
}

// Features are the feature flags advertised in ApiVersions v3+.
type Features struct {
	Supported []SupportedFeature
	Finalized []FinalizedFeature
	// FinalizedEpoch must be >= 0 when any feature is finalized: kmsg
	// omits the tagged field at -1, and kgo then ignores the features.
	FinalizedEpoch int64
}

// SupportedFeature is a feature's supported level range.
type SupportedFeature struct {
	Name     string
	Min, Max int16
}

// FinalizedFeature is a feature's finalized level.
type FinalizedFeature struct {
	Name  string
	Level int16
}

// Server is a Kafka protocol listener.
type Server struct {
	cfg        Config
	ln         net.Listener
	advertised map[int16][2]int16 // key → {min, max}, ApiVersions included
	apiKeys    []kmsg.ApiVersionsResponseApiKey

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	conns    map[*conn]struct{}
	closing  bool
	nextConn atomic.Uint64
	wg       sync.WaitGroup
}

// Start listens and serves in the background until Shutdown.
func Start(cfg Config) (*Server, error) {
	if cfg.Registry == nil {
		return nil, errors.New("wire: no registry")
	}
	if _, _, dup := cfg.Registry.Range(18); dup {
		return nil, errors.New("wire: ApiVersions is built in and must not be registered")
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 10000
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("wire: listen %s: %w", cfg.Addr, err)
		}
	}
	s := &Server{cfg: cfg, ln: ln, conns: make(map[*conn]struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.advertised, s.apiKeys = advertise(cfg.Registry, cfg.Profile)
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Advertised returns the version range this server advertises for key.
func (s *Server) Advertised(key int16) (minVersion, maxVersion int16, ok bool) {
	r, ok := s.advertised[key]
	return r[0], r[1], ok
}

// advertise computes the advertised ranges: the registered range, its
// maximum capped by the profile, plus the built-in ApiVersions.
func advertise(reg *Registry, profile *kversion.Versions) (map[int16][2]int16, []kmsg.ApiVersionsResponseApiKey) {
	ranges := make(map[int16][2]int16)
	capMax := func(key, maxVersion int16) (int16, bool) {
		if profile == nil {
			return maxVersion, true
		}
		pmax, ok := profile.LookupMaxKeyVersion(key)
		if !ok {
			return 0, false
		}
		return min(maxVersion, pmax), true
	}
	if avMax, ok := capMax(18, kmsg.NewPtrApiVersionsRequest().MaxVersion()); ok {
		ranges[18] = [2]int16{0, avMax}
	} else {
		ranges[18] = [2]int16{0, 3}
	}
	for _, key := range reg.Keys() {
		rmin, rmax, _ := reg.Range(key)
		if m, ok := capMax(key, rmax); ok && m >= rmin {
			ranges[key] = [2]int16{rmin, m}
		}
	}
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(ranges))
	for key := int16(0); key <= 1000 && len(keys) < len(ranges); key++ {
		if r, ok := ranges[key]; ok {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = key, r[0], r[1]
			keys = append(keys, k)
		}
	}
	return ranges, keys
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.isClosing() {
				return
			}
			// Temporary accept errors (EMFILE and the like): back off
			// rather than spin, as net/http does.
			delay = min(max(delay*2, 5*time.Millisecond), time.Second)
			s.cfg.Log.Warn().Err(err).Dur("retry_in", delay).Msg("accept failed")
			time.Sleep(delay)
			continue
		}
		delay = 0
		c := &conn{s: s, nc: nc, id: s.nextConn.Add(1)}
		c.log = s.cfg.Log.With().Str("remote", nc.RemoteAddr().String()).Uint64("conn", c.id).Logger()
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return
		}
		if len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			c.log.Warn().Int("max_conns", s.cfg.MaxConns).Msg("connection refused: too many connections")
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Shutdown stops accepting, stops reading new requests, lets in-flight
// requests finish until ctx is done, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.ln.Close()
	for _, c := range conns {
		c.stopReading()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel() // handlers waiting on ctx give up
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// conn is one client connection: a reader goroutine that decodes and handles
// requests in order, and a writer goroutine that resolves their replies and
// writes responses in the same order.
type conn struct {
	s         *Server
	nc        net.Conn
	id        uint64
	log       zerolog.Logger
	principal string
	stopped   atomic.Bool
}

type pending struct {
	h     header
	reply Reply
}

func (c *conn) stopReading() {
	c.stopped.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	}()
	defer c.nc.Close()
	if c.s.cfg.WrapConn != nil {
		nc, principal, err := c.s.cfg.WrapConn(c.nc)
		if err != nil {
			c.log.Warn().Err(err).Msg("connection closed: handshake failed")
			return
		}
		c.nc, c.principal = nc, principal
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

func (c *conn) readLoop(queue chan<- pending) {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	for !c.stopped.Load() {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if _, err := br.Peek(1); err != nil {
			c.logReadEnd(err, "waiting for a request")
			return
		}
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			c.logReadEnd(err, "reading a frame size")
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if err := checkFrameSize(size, c.s.cfg.MaxFrameBytes); err != nil {
			c.log.Warn().Err(err).Msg("connection closed: bad frame size")
			return
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			c.logReadEnd(err, "reading a frame")
			return
		}
		p, ok := c.handleFrame(frame)
		if !ok {
			return
		}
		queue <- p
	}
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
		c.log.Warn().Str("during", during).Msg("connection closed: read timeout")
		return
	}
	c.log.Warn().Err(err).Str("during", during).Msg("connection closed: read error")
}

// handleFrame decodes one frame and runs its handler. It returns false when
// the connection must be closed.
func (c *conn) handleFrame(frame []byte) (pending, bool) {
	h, body, err := parseHeader(frame)
	if err != nil {
		c.log.Warn().Int16("api_key", h.key).Int16("api_version", h.version).Err(err).Msg("connection closed: bad request header")
		return pending{}, false
	}
	rlog := c.log.With().Int16("api_key", h.key).Int16("api_version", h.version).Int32("correlation_id", h.correlationID).Logger()
	rng, known := c.s.advertised[h.key]
	if !known {
		rlog.Warn().Str("reason", "unsupported api key").Msg("connection closed: unsupported request")
		return pending{}, false
	}
	if h.version < rng[0] || h.version > rng[1] {
		if h.key == 18 && h.version > rng[1] {
			// KIP-511: a newer client's ApiVersions gets a v0 answer
			// with UNSUPPORTED_VERSION and our keys, so it can retry
			// at a version we speak.
			return pending{h: header{key: 18, version: 0, correlationID: h.correlationID}, reply: Now(c.s.apiVersionsResponse(0, 35))}, true
		}
		rlog.Warn().Int16("min_version", rng[0]).Int16("max_version", rng[1]).Str("reason", "unsupported version").Msg("connection closed: unsupported request")
		return pending{}, false
	}
	body0, err := decodeBody(h, body)
	if err != nil {
		rlog.Warn().Err(err).Msg("connection closed: undecodable request")
		return pending{}, false
	}
	if h.key == 18 {
		return pending{h: h, reply: Now(c.s.apiVersionsResponse(h.version, 0))}, true
	}
	req := &Request{
		Body: body0, Key: h.key, Version: h.version, CorrelationID: h.correlationID,
		ClientID: h.clientID, Remote: c.nc.RemoteAddr(), ConnID: c.id, Principal: c.principal, Log: rlog,
	}
	reply, err := c.callHandler(req)
	if err != nil {
		rlog.Error().Err(err).Msg("connection closed: handler failed")
		return pending{}, false
	}
	return pending{h: h, reply: reply}, true
}

// callHandler runs a handler, turning a panic into an error so that one bad
// request closes one connection and never the process.
func (c *conn) callHandler(req *Request) (reply Reply, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	reg := c.s.cfg.Registry.handlers[req.Key]
	return reg.handle(c.s.ctx, req), nil
}

func resolve(reply Reply) (resp kmsg.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reply panic: %v\n%s", r, debug.Stack())
		}
	}()
	return reply()
}

func (c *conn) writeLoop(queue <-chan pending) {
	var buf []byte
	broken := false
	for p := range queue {
		if broken {
			continue // drain so the reader never blocks
		}
		resp, err := resolve(p.reply)
		if err != nil {
			c.log.Error().Int16("api_key", p.h.key).Int16("api_version", p.h.version).Err(err).Msg("connection closed: request failed")
			broken = true
			c.stopReading()
			continue
		}
		if resp == nil {
			continue // Produce with acks=0 has no response
		}
		resp.SetVersion(p.h.version)
		buf = appendResponse(buf[:0], p.h.correlationID, resp)
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		// Flush per response: the next reply may block on an fsync, and
		// this response must not wait behind it.
		_, err = c.nc.Write(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.log.Warn().Err(err).Msg("connection closed: write failed")
			}
			broken = true
			c.stopReading()
		}
	}
}

// apiVersionsResponse builds the ApiVersions answer at version v.
func (s *Server) apiVersionsResponse(v int16, errorCode int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(v)
	resp.ErrorCode = errorCode
	resp.ApiKeys = s.apiKeys
	if errorCode != 0 {
		// KIP-511: only the ApiVersions key is required; we send every
		// key, as Kafka does.
		return resp
	}
	resp.FinalizedFeaturesEpoch = -1
	if v >= 3 && s.cfg.Features != nil {
		f := s.cfg.Features()
		for _, sf := range f.Supported {
			x := kmsg.NewApiVersionsResponseSupportedFeature()
			x.Name, x.MinVersion, x.MaxVersion = sf.Name, sf.Min, sf.Max
			resp.SupportedFeatures = append(resp.SupportedFeatures, x)
		}
		for _, ff := range f.Finalized {
			x := kmsg.NewApiVersionsResponseFinalizedFeature()
			x.Name, x.MinVersionLevel, x.MaxVersionLevel = ff.Name, ff.Level, ff.Level
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, x)
		}
		if len(resp.FinalizedFeatures) > 0 {
			resp.FinalizedFeaturesEpoch = max(f.FinalizedEpoch, 0)
		}
	}
	return resp
}
