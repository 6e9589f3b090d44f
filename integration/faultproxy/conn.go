package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// proxyConn is one client connection and its connection to the target. Two
// goroutines serve it, one per direction; whichever ends first closes both
// sockets, which ends the other. Proxy.wg counts the pair as one.
type proxyConn struct {
	p      *Proxy
	id     uint64
	client net.Conn

	mu     sync.Mutex
	server net.Conn
	// expect lists the requests forwarded and not yet answered, in order:
	// responses come back in request order, so the head tells which
	// request a response belongs to and whether to swallow it.
	expect []expected

	done      chan struct{}
	closeOnce sync.Once
}

type expected struct {
	correlationID int32
	key, version  int16
	swallow       bool
}

// close closes both sockets; safe to call many times and from anywhere.
func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.client.Close()
		c.mu.Lock()
		if c.server != nil {
			c.server.Close()
		}
		c.mu.Unlock()
	})
}

func (c *proxyConn) run() {
	defer c.p.wg.Done()
	defer func() {
		c.close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.notify()
		c.p.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", c.p.cfg.Target, c.p.cfg.DialTimeout)
	if err != nil {
		c.p.log.Warn().Err(err).Uint64("conn", c.id).Msg("dial target failed; closing client connection")
		return
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	select {
	case <-c.done: // cut while dialing: close() did not see the server
		server.Close()
		return
	default:
	}

	var responses sync.WaitGroup
	responses.Add(1)
	go func() {
		defer responses.Done()
		defer c.close()
		c.pumpResponses(server)
	}()
	c.pumpRequests(server)
	c.close()
	responses.Wait()
}

// pumpRequests reads requests from the client and applies key's fault.
func (c *proxyConn) pumpRequests(server net.Conn) {
	r := bufio.NewReader(c.client)
	for {
		frame, err := readFrame(r, 8)
		if err != nil {
			c.logEnd(err, "reading request")
			return
		}
		h := parseRequestHeader(frame)
		rule := c.admit(frame, h)
		switch rule.mode {
		case hold:
			select {
			case <-rule.release:
				c.p.bump(h.key, func(n *Counts) { n.Released++ })
			case <-c.done:
				return
			}
		case delay:
			t := time.NewTimer(rule.delay)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
		case drop:
			c.p.log.Info().Int16("api_key", h.key).Int32("correlation_id", h.correlationID).Msg("dropped request")
			continue
		case cutOnKey:
			c.p.log.Info().Int16("api_key", h.key).Uint64("conn", c.id).Msg("cut connection on request")
			return
		}
		sends := 1
		if rule.mode == duplicate {
			sends = 2
		}
		c.mu.Lock()
		for i := 0; i < sends; i++ {
			c.expect = append(c.expect, expected{correlationID: h.correlationID, key: h.key, version: h.version, swallow: i > 0})
		}
		c.mu.Unlock()
		// Counted before the write: the response may reach the client
		// (and a test read the counters) before Write returns.
		c.p.bump(h.key, func(n *Counts) { n.Forwarded += sends })
		for i := 0; i < sends; i++ {
			if _, err := server.Write(frame); err != nil {
				c.logEnd(err, "writing request")
				return
			}
		}
	}
}

// admit counts and, when the key is faulted or captured, records a request;
// it returns the key's rule as it was when the request arrived.
func (c *proxyConn) admit(frame []byte, h requestHeader) rule {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.notify()
	r := p.rules[h.key]
	var req kmsg.Request
	var clientID *string
	var decodeErr error
	decoded := false
	if r.match != nil {
		clientID, req, decodeErr = decodeRequest(frame, h)
		decoded = true
		if req == nil || !r.match(req) {
			r = rule{mode: pass}
		}
	}
	n := p.countsOf(h.key)
	n.Requests++
	switch r.mode {
	case hold:
		n.Held++
	case delay:
		n.Delayed++
	case duplicate:
		n.Duplicated++
	case drop:
		n.Dropped++
	case cutOnKey:
		n.Cut++
	}
	if r.mode == pass && !p.capture[h.key] {
		return r
	}
	cp := Captured{
		Key: h.key, Version: h.version, CorrelationID: h.correlationID,
		Frame: frame, Conn: c.id, Fault: modeNames[r.mode],
	}
	if decoded {
		cp.ClientID, cp.Request, cp.DecodeErr = clientID, req, decodeErr
	} else {
		cp.ClientID, cp.Request, cp.DecodeErr = decodeRequest(frame, h)
	}
	p.captured = append(p.captured, cp)
	return r
}

// pumpResponses copies responses to the client, swallowing the second
// answer of each duplicated request.
func (c *proxyConn) pumpResponses(server net.Conn) {
	r := bufio.NewReader(server)
	for {
		frame, err := readFrame(r, 4)
		if err != nil {
			c.logEnd(err, "reading response")
			return
		}
		corr := responseCorrelationID(frame)
		e, known := c.match(corr)
		if known && e.swallow {
			resp := Response{Key: e.key, Version: e.version, CorrelationID: corr, Conn: c.id}
			resp.Response, resp.DecodeErr = decodeResponse(frame, e.key, e.version)
			c.p.mu.Lock()
			c.p.swallowed = append(c.p.swallowed, resp)
			c.p.countsOf(e.key).Swallowed++
			c.p.notify()
			c.p.mu.Unlock()
			continue
		}
		if known {
			// Counted before the write, as requests are.
			c.p.bump(e.key, func(n *Counts) { n.Responses++ })
		}
		if _, err := c.client.Write(frame); err != nil {
			c.logEnd(err, "writing response")
			return
		}
	}
}

// match pops the expected entry of a response. Entries before it had no
// response (acks=0 Produce) and are dropped.
func (c *proxyConn) match(corr int32) (expected, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.expect {
		if e.correlationID == corr {
			c.expect = c.expect[i+1:]
			return e, true
		}
	}
	return expected{}, false
}

func (c *proxyConn) logEnd(err error, during string) {
	select {
	case <-c.done:
		return // we closed it: a cut or Close
	default:
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	c.p.log.Debug().Err(err).Uint64("conn", c.id).Str("during", during).Msg("proxied connection ended")
}
