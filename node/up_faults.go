package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/faults"
)

// killLifecycle lets a Kill fault stop a node of `txncoord up` and start it
// again on its state, as a stopped and restarted process: while it is
// down its address refuses connections. A leader's markers then reach it
// over TCP (refused, retried) instead of in-process. A coordinator stops
// as a shutdown does: in the etcd mode its leases are revoked and the
// others take its partitions over; restarted, it claims its share again.
// Node 0 (the single coordinator, or the etcd mode's node that serves the
// admin API) reopens its transactions, groups and topics from the
// process's store (the topics from etcd in the etcd mode); the admin API
// it serves keeps listening meanwhile (admin.Server.Down), so the fault
// can be ended. A Pause of an etcd-mode coordinator stops its etcd
// keepalives too, as SIGSTOP would: its leases lapse and the others take
// over.
func (e *Embedded) killLifecycle() faults.Lifecycle {
	return faults.Lifecycle{
		Killable: func(id int32) bool {
			if _, ok := e.leaderIndex(id); ok {
				return true
			}
			return e.coordinatorByID(id) != nil
		},
		Stop: func(ctx context.Context, id int32) error {
			if _, ok := e.leaderIndex(id); ok {
				return e.killLeader(ctx, id)
			}
			return e.killCoordinator(ctx, id)
		},
		Start: func(ctx context.Context, id int32) error {
			if _, ok := e.leaderIndex(id); ok {
				return e.reviveLeader(ctx, id)
			}
			return e.reviveCoordinator(id)
		},
		Pause: func(id int32, paused bool) {
			if co := e.coordinatorByID(id); co != nil {
				co.PauseLeases(paused)
			}
		},
	}
}

// PauseLeases stops or resumes the node's etcd keepalives (partitions,
// the group coordinator's and the controller's leases); nothing without
// etcd.
func (c *Coordinator) PauseLeases(paused bool) {
	if c.Member != nil {
		c.Member.SetPaused(paused)
	}
	if c.groups != nil {
		c.groups.member.SetPaused(paused)
	}
	if c.ctl != nil {
		c.ctl.member.SetPaused(paused)
	}
}

func (e *Embedded) killCoordinator(ctx context.Context, id int32) error {
	co := e.coordinatorByID(id)
	if co == nil {
		return fmt.Errorf("no coordinator %d", id)
	}
	if co == e.controller() {
		e.backend.Store(nil)
		if e.Admin != nil {
			e.Admin.Down(killedError(id, "coordinator"))
		}
	}
	// The leaders' and the other coordinators' in-process calls get the
	// retriable COORDINATOR_NOT_AVAILABLE, as a refused connection.
	e.byNode[id].unbind()
	e.serve(co.Node, nil)
	return co.Stop(ctx)
}

// reviveCoordinator starts coordinator id again on the cluster file's
// address (its state is in etcd and the shared store; node 0's admin
// API serves the new node's backend). Its metrics replace
// those of the stopped one.
func (e *Embedded) reviveCoordinator(id int32) error {
	old := e.coordinatorByID(id)
	if old == nil {
		return fmt.Errorf("no coordinator %d", id)
	}
	cfg := e.coordinatorConfig(id, nil)
	cfg.Metrics = replacing{cfg.Metrics}
	// Its partitions' series too: the stopped node's would stay, stale.
	cfg.Partitions.Metrics = replacing{cfg.Partitions.Metrics}
	co, err := StartCoordinator(cfg)
	if err != nil {
		return fmt.Errorf("restart coordinator %d: %w", id, err)
	}
	co.peers = e.coordinatorByID
	co.Cleanable = e.cleanableRatio
	e.coordsMu.Lock()
	for i, c := range e.Coordinators {
		if c == old {
			e.Coordinators[i] = co
		}
	}
	controller := old == e.Coordinator
	if controller {
		e.Coordinator = co
	}
	e.coordsMu.Unlock()
	e.byNode[id].bind(co.Server)
	e.serve(co.Node, co.Server)
	e.followGroupHolder()
	if controller {
		b := co.AdminBackend()
		e.backend.Store(&b)
		if e.Admin != nil {
			e.Admin.Rebind(b)
			e.Admin.Down(nil)
		}
	}
	return nil
}

// replacing registers a collector in place of one already registered
// under the same descriptors (a restarted node's series replace the
// stopped one's; a counter starts again from 0, as after a restart).
type replacing struct{ prometheus.Registerer }

func (r replacing) Register(c prometheus.Collector) error {
	err := r.Registerer.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		r.Registerer.Unregister(dup.ExistingCollector)
		return r.Registerer.Register(c)
	}
	return err
}

func (r replacing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
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
