package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/txncoord/txncoord/authmeta"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/txntimeline"
)

// adminBackend adapts the coordinator and the marker sender to the admin
// API.
type adminBackend struct {
	// owner is the coordinator node of a transactional id.
	owner func(id string) int32
	// node is this coordinator's node id (whose marker sender it shows).
	node   int32
	coord  txnSource
	sender *markersender.Sender
	// ready is why the node does not serve writes (nil when it does).
	ready func() error
	// topics is the topic controller (admin_topics.go): nil, or nil
	// returned, on a coordinator that does not run it.
	topics func() *topics.Controller
	// auth is the controller's security metadata (admin_acls.go),
	// attached where the controller is open, else a mirror of it.
	auth *authmeta.State
	// aclsRemote reaches the controller's holder where this process
	// does not hold it (nil: nowhere to reach).
	aclsRemote *aclsRemote
	// coordinators lists the cluster's coordinators (admin_etcd.go).
	coordinators func() []admin.CoordinatorStatus
	// faults are the process's injected faults (nil: none can be set).
	faults *faults.Set
	// cleanable is a partition's cleanable ratio from a leader of this
	// process (Coordinator.Cleanable); nil: none.
	cleanable func(topic string, partition int32) (float64, bool)
	// timeline is the recorder of the process's coordinator of a node
	// (nil: none kept).
	timeline func(owner int32) *txntimeline.Recorder
}

// FaultSet is admin.FaultsBackend: the faults of this process's nodes.
func (b *adminBackend) FaultSet() *faults.Set { return b.faults }

// txnSource is what the admin API reads and asks of transactions: the
// coordinator (*coordinator.Coordinator), or every coordinator of an etcd
// cluster (clusterTxns).
type txnSource interface {
	List(coordinator.ListFilter) []coordinator.TxnSummary
	Describe(id string) (coordinator.TxnDetail, bool)
	AbortWith(ctx context.Context, id string, opts coordinator.AbortOptions) (coordinator.AbortResult, error)
}

// AdminBackend is what the admin API of this coordinator serves.
func (c *Coordinator) AdminBackend() admin.Backend {
	if c.Router != nil {
		return c.withGroupsAdmin(c.etcdAdminBackend())
	}
	store := c.Store
	return c.withGroupsAdmin(&adminBackend{owner: func(string) int32 { return c.Node.NodeID }, node: c.Node.NodeID, coord: c.Coordinator, sender: c.Sender,
		ready: func() error {
			if err := store.Err(); err != nil {
				return fmt.Errorf("%w: %w", errStoreFailed, err)
			}
			return nil
		}, topics: c.controller, coordinators: c.singleCoordinator, faults: c.Faults, cleanable: c.Cleanable, auth: c.view.AuthMeta(),
		timeline: c.timelineOf})
}

func (b *adminBackend) txn(d coordinator.TxnDetail) admin.Txn {
	t := admin.Txn{
		TransactionalID: d.TransactionalID, CoordinatorID: b.owner(d.TransactionalID), ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		State: d.State, TimeoutMs: d.TimeoutMs, StartTimeMs: d.StartTimestamp, LastUpdateTimeMs: d.LastUpdateTimestamp,
		DurationMs: -1, TransactionVersion: d.ClientTransactionVersion, StuckReason: d.StuckReason,
		Partitions: apiPartitions(d.Partitions),
	}
	if d.State != txnlog.Empty.String() && d.StartTimestamp > 0 {
		end := time.Now().UnixMilli()
		if finished(d.State) && d.LastUpdateTimestamp >= d.StartTimestamp {
			// Its Complete record's time is its end: the duration
			// stops growing there.
			end = d.LastUpdateTimestamp
		}
		t.DurationMs = end - d.StartTimestamp
	}
	if c := d.Completing; c != nil {
		t.Completing = &admin.Completing{Result: "abort", ProducerEpoch: c.ProducerEpoch, Partitions: apiPartitions(c.Partitions)}
		if c.Commit {
			t.Completing.Result = "commit"
		}
	}
	return t
}

// finished reports whether a transaction in state has ended.
func finished(state string) bool {
	return state == txnlog.CompleteCommit.String() || state == txnlog.CompleteAbort.String() || state == txnlog.Dead.String()
}

