package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/faults"
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
	// ClusterID and NodeID are this node's identity, which ApiVersions
	// v5+ (KIP-1242) lets a client check: one that names another cluster
	// or node gets REBOOTSTRAP_REQUIRED. An empty ClusterID (a node that
	// belongs to no cluster, as in protocol tests) checks nothing but the
	// both-or-neither rule.
	ClusterID string
	NodeID    int32
	// MaxFrameBytes is the largest request frame accepted (default 100 MiB).
	MaxFrameBytes int32
	// FrameTimeout bounds how long the rest of a frame may take once its
	// first byte arrived (default 30 s): a client that sends half a frame
	// and stalls is dropped.
	FrameTimeout time.Duration
	// IdleTimeout closes connections with no request for that long
	// (default 10 min, Kafka's connections.max.idle.ms); the deadline is
	// moved only once it is shorter than 7/8 of it, so an idle connection
	// closes after 7/8 to all of IdleTimeout.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one response (default 30 s), to 7/8
	// of it at least (the deadline is moved only once shorter than that).
	WriteTimeout time.Duration
	// MaxConns caps concurrent connections (default 10,000). At the cap,
	// a new connection closes the connection that has been idle longest,
	// if one has been idle for a second or more (evictIdleAfter), with a
	// log line; otherwise the new one is closed at once with a log line.
	MaxConns int
	// MaxInFlight caps the requests read but not yet answered on one
	// connection (default 256); past it the server stops reading.
	MaxInFlight int
	// Log receives structured logs; the zero logger discards them.
	Log zerolog.Logger
	// WrapConn, when set, runs on every accepted connection before any
	// request is read (after the TLS handshake when Security.TLS is set).
	// It returns the connection to use and the authenticated principal.
	WrapConn func(net.Conn) (net.Conn, string, error)
	// Security turns on TLS, SASL and authorization (see security.go).
	// Nil: plaintext, no authentication, every request allowed.
	Security *SecurityConfig
	// Faults, when set, are the faults injected into this node on demand
	// (faults.go): asked about every request while one is set.
	Faults *faults.Node
	// Requests, when set, are this node's per-API series (api_metrics.go).
	Requests *NodeRequestMetrics
	// Limits: the memory budget for requests in flight and the
	// per-address connection limit.
	Limits
	// Envelope makes the server answer Envelope (58_envelope.go): the
	// controller's node, to which the other nodes forward their clients'
	// controller requests with the clients' principals.
	Envelope bool
}

// Limits are the limits a node gives its listeners (node passes them
// through from the command line).
type Limits struct {
	// Budget bounds the memory of requests in flight (see Budget); servers
	// that share one share the bound. Nil: the process's (ProcessBudget).
	Budget *Budget
	// MaxConnsPerIP caps the connections from one IP address (default
	// 1,000, Kafka's max.connections.per.ip); an excess connection is
	// closed at accept with a log line. Negative: no limit.
	MaxConnsPerIP int
}

// DefaultMaxConnsPerIP is the default of Limits.MaxConnsPerIP.
const DefaultMaxConnsPerIP = 1000

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
	sec        *serverSecurity    // nil when Config.Security is nil
	apiKeys    []kmsg.ApiVersionsResponseApiKey
	// apiKeysAccepted is apiKeys without the versions refused at the
	// header (refused.go): what clients other than librdkafka are shown.
	apiKeysAccepted []kmsg.ApiVersionsResponseApiKey

	ctx    context.Context
	cancel context.CancelFunc
	// draining is closed when Shutdown begins (Request.Stopping).
	draining  chan struct{}
	drainOnce sync.Once

	budget *Budget

	mu      sync.Mutex
	conns   map[*conn]struct{}
	perIP   map[netip.Addr]int
	closing bool
	wg      sync.WaitGroup

	// idle lists the idle connections, longest idle first (limits.go).
	idleMu   sync.Mutex
	idle     connList
	counters connCounters
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
	if cfg.MaxConnsPerIP == 0 {
		cfg.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	sec, err := newServerSecurity(cfg.Security, cfg.Registry)
	if err != nil {
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("wire: listen %s: %w", cfg.Addr, err)
		}
	}
	s := &Server{cfg: cfg, ln: ln, conns: make(map[*conn]struct{}), perIP: make(map[netip.Addr]int), sec: sec, budget: cfg.Budget}
	if s.budget == nil {
		s.budget = ProcessBudget()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.draining = make(chan struct{})
	s.advertised, s.apiKeys = advertise(cfg.Registry, cfg.Profile, sec.builtinKeys())
	s.apiKeysAccepted = acceptedOnly(s.apiKeys)
	s.wg.Add(1)
	go s.acceptLoop()
	liveServers.add(s)
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Budget is the memory budget of the server's requests in flight.
func (s *Server) Budget() *Budget { return s.budget }

// Advertised returns the version range this server advertises for key.
func (s *Server) Advertised(key int16) (minVersion, maxVersion int16, ok bool) {
	r, ok := s.advertised[key]
	return r[0], r[1], ok
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
		c := &conn{s: s, nc: nc, rw: nc, id: connIDs.Add(1), sasl: s.sec.newConnSASL(), stop: make(chan struct{}), ip: ipOf(nc.RemoteAddr())}
		c.queue.max = s.cfg.MaxInFlight
		if !s.admit(c) {
			nc.Close()
			if s.isClosing() {
				return
			}
			continue
		}
		go c.serve()
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Shutdown stops accepting, stops reading new requests, closes
// Request.Stopping (long waits answer now), lets in-flight requests finish
// until ctx is done, then cancels the handlers' context and closes every
// connection.
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
	// Long waits (a Fetch long-poll) answer now with what they have;
	// replies waiting on a write already under way still complete.
	s.drainOnce.Do(func() { close(s.draining) })
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	defer liveServers.remove(s)
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
