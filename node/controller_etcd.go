package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/topicsetcd"
	"github.com/txncoord/txncoord/txnetcd"
)

// controllerHolder runs the topic controller on whichever coordinator
// holds its etcd lease (several coordinators), as KRaft elects one
// controller: every coordinator runs one, an ownership.Member over a
// single partition (keys under <prefix>/controller), so exactly one live
// coordinator holds it at a time, with an epoch from etcd that rises at
// every takeover. The holder opens a topics.Controller whose records go
// to etcd (topicsetcd), every write fenced by its lease, so a former
// holder, paused past its lease, changes nothing; the next holder loads
// every topic, id, count, config and tombstone from etcd. Requests reach
// it through topics.RegisterSwitch: a node that does not hold it forwards
// them to the holder, which Metadata names as ControllerID
// (cluster.View.SetController).
type controllerHolder struct {
	member  *ownership.Member
	store   *txnetcd.Store
	view    *cluster.View
	log     zerolog.Logger
	current atomic.Pointer[topics.Controller]
	// opened, optional, runs after an instance serves (a process of its
	// own makes it its view's creator).
	opened func()

	mu     sync.Mutex // serializes opening and closing instances
	epoch  int32      // of the current instance (0: none)
	closed bool

	done chan struct{}
	wg   sync.WaitGroup
}

// controllerLayout is where the controller's lease and records live.
func controllerLayout(v *cluster.View) txnetcd.Layout {
	return txnetcd.Layout{Prefix: v.Etcd().Prefix + "/controller"}
}

// startControllerHolder starts following the controller's lease.
func startControllerHolder(cli *clientv3.Client, v *cluster.View, self cluster.Node, ttl time.Duration, log zerolog.Logger) (*controllerHolder, error) {
	layout := controllerLayout(v)
	m, err := ownership.Start(ownership.Config{Client: cli, Layout: layout, NodeID: self.NodeID, Partitions: 1, LeaseTTL: ttl,
		Log: log.With().Str("role", "controller").Logger()})
	if err != nil {
		return nil, fmt.Errorf("controller lease: %w", err)
	}
	h := &controllerHolder{member: m, store: txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: 1}), view: v,
		log: log.With().Str("component", "controller-holder").Logger(), done: make(chan struct{})}
	h.wg.Add(1)
	go h.follow()
	return h, nil
}

// Current is the controller this node runs, or nil.
func (h *controllerHolder) Current() *topics.Controller { return h.current.Load() }

// Holder is the node holding the controller's lease, as etcd says.
func (h *controllerHolder) Holder() (node, epoch int32, ok bool) { return h.member.Owner(0) }

// holderNode is the View's controller hook.
func (h *controllerHolder) holderNode() (cluster.Node, bool) {
	id, _, ok := h.Holder()
	if !ok {
		return cluster.Node{}, false
	}
	return h.view.Node(id)
}

// holderAddr is the holder's address (a Follower's Target).
func (h *controllerHolder) holderAddr() (string, bool) {
	n, ok := h.holderNode()
	return n.Addr, ok
}

// forwardAddr is where self forwards the controller's requests: the
// holder, unless none is known or it is self (then self holds the lease
// but has not opened the controller yet, or lost it: NOT_CONTROLLER, and
// the client asks again).
func (h *controllerHolder) forwardAddr(self cluster.Node) func() (string, error) {
	return func() (string, error) {
		n, ok := h.holderNode()
		if !ok || n.NodeID == self.NodeID {
			return "", errNoController
		}
		return n.Addr, nil
	}
}

func (h *controllerHolder) follow() {
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

// open opens the controller at epoch, if this node still holds the lease
// with it.
func (h *controllerHolder) open(epoch int32) {
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
	recs := topicsetcd.Open(h.store, fence, topicsetcd.Options{OnFail: func(err error) { h.failed(epoch, err) }})
	ctl, err := topics.Open(topics.Config{View: h.view, Records: recs, Log: h.log})
	if err != nil {
		h.log.Error().Err(err).Int32("epoch", epoch).Msg("controller not opened; retrying")
		h.retry(epoch)
		return
	}
	h.current.Store(ctl)
	h.epoch = epoch
	h.log.Info().Int32("epoch", epoch).Msg("controller: serving (this node holds its lease)")
	if h.opened != nil {
		h.opened()
	}
}

// failed is a commit of the instance failing (fenced out, or an etcd
// error or timeout, after which etcd may hold what its memory does not):
// it is closed, and opened again from etcd while the lease is still held.
func (h *controllerHolder) failed(epoch int32, err error) {
	h.log.Warn().Err(err).Int32("epoch", epoch).Msg("controller's etcd write failed: closing it, reloading from etcd if this node still holds the lease")
	go func() {
		h.drop(epoch, "write failed")
		h.retry(epoch)
	}()
}

// retry opens the controller again after a pause, while this node holds
// the lease at epoch.
func (h *controllerHolder) retry(epoch int32) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		select {
		case <-time.After(500 * time.Millisecond):
		case <-h.done:
			return
		}
		if _, e, ok := h.member.Owner(0); ok && e == epoch {
			h.open(epoch)
		}
	}()
}

// drop closes the instance of epoch (any when epoch < 0).
func (h *controllerHolder) drop(epoch int32, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch >= 0 && h.epoch != epoch {
		return
	}
	h.closeLocked(reason)
}

func (h *controllerHolder) closeLocked(reason string) {
	c := h.current.Swap(nil)
	if c == nil {
		return
	}
	h.log.Info().Int32("epoch", h.epoch).Str("reason", reason).Msg("controller: closed")
	h.epoch = 0
	c.Close()
}

// Close closes the instance and releases the lease (the next holder takes
// over at once).
func (h *controllerHolder) Close() error {
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

// errNoController answers auto-creation while no node of this process
// holds the controller: Metadata answers the topic LEADER_NOT_AVAILABLE,
// and the client asks again.
var errNoController = fmt.Errorf("no coordinator holds the controller's lease yet: %w", kerr.LeaderNotAvailable)

// seedControllerRecords copies the topics of a single coordinator's store
// st (node 0's data dir, or `up`'s shared store, from before the cluster
// had several coordinators) into etcd, once: only while etcd holds no
// controller records. Later changes to st's topics are not copied.
func seedControllerRecords(cli *clientv3.Client, v *cluster.View, recs topics.Records, log zerolog.Logger) error {
	var raws [][]byte
	if err := recs.Load(func(raw []byte) error {
		raws = append(raws, append([]byte(nil), raw...))
		return nil
	}); err != nil {
		return fmt.Errorf("controller records of this data dir: %w", err)
	}
	if len(raws) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
	defer cancel()
	copied, err := topicsetcd.Seed(ctx, cli, controllerLayout(v), raws, 0)
	if err != nil {
		return err
	}
	if copied {
		log.Info().Int("records", len(raws)).Msg("the topics of this data dir's single coordinator copied into etcd, where the controller keeps them now")
	}
	return nil
}

// showControllerRecords puts the controller's records in etcd into v, for
// a process whose leaders recover before any controller loads them.
func showControllerRecords(cli *clientv3.Client, v *cluster.View) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnetcd.LoadTimeout)
	defer cancel()
	return topicsetcd.Snapshot(ctx, cli, controllerLayout(v), func(raw []byte) error { return topics.Show(v, raw) })
}
