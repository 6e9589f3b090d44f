package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// OwnCoordinator is the coordinator node of a process of its own.
type OwnCoordinator struct {
	cfg CoordinatorConfig
	mu  sync.Mutex
	co  *Coordinator
	adm *admin.Server
}

// StartOwnCoordinator starts the node of cfg and lets cfg.Faults (when
// set) pause, kill and restart it.
func StartOwnCoordinator(cfg CoordinatorConfig) (*OwnCoordinator, error) {
	if cfg.Requests == nil && cfg.Metrics != nil {
		cfg.Requests = wire.NewRequestMetrics(cfg.Metrics)
	}
	co, err := StartCoordinator(cfg)
	if err != nil {
		return nil, err
	}
	p := &OwnCoordinator{cfg: cfg, co: co}
	if cfg.Faults != nil {
		cfg.Faults.SetLifecycle(faults.Lifecycle{
			Killable: func(id int32) bool { return id == cfg.NodeID },
			Stop:     func(ctx context.Context, _ int32) error { return p.kill(ctx) },
			Start:    func(context.Context, int32) error { return p.restart() },
			// A paused coordinator on etcd stops its keepalives too, as
			// a stopped process: its leases lapse, another takes over.
			Pause: func(_ int32, paused bool) { p.Current().PauseLeases(paused) },
		})
	}
	return p, nil
}

// Current is the running node (the last one started while it is killed).
func (p *OwnCoordinator) Current() *Coordinator {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.co
}

// Backend is the running node's admin backend.
func (p *OwnCoordinator) Backend() admin.Backend {
	if co := p.Current(); co != nil {
		return co.AdminBackend()
	}
	return nil
}

// ServeAdmin tells the node which admin listener serves it: a kill marks
// it down there, a restart rebinds it.
func (p *OwnCoordinator) ServeAdmin(adm *admin.Server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adm = adm
}

func (p *OwnCoordinator) kill(ctx context.Context) error {
	p.mu.Lock()
	co, adm := p.co, p.adm
	p.co = nil
	p.mu.Unlock()
	if co == nil {
		return fmt.Errorf("coordinator %d is not running", p.cfg.NodeID)
	}
	if adm != nil {
		adm.Down(killedError(p.cfg.NodeID, "coordinator"))
	}
	return co.Stop(ctx)
}

func (p *OwnCoordinator) restart() error {
	cfg := p.cfg
	if cfg.Metrics != nil {
		cfg.Metrics = replacing{cfg.Metrics}
	}
	co, err := StartCoordinator(cfg)
	if err != nil {
		return fmt.Errorf("restart coordinator %d: %w", p.cfg.NodeID, err)
	}
	p.mu.Lock()
	p.co = co
	adm := p.adm
	p.mu.Unlock()
	if adm != nil {
		adm.Rebind(co.AdminBackend())
		adm.Down(nil)
	}
	return nil
}

// Stop stops the node (nothing when a kill stopped it).
func (p *OwnCoordinator) Stop(ctx context.Context) error {
	p.mu.Lock()
	co := p.co
	p.co = nil
	p.mu.Unlock()
	if co == nil {
		return nil
	}
	return co.Stop(ctx)
}

// killedError is the admin API's 503 while the process's node is killed.
func killedError(id int32, role string) error {
	return fmt.Errorf("%w: node %d (the %s serving this API) is killed by a fault; GET /v1/faults lists it, DELETE /v1/faults/{id} restarts the node", errNodeDown, id, role)
}

// errNodeDown is the admin API's answer (503) while the node behind it is
// killed.
var errNodeDown = errors.New("node down")

// OwnLeader is the leader node of a process of its own.
type OwnLeader struct {
	cfg LeaderConfig
	mu  sync.Mutex
	l   *Leader
}

// StartOwnLeader starts the node of cfg and lets cfg.Faults (when set)
// kill and restart it.
func StartOwnLeader(cfg LeaderConfig) (*OwnLeader, error) {
	if cfg.Requests == nil && cfg.Metrics != nil {
		cfg.Requests = wire.NewRequestMetrics(cfg.Metrics)
	}
	l, err := StartLeader(cfg)
	if err != nil {
		return nil, err
	}
	p := &OwnLeader{cfg: cfg, l: l}
	if cfg.Faults != nil {
		cfg.Faults.SetLifecycle(faults.Lifecycle{
			Killable: func(id int32) bool { return id == cfg.NodeID },
			Stop:     func(ctx context.Context, _ int32) error { return p.kill(ctx) },
			Start:    func(context.Context, int32) error { return p.restart() },
		})
	}
	return p, nil
}

// Current is the running node (the last one started while it is killed).
func (p *OwnLeader) Current() *Leader {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.l
}

func (p *OwnLeader) kill(ctx context.Context) error {
	p.mu.Lock()
	l := p.l
	p.l = nil
	p.mu.Unlock()
	if l == nil {
		return fmt.Errorf("leader %d is not running", p.cfg.NodeID)
	}
	return l.Stop(ctx)
}

func (p *OwnLeader) restart() error {
	cfg := p.cfg
	if cfg.Metrics != nil {
		cfg.Metrics = replacing{cfg.Metrics}
	}
	l, err := StartLeader(cfg)
	if err != nil {
		return fmt.Errorf("restart leader %d: %w", p.cfg.NodeID, err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	return nil
}

// Stop stops the node (nothing when a kill stopped it).
func (p *OwnLeader) Stop(ctx context.Context) error {
	p.mu.Lock()
	l := p.l
	p.l = nil
	p.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Stop(ctx)
}
