package wire

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// Connection limits: MaxConns per server, MaxConnsPerIP per remote
// address, and what happens at the cap.
//
// At MaxConns a listener used to refuse every new connection until one
// ended, which an idle client holds off for up to IdleTimeout (10
// minutes). Now a new connection at the cap closes the connection that
// has been idle longest (no request in flight, none being read), if it has
// been idle for at least evictIdleAfter: an idle Kafka client reconnects
// when it next needs to, while a listener full of idle connections keeps
// serving. Only when every connection is busy (or idle for less than that)
// is the new one refused. A shorter IdleTimeout under pressure was the
// alternative; it would still refuse everyone until the first timeout
// fired, and would close idle clients that nobody was waiting for.

// evictIdleAfter is how long a connection must have been idle before a
// new connection at the cap may close it: a client between two requests
// is not idle.
const evictIdleAfter = time.Second

// connCounters count refusals and evictions (metrics.go).
type connCounters struct {
	refusedMaxConns, refusedPerIP, evicted, notKafka atomic.Uint64
}

// admit registers a new connection, or refuses it (false, logged): per
// address limit first, then the connection cap, where the longest idle
// connection makes room if it can.
func (s *Server) admit(c *conn) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	if limit := s.cfg.MaxConnsPerIP; limit > 0 && c.ip.IsValid() && s.perIP[c.ip] >= limit {
		s.mu.Unlock()
		s.counters.refusedPerIP.Add(1)
		c.log().Warn().Int("max_connections_per_ip", limit).Str("reason", "too many connections from this address").
			Msg("connection refused: too many connections from this address")
		return false
	}
	if len(s.conns) >= s.cfg.MaxConns {
		victim, idle := s.longestIdle()
		if victim == nil {
			s.mu.Unlock()
			s.counters.refusedMaxConns.Add(1)
			c.log().Warn().Int("max_conns", s.cfg.MaxConns).Msg("connection refused: too many connections")
			return false
		}
		s.counters.evicted.Add(1)
		victim.log().Info().Int("max_conns", s.cfg.MaxConns).Dur("idle", idle).Str("reason", "idle at the connection cap").
			Msg("connection closed: idle longest while the listener is at its connection cap")
		// The victim leaves s.conns when its goroutine ends, so the count
		// is one over the cap until then.
		victim.stopReading()
	}
	s.conns[c] = struct{}{}
	if c.ip.IsValid() {
		s.perIP[c.ip]++
	}
	s.wg.Add(1)
	s.mu.Unlock()
	return true
}

// forget removes an ended connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.ip.IsValid() {
		if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
			delete(s.perIP, c.ip)
		}
	}
	s.mu.Unlock()
	s.idleMu.Lock()
	if c.listed {
		s.idle.remove(c)
	}
	s.idleMu.Unlock()
	for _, f := range s.cfg.Registry.disconnected {
		f(c.id)
	}
}

// longestIdle takes the connection idle longest off the idle list, if it
// has been idle for evictIdleAfter.
func (s *Server) longestIdle() (*conn, time.Duration) {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	c := s.idle.head
	if c == nil {
		return nil, 0
	}
	idle := time.Since(c.idleSince)
	if idle < evictIdleAfter {
		return nil, 0
	}
	s.idle.remove(c)
	return c, idle
}

// waitingForRequest: c's reader waits for the next request.
func (s *Server) waitingForRequest(c *conn) {
	s.idleMu.Lock()
	c.waiting = true
	s.listIfIdle(c)
	s.idleMu.Unlock()
}

// requestStarted: c's reader has begun reading a request.
func (s *Server) requestStarted(c *conn) {
	s.idleMu.Lock()
	c.waiting = false
	c.inflight++
	if c.listed {
		s.idle.remove(c)
	}
	s.idleMu.Unlock()
}

// answered: one of c's requests was answered (or needed no answer).
func (s *Server) answered(c *conn) {
	s.idleMu.Lock()
	c.inflight--
	s.listIfIdle(c)
	s.idleMu.Unlock()
}

func (s *Server) listIfIdle(c *conn) {
	if c.waiting && c.inflight == 0 && !c.listed && !c.stopped.Load() {
		c.idleSince = time.Now()
		s.idle.pushBack(c)
	}
}

// connList is an intrusive list of connections, oldest first.
type connList struct{ head, tail *conn }

func (l *connList) pushBack(c *conn) {
	c.idlePrev, c.idleNext, c.listed = l.tail, nil, true
	if l.tail != nil {
		l.tail.idleNext = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *connList) remove(c *conn) {
	if c.idlePrev != nil {
		c.idlePrev.idleNext = c.idleNext
	} else {
		l.head = c.idleNext
	}
	if c.idleNext != nil {
		c.idleNext.idlePrev = c.idlePrev
	} else {
		l.tail = c.idlePrev
	}
	c.idlePrev, c.idleNext, c.listed = nil, nil, false
}

// ipOf is the per-address limit's key: a TCP peer's IP (an IPv4-mapped
// IPv6 address as IPv4); other peers are not limited (invalid).
func ipOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
