package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/storage"
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
//
// The security metadata (authmeta: ACLs, SCRAM credentials, quotas,
// finalized features) is the controller's too: the holder attaches the
// view's authmeta.State to its records in etcd, beside the topics' and
// written under the same fence, and detaches it when it closes the
// controller; the other nodes forward its APIs to the holder and mirror
// it from there.
type controllerHolder struct {
	*leaseHolder[topics.Controller]
	view *cluster.View

	mu   sync.Mutex
	auth map[*topics.Controller]authmeta.Records // what each instance attached
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
	h := &controllerHolder{view: v, auth: map[*topics.Controller]authmeta.Records{}}
	h.leaseHolder = newLeaseHolder(m, "controller", log.With().Str("component", "controller-holder").Logger(), func(fence txnetcd.Fence, failed func(error)) (*topics.Controller, error) {
		// A failed commit (fenced out, or an etcd error or timeout,
		// after which etcd may hold what the controller's memory does
		// not) reopens the controller from etcd; the security
		// metadata's too.
		auth := topicsetcd.Open(store, fence, topicsetcd.Options{Codec: topicsetcd.AuthMeta, OnFail: failed})
		if err := v.AuthMeta().Attach(auth, log); err != nil {
			return nil, err
		}
		ctl, err := topics.Open(topics.Config{View: v, Records: topicsetcd.Open(store, fence, topicsetcd.Options{OnFail: failed}), Log: log})
		if err != nil {
			v.AuthMeta().Detach(auth)
			return nil, err
		}
		h.mu.Lock()
		h.auth[ctl] = auth
		h.mu.Unlock()
		return ctl, nil
	}, h.closeController)
	h.start()
	return h, nil
}

// closeController closes an instance: the security metadata it attached
// (unless a newer holder of this process attached its own) and the
// controller.
func (h *controllerHolder) closeController(ctl *topics.Controller) error {
	h.mu.Lock()
	auth := h.auth[ctl]
	delete(h.auth, ctl)
	h.mu.Unlock()
	var err error
	if auth != nil {
		err = h.view.AuthMeta().Detach(auth)
	}
	return errors.Join(err, ctl.Close())
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

// seedControllerRecords copies the topics and the security metadata of a
// single coordinator's store st (node 0's data dir, or `up`'s shared
// store, from before the cluster had several coordinators) into etcd,
// each once: only while etcd holds none of its records. Later changes to
// st are not copied. A failure is logged: what was not copied stays
// behind.
func seedControllerRecords(cli *clientv3.Client, v *cluster.View, st *storage.Store, log zerolog.Logger) {
	for _, set := range []struct {
		what  string
		codec topicsetcd.Codec
		open  func(*storage.Store) (authmeta.Records, error)
	}{
		{"topics", topicsetcd.Topics, func(st *storage.Store) (authmeta.Records, error) { return topics.SpaceRecords(st) }},
		{"security metadata", topicsetcd.AuthMeta, authmeta.SpaceRecords},
	} {
		recs, err := set.open(st)
		if err == nil {
			err = seedRecords(cli, v, set.codec, recs, log)
			recs.Close()
		}
		if err != nil {
			log.Warn().Err(err).Msgf("the %s of this data dir's single coordinator were not copied into etcd: they stay behind", set.what)
		}
	}
}

// seedRecords copies recs into etcd as codec c's records, once.
func seedRecords(cli *clientv3.Client, v *cluster.View, c topicsetcd.Codec, recs authmeta.Records, log zerolog.Logger) error {
	var raws [][]byte
	if err := recs.Load(func(raw []byte) error {
		raws = append(raws, append([]byte(nil), raw...))
		return nil
	}); err != nil {
		return fmt.Errorf("records of this data dir: %w", err)
	}
	if len(raws) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
	defer cancel()
	copied, err := topicsetcd.Seed(ctx, cli, controllerLayout(v), c, raws, 0)
	if err != nil {
		return err
	}
	if copied {
		log.Info().Int("records", len(raws)).Strs("kinds", c.Kinds).Msg("the records of this data dir's single coordinator copied into etcd, where the controller keeps them now")
	}
	return nil
}

// showControllerRecords puts the controller's records in etcd into v, for
// a process whose leaders recover before any controller loads them.
func showControllerRecords(cli *clientv3.Client, v *cluster.View) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnetcd.LoadTimeout)
	defer cancel()
	if err := showAuthRecords(cli, v); err != nil {
		return err
	}
	return topicsetcd.Snapshot(ctx, cli, controllerLayout(v), topicsetcd.Topics, func(raw []byte) error { return topics.Show(v, raw) })
}

// showAuthRecords loads the security metadata in etcd into v's State
// (unless a holder attached it already): its listeners enforce the ACLs
// and log the SCRAM users in before any holder serves them.
func showAuthRecords(cli *clientv3.Client, v *cluster.View) error {
	return v.AuthMeta().Show(topicsetcd.SnapshotRecords{Client: cli, Layout: controllerLayout(v), Codec: topicsetcd.AuthMeta})
}
