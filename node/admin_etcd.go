package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/txnrouter"
)

// adminReadTimeout bounds the etcd reads of one admin request.
const adminReadTimeout = 10 * time.Second

// etcdAdminBackend is the admin backend of a coordinator on etcd: it
// answers for the whole cluster (every transaction, from the coordinators
// this node runs or from etcd), and is ready while its member holds a
// valid lease (etcd reachable) and node 0's local store works.
func (c *Coordinator) etcdAdminBackend() *adminBackend {
	txns := &clusterTxns{router: c.Router, member: c.Member, store: c.Etcd, parts: c.view.TransactionStatePartitions(), log: c.lg,
		peer: c.peer, adminURL: c.peerAdminURL, token: c.adminToken}
	local := c.ownStore
	return &adminBackend{
		owner:    txns.owner,
		node:     c.Node.NodeID,
		coord:    txns,
		sender:   c.Sender,
		faults:   c.Faults,
		timeline: c.timelineOf,
		ready: func() error {
			if err := c.Member.Err(); err != nil {
				return fmt.Errorf("etcd: not serving transactions: %w", err)
			}
			if local != nil {
				if err := local.Err(); err != nil {
					return fmt.Errorf("%w: %w", errStoreFailed, err)
				}
			}
			return nil
		},
		topics:       c.controller,
		auth:         c.view.AuthMeta(),
		aclsRemote:   c.aclsRemote(),
		coordinators: c.coordinatorsOf,
	}
}

// clusterTxns is every transaction of an etcd cluster: those of the
// partitions this node serves from their coordinators (with what only the
// owner knows: pending writes, stuck markers), the others as etcd holds
// them.
type clusterTxns struct {
	router *txnrouter.Router
	member *ownership.Member
	store  *txnetcd.Store
	parts  int32
	log    zerolog.Logger
	// peer is another coordinator of this process (`txncoord up`), nil
	// for one of another process, reached through its admin API at
	// adminURL with token.
	peer     func(node int32) *Coordinator
	adminURL func(ctx context.Context, node int32) (string, error)
	token    string
}

var _ txnSource = (*clusterTxns)(nil)

// owner is the node that owns id's partition (-1 while none does).
func (t *clusterTxns) owner(id string) int32 {
	node, _, ok := t.member.Owner(t.store.PartitionFor(id))
	if !ok {
		return -1
	}
	return node
}

