package txnrouter

// peers: is another coordinator's process gone?
//
// A SIGKILLed coordinator keeps its etcd lease, and so its partitions,
// until the lease expires (up to its TTL, 5 s by default). Until then
// FindCoordinator would name it, and a client would dial it, be refused,
// back off, ask again and be sent there again: kgo's backoff grows with
// each try (0.25, 0.5, 1, 2, 4 s), so a client that asked early reached the
// new owner seconds after it served. A refused TCP connection is a
// definite answer that no process listens at the owner's address (a host
// that is unreachable, or a process that is paused, does not refuse:
// those time out or accept, and are treated as alive), so FindCoordinator
// waits instead while an owner refuses (see 10_find_coordinator.go).
//
// The answer decides only how long a FindCoordinator waits, never who owns
// what: ownership stays the etcd lease's.

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

const (
	// probeTimeout bounds one dial; a dial that times out is not a
	// refusal (the node is treated as alive).
	probeTimeout = 250 * time.Millisecond
	// refusedFor is how long a refusal is believed: a restarted process
	// listens again within it.
	refusedFor = 100 * time.Millisecond
	// acceptedFor is how long an accepted dial is believed: short, so a
	// process that just died is seen as gone at the next FindCoordinator
	// (a loopback or LAN dial costs well under a millisecond).
	acceptedFor = 200 * time.Millisecond
)

// peers probes coordinators' Kafka addresses and caches the answers.
type peers struct {
	nodes map[int32]string // node id → host:port
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.Mutex
	seen map[int32]probe
}

type probe struct {
	refused bool
	at      time.Time
}

func newPeers(nodes map[int32]string) *peers {
	d := &net.Dialer{}
	return &peers{nodes: nodes, dial: d.DialContext, seen: map[int32]probe{}}
}

// refused reports whether node's address refused a TCP connection just
// now (a cached answer if recent). An unknown node is not refused.
func (p *peers) refused(ctx context.Context, node int32) bool {
	addr, ok := p.nodes[node]
	if !ok {
		return false
	}
	now := time.Now()
	p.mu.Lock()
	last, ok := p.seen[node]
	p.mu.Unlock()
	if ok {
		valid := acceptedFor
		if last.refused {
			valid = refusedFor
		}
		if now.Sub(last.at) < valid {
			return last.refused
		}
	}
	dctx, cancel := context.WithTimeout(ctx, probeTimeout)
	conn, err := p.dial(dctx, "tcp", addr)
	cancel()
	refused := err != nil && errors.Is(err, syscall.ECONNREFUSED)
	if conn != nil {
		conn.Close()
	}
	p.mu.Lock()
	p.seen[node] = probe{refused: refused, at: time.Now()}
	p.mu.Unlock()
	return refused
}
