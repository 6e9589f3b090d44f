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

// groupHolder spreads the group coordinator over the coordinators on
// etcd by __consumer_offsets partition, as Kafka spreads groups over the
// leaders of that topic: an ownership.Member over its partitions (keys
// under <prefix>/groupparts) balances them among the live coordinators as
// the __transaction_state partitions are, each with its own epoch from
// etcd that rises at every takeover. For each partition it owns, a node
// opens a groups.Coordinator serving the groups hashed to it
// (cluster.OffsetsPartitionFor), whose records go to that partition's keys
// in etcd (groupsetcd.PartitionDataPrefix), every write fenced by the
// partition's ownership, so a former owner, paused past its lease, writes
// nothing; the next owner loads the partition's groups, offsets and
// pending transactional offsets. A coordinator's death moves only its
// partitions: groups of the others never pause. Requests reach the
// partition's instance through groups.RegisterPartitionSwitch (another
// partition's group is answered NOT_COORDINATOR), and FindCoordinator and
// Metadata name each partition's owner (cluster.View.SetGroupCoordinatorOf).
type groupHolder struct {
	member     *ownership.Member
	partitions int32
	holders    []*leaseHolder[groups.Coordinator]
	events     []chan ownership.Event
	dispatched chan struct{} // closed when the dispatcher stopped
	closing    chan struct{} // closed by Close: the holders no longer read events
	closeOnce  sync.Once
	closeErr   error
}

// groupsMigrationTimeout bounds the move of a single-lease cluster's
// group records (groupsetcd.Migrate), waiting for another node's included.
const groupsMigrationTimeout = 2 * time.Minute

// groupsPrefix is where the group partitions' ownership and state live.
func groupsPrefix(v *cluster.View) string { return v.Etcd().Prefix + "/groupparts" }

// startGroupHolder starts following the ownership of the
// __consumer_offsets partitions.
func startGroupHolder(cli *clientv3.Client, v *cluster.View, self cluster.Node, ttl time.Duration, cfg groups.Config, log zerolog.Logger) (*groupHolder, error) {
	n := v.OffsetsPartitions()
	layout := txnetcd.Layout{Prefix: groupsPrefix(v)}
	// The records of a cluster that ran one group coordinator for every
	// group move to their partitions before this node owns any: an
	// instance must load its groups whole.
	mctx, cancel := context.WithTimeout(context.Background(), groupsMigrationTimeout)
	_, err := groupsetcd.Migrate(mctx, groupsetcd.Migration{Client: cli, From: txnetcd.Layout{Prefix: v.Etcd().Prefix + "/groups"},
		To: layout, Partitions: n, NodeID: self.NodeID, LeaseTTL: ttl, Log: log.With().Str("component", "groups-migration").Logger()})
	cancel()
	if err != nil {
		return nil, err
	}
	m, err := ownership.Start(ownership.Config{Client: cli, Layout: layout, NodeID: self.NodeID, Partitions: n, LeaseTTL: ttl,
		Log: log.With().Str("role", "groups").Logger()}) // ownership names itself the component
	if err != nil {
		return nil, fmt.Errorf("group partitions' ownership: %w", err)
	}
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: n})
	base := log // the instances' components name themselves
	log = log.With().Str("component", "groups-holder").Logger()
	h := &groupHolder{member: m, partitions: n, dispatched: make(chan struct{}), closing: make(chan struct{})}
	for p := range n {
		ch := make(chan ownership.Event, 16)
		plog := log.With().Int32("offsets_partition", p).Logger()
		ilog := base.With().Int32("offsets_partition", p).Logger()
		h.events = append(h.events, ch)
		h.holders = append(h.holders, newPartitionHolder(m, p, ch, "group coordinator", plog,
			func(fence txnetcd.Fence, failed func(error)) (*groups.Coordinator, error) {
				cfg := cfg
				cfg.Log = ilog
				cfg.Records = groupsetcd.Open(store, fence, groupsetcd.Options{Log: ilog, OnFail: failed,
					DataPrefix: groupsetcd.PartitionDataPrefix(layout, p)})
				c, err := groups.Open(cfg)
				if err != nil {
					cfg.Records.Close()
				}
				return c, err
			}, (*groups.Coordinator).Close))
	}
	// One set of series for every instance this node opens: counters
	// add up across them, gauges over the instances it runs. Set before
	// any instance opens (the closures read cfg when they open one), and
	// after h.holders is complete (the gauges read it).
	cfg.SharedMetrics = groups.NewMetricsOf(cfg.Metrics, h.All)
	for _, ph := range h.holders {
		ph.start()
	}
	go h.dispatch()
	return h, nil
}

// dispatch passes each ownership event on to its partition's holder.
func (h *groupHolder) dispatch() {
	defer close(h.dispatched)
	defer func() {
		for _, ch := range h.events {
			close(ch)
		}
	}()
	for ev := range h.member.Events() {
		if ev.Partition < 0 || ev.Partition >= h.partitions {
			continue
		}
		select {
		case h.events[ev.Partition] <- ev:
		case <-h.closing: // the member's last events (its partitions released) have no reader
		}
	}
}

// Of is the instance serving partition p's groups on this node, or nil.
func (h *groupHolder) Of(p int32) *groups.Coordinator {
	if p < 0 || p >= h.partitions {
		return nil
	}
	return h.holders[p].Current()
}

// All is every instance this node runs.
func (h *groupHolder) All() []*groups.Coordinator {
	var out []*groups.Coordinator
	for _, ph := range h.holders {
		if c := ph.Current(); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// OwnerOf is the node owning partition p, as etcd says.
func (h *groupHolder) OwnerOf(p int32) (node, epoch int32, ok bool) { return h.member.Owner(p) }

// Close closes every instance and releases the partitions (their next
// owners take over at once).
func (h *groupHolder) Close() error {
	h.closeOnce.Do(func() {
		close(h.closing)
		for _, ph := range h.holders {
			ph.Close()
		}
		h.closeErr = h.member.Close()
		<-h.dispatched
	})
	return h.closeErr
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

// ownerNode is the View's group coordinator hook: the owner etcd names
// for a partition, or while none does (a takeover), the last one known, so
// that markers for that __consumer_offsets partition keep going to a node
// (they retry there until the next owner is known) instead of counting
// "no leader" refusals.
func (h *groupHolder) ownerNode(v *cluster.View) func(p int32) (cluster.Node, bool) {
	last := make([]atomic.Int32, h.partitions)
	for i := range last {
		last[i].Store(-1)
	}
	return func(p int32) (cluster.Node, bool) {
		if p < 0 || p >= h.partitions {
			return cluster.Node{}, false
		}
		node, _, ok := h.OwnerOf(p)
		if ok {
			last[p].Store(node)
		} else if node = last[p].Load(); node < 0 {
			return cluster.Node{}, false
		}
		return v.Node(node)
	}
}
