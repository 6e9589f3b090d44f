package node

import (
	"context"
	"fmt"
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
	*leaseHolder[groups.Coordinator]
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
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: 1})
	log = log.With().Str("component", "groups-holder").Logger()
	h := &groupHolder{}
	h.leaseHolder = newLeaseHolder(m, "group coordinator", log, func(fence txnetcd.Fence, failed func(error)) (*groups.Coordinator, error) {
		cfg := cfg
		cfg.Records = groupsetcd.Open(store, fence, groupsetcd.Options{Log: log, OnFail: failed})
		c, err := groups.Open(cfg)
		if err != nil {
			cfg.Records.Close()
		}
		return c, err
	}, (*groups.Coordinator).Close)
	// One set of series for every instance this node opens: counters
	// add up across them, gauges read the one it runs (0 on the others).
	// Set before start: every instance's config (the closure's) has it.
	cfg.SharedMetrics = groups.NewMetrics(cfg.Metrics, h.Current)
	h.start()
	return h, nil
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
