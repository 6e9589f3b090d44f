package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Proxy.
type Config struct {
	// Target is the address requests are forwarded to.
	Target string
	// Listen is the proxy's address (default "127.0.0.1:0").
	Listen string
	// DialTimeout bounds connecting to Target (default 5 s).
	DialTimeout time.Duration
	// Log receives a line per fault applied; the zero logger discards.
	Log zerolog.Logger
}

// Captured is one request the proxy captured (held, faulted, or of a key
// passed to Capture), as it arrived.
type Captured struct {
	Key, Version  int16
	CorrelationID int32
	ClientID      *string
	// Frame is the request as it was on the wire, size prefix included;
	// Replay sends it unchanged.
	Frame []byte
	// Request is the decoded body (nil when kmsg cannot decode it; then
	// DecodeErr says why).
	Request   kmsg.Request
	DecodeErr error
	// Conn numbers the proxied connection it came on (1, 2, ...).
	Conn uint64
	// Fault is what the proxy did with it: "hold", "delay",
	// "duplicate", "drop", "cut" or "" (forwarded, only captured).
	Fault string
}

// Response is a response the proxy decoded: a duplicate's second answer,
// which the client never sees.
type Response struct {
	Key, Version  int16
	CorrelationID int32
	Response      kmsg.Response
	DecodeErr     error
	Conn          uint64
}

// Counts are per-key counters.
type Counts struct {
	Requests   int // read from clients
	Forwarded  int // written to the target; a duplicated request counts twice
	Held       int // held (Released counts those later forwarded)
	Released   int
	Delayed    int
	Duplicated int
	Dropped    int
	Cut        int // connections closed by CutOnKey
	Responses  int // delivered to clients
	Swallowed  int // second answers of duplicates, not delivered
}

type mode uint8

const (
	pass mode = iota
	hold
	delay
	duplicate
	drop
	cutOnKey
)

var modeNames = [...]string{pass: "", hold: "hold", delay: "delay", duplicate: "duplicate", drop: "drop", cutOnKey: "cut"}

// rule is the fault of one API key.
type rule struct {
	mode    mode
	delay   time.Duration
	release chan struct{} // hold: closed by Release
	// match, when set, limits the fault to the requests it accepts; the
	// others pass.
	match func(kmsg.Request) bool
}

// Proxy is a fault-injecting Kafka proxy. All methods are safe for
// concurrent use.
type Proxy struct {
	cfg Config
	ln  net.Listener
	log zerolog.Logger

	mu        sync.Mutex
	rules     map[int16]rule
	capture   map[int16]bool
	captured  []Captured
	swallowed []Response
	counts    map[int16]*Counts
	conns     map[*proxyConn]struct{}
	nextConn  uint64
	closed    bool
	changed   chan struct{} // closed and replaced on every event, for WaitFor

	wg sync.WaitGroup
}

// Start listens and proxies to cfg.Target until Close.
func Start(cfg Config) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("faultproxy: no target")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		cfg:     cfg,
		ln:      ln,
		log:     cfg.Log.With().Str("component", "faultproxy").Str("target", cfg.Target).Logger(),
		rules:   make(map[int16]rule),
		capture: make(map[int16]bool),
		counts:  make(map[int16]*Counts),
		conns:   make(map[*proxyConn]struct{}),
		changed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address clients connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the proxied address.
func (p *Proxy) Target() string { return p.cfg.Target }

// Close stops accepting, closes every proxied connection (held requests are
// discarded) and waits for every goroutine of the proxy to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.connList()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if !p.isClosed() {
				p.log.Warn().Err(err).Msg("accept failed; proxy stops accepting")
			}
			return
		}
		// Dialing may take a while; do it off the accept loop so one
		// slow target connection does not stall the others.
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		p.nextConn++
		c := &proxyConn{p: p, id: p.nextConn, client: client, done: make(chan struct{})}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// connList returns the open connections; p.mu must be held.
func (p *Proxy) connList() []*proxyConn {
	out := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// notify wakes WaitFor callers; p.mu must be held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// countsOf returns the counters of key; p.mu must be held.
func (p *Proxy) countsOf(key int16) *Counts {
	c := p.counts[key]
	if c == nil {
		c = new(Counts)
		p.counts[key] = c
	}
	return c
}

// bump applies f to key's counters and wakes waiters.
func (p *Proxy) bump(key int16, f func(*Counts)) {
	p.mu.Lock()
	f(p.countsOf(key))
	p.notify()
	p.mu.Unlock()
}

// WaitFor blocks until cond returns true (it is evaluated now and after
// every request, response and fault) or ctx is done.
func (p *Proxy) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("faultproxy: condition not met: %w", ctx.Err())
		}
	}
}