// apiPartitions is a copy of tps for the admin API: an empty list, never
// null.
func apiPartitions(tps []txncore.TopicPartition) []txncore.TopicPartition {
	return append(make([]txncore.TopicPartition, 0, len(tps)), tps...)
}

func (b *adminBackend) Transactions(f admin.ListFilter) []admin.Txn {
	cf := coordinator.ListFilter{MinDuration: f.MinDuration}
	if f.State != "" {
		st, ok := txnlog.ParseState(f.State)
		if !ok {
			return nil
		}
		cf.States = []txnlog.State{st}
	}
	var out []admin.Txn
	for _, s := range b.coord.List(cf) {
		if d, ok := b.coord.Describe(s.TransactionalID); ok {
			t := b.txn(d)
			if f.MinDuration > 0 && t.DurationMs < f.MinDuration.Milliseconds() {
				// Finished sooner: it was never open that long (its
				// duration stopped at its end; List measures to now).
				continue
			}
			out = append(out, t)
		}
	}
	return out
}

// TransactionsPage is admin.TxnPager: the matches and their totals come
// from List's summaries, and only the page's transactions are described.
func (b *adminBackend) TransactionsPage(q admin.TxnPageQuery) admin.TxnPage {
	cf := coordinator.ListFilter{IDPattern: q.ID}
	for _, name := range q.States {
		if st, ok := txnlog.ParseState(name); ok {
			cf.States = append(cf.States, st)
		}
	}
	if len(q.States) > 0 && len(cf.States) == 0 {
		return admin.TxnPage{}
	}
	var matched []coordinator.TxnSummary
	counts := map[string]int{}
	for _, s := range b.coord.List(cf) {
		if q.Coordinator != nil && b.owner(s.TransactionalID) != *q.Coordinator {
			continue
		}
		matched = append(matched, s)
		counts[s.State]++
	}
	slices.SortFunc(matched, func(x, y coordinator.TxnSummary) int { return strings.Compare(x.TransactionalID, y.TransactionalID) })
	start, end := q.Bounds(len(matched))
	page := admin.TxnPage{Total: len(matched), Counts: counts}
	for _, s := range matched[start:end] {
		if d, ok := b.coord.Describe(s.TransactionalID); ok {
			page.Txns = append(page.Txns, b.txn(d))
		}
	}
	return page
}

func (b *adminBackend) Transaction(id string) (admin.Txn, error) {
	d, ok := b.coord.Describe(id)
	if !ok {
		return admin.Txn{}, fmt.Errorf("%w: %q", admin.ErrNotFound, id)
	}
	t := b.txn(d)
	if b.timeline != nil {
		t.Timeline = apiTimeline(b.timeline(t.CoordinatorID).Timeline(id))
	}
	return t, nil
}

func (b *adminBackend) Abort(ctx context.Context, id string, force bool) (admin.Txn, error) {
	res, err := b.coord.AbortWith(ctx, id, coordinator.AbortOptions{Force: force})
	if err != nil {
		switch {
		case errors.Is(err, kerr.TransactionalIDNotFound):
			return admin.Txn{}, fmt.Errorf("%w: %v", admin.ErrNotFound, err)
		case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.InvalidTxnState):
			return admin.Txn{}, fmt.Errorf("%w: %v", admin.ErrConflict, err)
		}
		return admin.Txn{}, err
	}
	t, err := b.Transaction(id)
	if len(res.GaveUp) > 0 {
		t.GaveUp = apiPartitions(res.GaveUp)
	}
	return t, err
}

func (b *adminBackend) RetryMarkers(id string) (admin.Txn, error) {
	t, err := b.Transaction(id)
	if err != nil {
		return t, err
	}
	if !b.sender.Retry(id) {
		return t, fmt.Errorf("%w: transaction %q has no stuck markers", admin.ErrConflict, id)
	}
	return t, nil
}

func (b *adminBackend) Leaders() []markersender.LeaderStatus {
	ls := b.sender.Leaders()
	for i := range ls {
		ls[i].Sender = b.node
	}
	return ls
}

func (b *adminBackend) Markers() []markersender.PendingTxn { return b.sender.Markers() }

// Ready fails once the process log stopped on a failed write (fail-stop),
// or, in the etcd mode, while the node holds no valid lease.
func (b *adminBackend) Ready() error { return b.ready() }
