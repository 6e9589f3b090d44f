package node

import (
	"context"
	"fmt"
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
	*leaseHolder[topics.Controller]
	view *cluster.View
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
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: 1})
	h := &controllerHolder{view: v}
	h.leaseHolder = newLeaseHolder(m, "controller", log.With().Str("component", "controller-holder").Logger(), func(fence txnetcd.Fence, failed func(error)) (*topics.Controller, error) {
		// A failed commit (fenced out, or an etcd error or timeout,
		// after which etcd may hold what the controller's memory does
		// not) reopens the controller from etcd.
		recs := topicsetcd.Open(store, fence, topicsetcd.Options{OnFail: failed})
		return topics.Open(topics.Config{View: v, Records: recs, Log: log})
	}, (*topics.Controller).Close)
	h.start()
	return h, nil
}

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
