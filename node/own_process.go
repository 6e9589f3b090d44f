package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/wire"
)

// A node in a process of its own (`txncoord coordinator`, `txncoord
// leader`) is killed and restarted by a Kill fault through that process's
// admin listener, which outlives the node as the admin API of `up`
// outlives node 0: the Kafka listener and its connections close (clients
// are refused), the node's stores close as at a shutdown, and the end of
// the fault opens them again and listens on the same address, as a
// restarted process would. The per-API series live in the process, so a
// restart does not reset them; the node's other series start again from
// 0, as after a restart.

// stoppable is a running node.
type stoppable interface{ Stop(context.Context) error }

// ownNode is the one node of a process, stopped and started again by Kill
// faults. start runs it (its registerer replaces the stopped node's
// series on a restart); down is told before a kill, up after a restart.
type ownNode[N stoppable] struct {
	id    int32
	role  string
	start func(prometheus.Registerer) (N, error)
	reg   prometheus.Registerer
	down  func()
	up    func(N)

	mu      sync.Mutex
	node    N
	running bool
}

// run starts the node the first time and lets set (when non-nil) kill and
// restart it; pause, optional, is the Lifecycle's Pause.
func (o *ownNode[N]) run(set *faults.Set, pause func(bool)) error {
	n, err := o.start(o.reg)
	if err != nil {
		return err
	}
	o.node, o.running = n, true
	if set != nil {
		l := faults.Lifecycle{
			Killable: func(id int32) bool { return id == o.id },
			Stop:     func(ctx context.Context, _ int32) error { return o.kill(ctx) },
			Start:    func(context.Context, int32) error { return o.restart() },
		}
		if pause != nil {
			l.Pause = func(_ int32, paused bool) { pause(paused) }
		}
		set.SetLifecycle(l)
	}
	return nil
}

// current is the running node (the last one started while it is killed).
func (o *ownNode[N]) current() N {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.node
}

// take marks the node stopped and returns it (false: it was not running).
func (o *ownNode[N]) take() (N, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	was := o.running
	o.running = false
	return o.node, was
}

func (o *ownNode[N]) kill(ctx context.Context) error {
	n, ok := o.take()
	if !ok {
		return fmt.Errorf("%s %d is not running", o.role, o.id)
	}
	if o.down != nil {
		o.down()
	}
	return n.Stop(ctx)
}

func (o *ownNode[N]) restart() error {
	var reg prometheus.Registerer
	if o.reg != nil {
		reg = replacing{o.reg}
	}
	n, err := o.start(reg)
	if err != nil {
		return fmt.Errorf("restart %s %d: %w", o.role, o.id, err)
	}
	o.mu.Lock()
	o.node, o.running = n, true
	o.mu.Unlock()
	if o.up != nil {
		o.up(n)
	}
	return nil
}

// Stop stops the node (nothing when a kill stopped it).
func (o *ownNode[N]) Stop(ctx context.Context) error {
	n, ok := o.take()
	if !ok {
		return nil
	}
	return n.Stop(ctx)
}

// OwnCoordinator is the coordinator node of a process of its own.
type OwnCoordinator struct {
	ownNode[*Coordinator]
	admMu sync.Mutex
	adm   *admin.Server
}

// StartOwnCoordinator starts the node of cfg and lets cfg.Faults (when
// set) pause, kill and restart it.
func StartOwnCoordinator(cfg CoordinatorConfig) (*OwnCoordinator, error) {
	if cfg.Requests == nil && cfg.Metrics != nil {
		cfg.Requests = wire.NewRequestMetrics(cfg.Metrics)
	}
	p := &OwnCoordinator{}
	p.ownNode = ownNode[*Coordinator]{id: cfg.NodeID, role: "coordinator", reg: cfg.Metrics,
		start: func(reg prometheus.Registerer) (*Coordinator, error) {
			c := cfg
			c.Metrics = reg
			return StartCoordinator(c)
		},
		down: func() {
			if adm := p.admin(); adm != nil {
				adm.Down(killedError(cfg.NodeID, "coordinator"))
			}
		},
		up: func(co *Coordinator) {
			if adm := p.admin(); adm != nil {
				adm.Rebind(co.AdminBackend())
				adm.Down(nil)
			}
		},
	}
	// A paused coordinator on etcd stops its keepalives too, as a
	// stopped process: its leases lapse, another takes over.
	if err := p.run(cfg.Faults, func(paused bool) { p.current().PauseLeases(paused) }); err != nil {
		return nil, err
	}
	return p, nil
}

// Current is the running node (the last one started while it is killed).
func (p *OwnCoordinator) Current() *Coordinator { return p.current() }

// Backend is the running node's admin backend (nil while it is killed).
func (p *OwnCoordinator) Backend() admin.Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	return p.node.AdminBackend()
}

// ServeAdmin tells the node which admin listener serves it: a kill marks
// it down there, a restart rebinds it.
func (p *OwnCoordinator) ServeAdmin(adm *admin.Server) {
	p.admMu.Lock()
	defer p.admMu.Unlock()
	p.adm = adm
}

func (p *OwnCoordinator) admin() *admin.Server {
	p.admMu.Lock()
	defer p.admMu.Unlock()
	return p.adm
}

// killedError is the admin API's 503 while the process's node is killed.
func killedError(id int32, role string) error {
	return fmt.Errorf("%w: node %d (the %s serving this API) is killed by a fault; GET /v1/faults lists it, DELETE /v1/faults/{id} restarts the node", errNodeDown, id, role)
}

// errNodeDown is the admin API's answer (503) while the node behind it is
// killed.
var errNodeDown = errors.New("node down")

// OwnLeader is the leader node of a process of its own.
type OwnLeader struct{ ownNode[*Leader] }

// StartOwnLeader starts the node of cfg and lets cfg.Faults (when set)
// kill and restart it.
func StartOwnLeader(cfg LeaderConfig) (*OwnLeader, error) {
	if cfg.Requests == nil && cfg.Metrics != nil {
		cfg.Requests = wire.NewRequestMetrics(cfg.Metrics)
	}
	p := &OwnLeader{ownNode[*Leader]{id: cfg.NodeID, role: "leader", reg: cfg.Metrics,
		start: func(reg prometheus.Registerer) (*Leader, error) {
			c := cfg
			c.Metrics = reg
			return StartLeader(c)
		}}}
	if err := p.run(cfg.Faults, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// Current is the running node (the last one started while it is killed).
func (p *OwnLeader) Current() *Leader { return p.current() }
