package node

import (
	"context"
	"fmt"

	"github.com/txncoord/txncoord/faults"
)

// killLifecycle lets a Kill fault stop a leader of `txncoord up` and start
// it again on its state, as a stopped and restarted process: while it is
// down its address refuses connections and the marker sender reaches it
// over TCP (refused, retried) instead of in-process.
func (e *Embedded) killLifecycle() faults.Lifecycle {
	return faults.Lifecycle{
		Killable: func(id int32) bool { _, ok := e.leaderIndex(id); return ok },
		Stop:     e.killLeader,
		Start:    e.reviveLeader,
	}
}

func (e *Embedded) leaderIndex(id int32) (int, bool) {
	e.leadersMu.Lock()
	defer e.leadersMu.Unlock()
	for i, l := range e.Leaders {
		if l.Node.NodeID == id {
			return i, true
		}
	}
	return 0, false
}

func (e *Embedded) killLeader(ctx context.Context, id int32) error {
	i, ok := e.leaderIndex(id)
	if !ok {
		return fmt.Errorf("no leader %d", id)
	}
	e.leadersMu.Lock()
	l := e.Leaders[i]
	e.leadersMu.Unlock()
	e.serve(l.Node, nil)
	return l.Stop(ctx)
}

func (e *Embedded) reviveLeader(_ context.Context, id int32) error {
	i, ok := e.leaderIndex(id)
	if !ok {
		return fmt.Errorf("no leader %d", id)
	}
	e.leadersMu.Lock()
	old := e.Leaders[i]
	e.leadersMu.Unlock()
	nl, err := StartLeader(e.leaderConfig(id, old.Node.KafkaVersion, nil, e.cfg.Log))
	if err != nil {
		return fmt.Errorf("restart leader %d: %w", id, err)
	}
	e.leadersMu.Lock()
	e.Leaders[i] = nl
	e.leadersMu.Unlock()
	e.serve(nl.Node, nl.Server)
	return nil
}
