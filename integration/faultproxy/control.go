package faultproxy

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// setRule replaces key's fault. A hold being replaced is released, so no
// request stays stuck behind a rule that no longer exists.
func (p *Proxy) setRule(key int16, r rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.rules[key]; ok && old.mode == hold {
		close(old.release)
	}
	if r.mode == pass {
		delete(p.rules, key)
	} else {
		p.rules[key] = r
	}
	p.notify()
}

// Hold captures requests of key and does not forward them (nor any later
// request of the same connection) until Release; the connection stays open,
// so the sender waits or times out.
func (p *Proxy) Hold(key int16) { p.setRule(key, rule{mode: hold, release: make(chan struct{})}) }

// HoldIf is Hold of only the requests of key that match accepts (decoded);
// the others are forwarded, unless they come after a held one on the same
// connection, which waits behind it as with Hold.
func (p *Proxy) HoldIf(key int16, match func(kmsg.Request) bool) {
	p.setRule(key, rule{mode: hold, release: make(chan struct{}), match: match})
}

// Release forwards the held requests of key, on their own connections if
// those are still open, and stops holding.
func (p *Proxy) Release(key int16) { p.setRule(key, rule{mode: pass}) }

// Clear removes key's fault (releasing held requests); Capture stays on.
func (p *Proxy) Clear(key int16) { p.setRule(key, rule{mode: pass}) }

// Delay forwards each request of key d later (later requests of the same
// connection wait behind it).
func (p *Proxy) Delay(key int16, d time.Duration) { p.setRule(key, rule{mode: delay, delay: d}) }

// Duplicate forwards each request of key twice on its connection; the
// second response is swallowed (see Swallowed), so the client sees one.
func (p *Proxy) Duplicate(key int16) { p.setRule(key, rule{mode: duplicate}) }

// Drop discards each request of key: it is never forwarded and never
// answered.
func (p *Proxy) Drop(key int16) { p.setRule(key, rule{mode: drop}) }

// CutOnKey closes the connection when a request of key arrives, without
// forwarding it.
func (p *Proxy) CutOnKey(key int16) { p.setRule(key, rule{mode: cutOnKey}) }

// Capture records every request of key (faulted ones are always recorded).
func (p *Proxy) Capture(key int16) {
	p.mu.Lock()
	p.capture[key] = true
	p.mu.Unlock()
}

// CutConnections closes every proxied connection now (held requests are
// discarded) and returns how many it closed. New connections are accepted.
func (p *Proxy) CutConnections() int {
	p.mu.Lock()
	conns := p.connList()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	p.log.Info().Int("connections", len(conns)).Msg("cut connections")
	return len(conns)
}

// Connections is the number of open proxied connections.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Captured returns the captured requests of key, oldest first.
func (p *Proxy) Captured(key int16) []Captured {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Captured
	for _, c := range p.captured {
		if c.Key == key {
			out = append(out, c)
		}
	}
	return out
}

// WaitCaptured waits until at least n requests of key were captured and
// returns them.
func (p *Proxy) WaitCaptured(ctx context.Context, key int16, n int) ([]Captured, error) {
	var got []Captured
	err := p.WaitFor(ctx, func() bool {
		got = p.Captured(key)
		return len(got) >= n
	})
	return got, err
}

// Swallowed returns the swallowed second responses of duplicated requests
// of key, oldest first.
func (p *Proxy) Swallowed(key int16) []Response {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Response
	for _, r := range p.swallowed {
		if r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// Counts returns a copy of key's counters.
func (p *Proxy) Counts(key int16) Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.countsOf(key)
}