func (t *clusterTxns) List(f coordinator.ListFilter) []coordinator.TxnSummary {
	ctx, cancel := context.WithTimeout(context.Background(), adminReadTimeout)
	defer cancel()
	now := time.Now().UnixMilli()
	var out []coordinator.TxnSummary
	for p := int32(0); p < t.parts; p++ {
		if c, ok := t.router.Coordinator(p); ok {
			out = append(out, c.List(f)...)
			continue
		}
		st, err := t.store.Load(ctx, p)
		if err != nil {
			t.log.Warn().Err(err).Int32("partition", p).Msg("admin: list: partition not read")
			continue
		}
		for _, m := range st.Txns {
			if s, ok := f.Summary(&m, "", now); ok {
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

func (t *clusterTxns) Describe(id string) (coordinator.TxnDetail, bool) {
	p := t.store.PartitionFor(id)
	if c, ok := t.router.Coordinator(p); ok {
		return c.Describe(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminReadTimeout)
	defer cancel()
	m, ok, err := t.store.Get(ctx, id)
	if err != nil {
		t.log.Warn().Err(err).Str("txn_id", id).Msg("admin: describe: not read")
	}
	if !ok {
		return coordinator.TxnDetail{}, false
	}
	_, epoch, _ := t.member.Owner(p)
	return coordinator.DetailOf(&m, epoch), true
}

// AbortWith aborts through the partition's coordinator: this node's, or
// the owner's, in this process or through its admin API (published in
// etcd at its start, PublishAdminURL).
func (t *clusterTxns) AbortWith(ctx context.Context, id string, opts coordinator.AbortOptions) (coordinator.AbortResult, error) {
	p := t.store.PartitionFor(id)
	if c, ok := t.router.Coordinator(p); ok {
		return c.AbortWith(ctx, id, opts)
	}
	owner := t.owner(id)
	if owner < 0 {
		return coordinator.AbortResult{}, fmt.Errorf("%w: transaction %q belongs to __transaction_state partition %d, which has no coordinator right now (a takeover in progress): retry", admin.ErrConflict, id, p)
	}
	if peer := t.peer(owner); peer != nil {
		if c, ok := peer.Router.Coordinator(p); ok {
			return c.AbortWith(ctx, id, opts)
		}
	}
	url, err := t.adminURL(ctx, owner)
	if err != nil {
		return coordinator.AbortResult{}, fmt.Errorf("%w: transaction %q is coordinated by node %d, whose admin API is unknown (%v): ask it directly", admin.ErrConflict, id, owner, err)
	}
	txn, err := admin.NewClientWithToken(url, t.token).AbortForce(ctx, id, opts.Force)
	if err != nil {
		var apiErr *admin.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.Status {
			case http.StatusNotFound:
				return coordinator.AbortResult{}, fmt.Errorf("%w: %s (node %d)", kerr.TransactionalIDNotFound, apiErr.Message, owner)
			case http.StatusConflict:
				return coordinator.AbortResult{}, fmt.Errorf("%w: %s (node %d)", admin.ErrConflict, apiErr.Message, owner)
			}
		}
		return coordinator.AbortResult{}, fmt.Errorf("abort through node %d's admin API %s: %w", owner, url, err)
	}
	return coordinator.AbortResult{GaveUp: txn.GaveUp}, nil
}

// adminKey is where coordinator node publishes its admin API's URL.
func adminKey(prefix string, node int32) string {
	return fmt.Sprintf("%s/admin/%d", strings.TrimRight(prefix, "/"), node)
}

// PublishAdminURL records this coordinator's admin API URL in etcd, so
// the other coordinators' admin APIs can forward what only this node can
// do (abort a transaction of a partition it owns). A no-op without etcd.
func (c *Coordinator) PublishAdminURL(ctx context.Context, url string) error {
	if c.etcdClient == nil {
		return nil
	}
	_, err := c.etcdClient.Put(ctx, adminKey(c.view.Etcd().Prefix, c.Node.NodeID), url)
	return err
}

// peerAdminURL reads node's published admin URL.
func (c *Coordinator) peerAdminURL(ctx context.Context, node int32) (string, error) {
	resp, err := c.etcdClient.Get(ctx, adminKey(c.view.Etcd().Prefix, node))
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", errors.New("not published (its admin API is off)")
	}
	return string(resp.Kvs[0].Value), nil
}

// peer is another coordinator of this process (`txncoord up`), or nil.
func (c *Coordinator) peer(node int32) *Coordinator {
	if c.peers == nil {
		return nil
	}
	return c.peers(node)
}

var _ admin.CoordinatorsBackend = (*adminBackend)(nil)

// Coordinators is GET /v1/coordinators: every coordinator of the cluster
// file, live when it holds a lease, with the partitions etcd says it owns.
// A single coordinator owns every partition at its coordinator epoch.
func (b *adminBackend) Coordinators(context.Context) ([]admin.CoordinatorStatus, error) {
	return b.coordinators(), nil
}

// coordinatorsOf is the etcd mode's list, as this node's member sees it.
func (c *Coordinator) coordinatorsOf() []admin.CoordinatorStatus {
	live := map[int32]bool{}
	for _, id := range c.Member.Members() {
		live[id] = true
	}
	owned := map[int32][]admin.PartitionOwnership{}
	for p, o := range c.Member.Owners() {
		owned[o.NodeID] = append(owned[o.NodeID], admin.PartitionOwnership{Partition: p, Epoch: o.Epoch})
	}
	var out []admin.CoordinatorStatus
	for _, n := range c.view.Coordinators() {
		s := admin.CoordinatorStatus{NodeID: n.NodeID, Addr: n.Addr, KafkaVersion: n.KafkaVersion, Live: live[n.NodeID],
			Self: n.NodeID == c.Node.NodeID, Partitions: owned[n.NodeID], Serving: -1}
		if s.Self {
			s.Serving = len(c.Router.Serving())
		}
		out = append(out, s)
	}
	return out
}

// singleCoordinator is the single-coordinator mode's list: this node, owning
// every partition at its epoch.
func (c *Coordinator) singleCoordinator() []admin.CoordinatorStatus {
	n := c.view.TransactionStatePartitions()
	s := admin.CoordinatorStatus{NodeID: c.Node.NodeID, Addr: c.Node.Addr, KafkaVersion: c.Node.KafkaVersion, Live: true, Self: true,
		Serving: int(n)}
	for p := range n {
		s.Partitions = append(s.Partitions, admin.PartitionOwnership{Partition: p, Epoch: c.Coordinator.Epoch()})
	}
	return []admin.CoordinatorStatus{s}
}
