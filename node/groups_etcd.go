package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/groupsetcd"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/txnetcd"
)

// groupHolder runs the group coordinator on whichever coordinator holds
// its etcd lease (several coordinators). Every coordinator runs
// one: an ownership.Member over a single partition (keys under
// <prefix>/groups), so exactly one live coordinator holds it at a time,
// with a coordinator epoch from etcd that rises at every takeover. The
// holder opens a groups.Coordinator whose records go to etcd
// (groupsetcd), every write fenced by its lease, so a former holder,
// paused past its lease, writes nothing; the next holder loads the groups,
// their offsets and pending transactional offsets from etcd. Requests
// reach the current instance through groups.RegisterSwitch; a node that
// does not hold it answers NOT_COORDINATOR, and FindCoordinator for groups
// names the holder (cluster.View.SetGroupCoordinator).
type groupHolder struct {
	member  *ownership.Member
	store   *txnetcd.Store
	cfg     groups.Config // template: Records is set per instance
	log     zerolog.Logger
	current atomic.Pointer[groups.Coordinator]

	mu     sync.Mutex // serializes opening and closing instances
	epoch  int32      // of the current instance (0: none)
	closed bool

	done chan struct{}
	wg   sync.WaitGroup
}

// groupsPrefix is where the group coordinator's lease and state live.
func groupsPrefix(v *cluster.View) string { return v.Etcd().Prefix + "/groups" }

// startGroupHolder starts following the group coordinator's lease.
func startGroupHolder(cli *clientv3.Client, v *cluster.View, self cluster.Node, ttl time.Duration, cfg groups.Config, log zerolog.Logger) (*groupHolder, error) {
	layout := txnetcd.Layout{Prefix: groupsPrefix(v)}
	m, err := ownership.Start(ownership.Config{Client: cli, Layout: layout, NodeID: self.NodeID, Partitions: 1, LeaseTTL: ttl,
		Log: log.With().Str("role", "groups").Logger()}) // ownership names itself the component
	if err != nil {
		return nil, fmt.Errorf("group coordinator lease: %w", err)
	}
	h := &groupHolder{member: m, store: txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: 1}), cfg: cfg,
		log: log.With().Str("component", "groups-holder").Logger(), done: make(chan struct{})}
	// One set of series for every instance this node opens: counters
	// add up across them, gauges read the one it runs (0 on the others).
	h.cfg.SharedMetrics = groups.NewMetrics(cfg.Metrics, h.Current)
	h.wg.Add(1)
	go h.follow()
	return h, nil
}

// Current is the group coordinator this node runs, or nil.
func (h *groupHolder) Current() *groups.Coordinator { return h.current.Load() }

// Holder is the node holding the group coordinator's lease, as etcd says.
func (h *groupHolder) Holder() (node, epoch int32, ok bool) { return h.member.Owner(0) }

func (h *groupHolder) follow() {
	defer h.wg.Done()
	events := h.member.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				h.drop(-1, "lease member closed")
				return
			}
			if ev.Acquired {
				h.open(ev.Epoch)
			} else {
				h.drop(ev.Epoch, "lease lost")
			}
		case <-h.done:
			return
		}
	}
}

// open opens the group coordinator at epoch, if this node still holds
// the lease with it.
func (h *groupHolder) open(epoch int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	fence, ok := h.member.Fence(0)
	if !ok {
		return
	}
	if o, err := fence.Owner(); err != nil || o.Epoch != epoch {
		return // a later acquisition's event follows
	}
	h.closeLocked("reopened")
	cfg := h.cfg
	cfg.Records = groupsetcd.Open(h.store, fence, groupsetcd.Options{Log: h.log, OnFail: func(err error) { h.failed(epoch, err) }})
	c, err := groups.Open(cfg)
	if err != nil {
		cfg.Records.Close()
		h.log.Error().Err(err).Int32("epoch", epoch).Msg("group coordinator not opened; retrying")
		h.retry(epoch)
		return
	}
	h.current.Store(c)
	h.epoch = epoch
	h.log.Info().Int32("epoch", epoch).Msg("group coordinator: serving (this node holds its lease)")
}

// failed is the instance's log failing for good (fenced out, or an etcd
// write failed): its memory may be ahead of etcd, so it is closed, and
// opened again from etcd while the lease is still held.
func (h *groupHolder) failed(epoch int32, err error) {
	h.log.Warn().Err(err).Int32("epoch", epoch).Msg("group coordinator's etcd log failed: closing it, reloading from etcd if this node still holds the lease")
	go func() {
		h.drop(epoch, "log failed")
		h.retry(epoch)
	}()
}

// retry opens the coordinator again after a pause, while this node holds
// the lease at epoch.
func (h *groupHolder) retry(epoch int32) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		select {
		case <-time.After(500 * time.Millisecond):
		case <-h.done:
			return
		}
		if _, e, ok := h.member.Owner(0); ok && e == epoch {
			if _, ok := h.member.Fence(0); ok {
				h.open(epoch)
			}
		}
	}()
}

// drop closes the instance of epoch (any when epoch < 0).
func (h *groupHolder) drop(epoch int32, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch >= 0 && h.epoch != epoch {
		return
	}
	h.closeLocked(reason)
}

func (h *groupHolder) closeLocked(reason string) {
	c := h.current.Swap(nil)
	if c == nil {
		return
	}
	h.log.Info().Int32("epoch", h.epoch).Str("reason", reason).Msg("group coordinator: closed")
	h.epoch = 0
	c.Close()
}

// Close closes the instance and releases the lease (the next holder takes
// over at once).
func (h *groupHolder) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.closeLocked("node stopping")
	h.mu.Unlock()
	close(h.done)
	err := h.member.Close()
	h.wg.Wait()
	return err
}

// groupsTxnFunc adapts a coordinators' client to groups.Config.TxnCoordinator.
func groupsTxnFunc(cl coordclient.Client) func(context.Context, kmsg.Request) (kmsg.Response, error) {
	return func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		areq, ok := req.(*kmsg.AddPartitionsToTxnRequest)
		if !ok {
			return nil, fmt.Errorf("node: the group coordinator sent %s to the transaction coordinators", kmsg.NameForKey(req.Key()))
		}
		return cl.AddPartitionsToTxn(ctx, areq)
	}
}

// holderNode is the View's group coordinator hook: the holder etcd names,
// or while none does (a takeover), the last one known, so that markers
// for __consumer_offsets keep going to a node (they retry there until the
// next holder is known) instead of counting "no leader" refusals.
func (h *groupHolder) holderNode(v *cluster.View) func() (cluster.Node, bool) {
	var last atomic.Int32
	last.Store(-1)
	return func() (cluster.Node, bool) {
		node, _, ok := h.Holder()
		if ok {
			last.Store(node)
		} else if node = last.Load(); node < 0 {
			return cluster.Node{}, false
		}
		return v.Node(node)
	}
}
