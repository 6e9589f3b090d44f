package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/txnlog"
)

// lockedBuffer is a log sink the coordinator's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// etcdPartition is one __transaction_state partition's coordinator the way
// the next session wires it: a member owns the partition, the coordinator
// runs over a txnetcd.PartitionStore fenced with the member's fence and
// takes producer ids from etcd blocks.
type etcdPartition struct {
	member *ownership.Member
	store  *txnetcd.PartitionStore
	c      *Coordinator
	fm     *fakeMarkers
	log    *lockedBuffer
}

// openEtcdPartition starts member node, waits until it owns partition p and
// opens a coordinator over it. Nothing is closed at cleanup but what the
// test leaves open (close is idempotent).
func openEtcdPartition(t *testing.T, st *txnetcd.Store, cfg ownership.Config, p int32) *etcdPartition {
	t.Helper()
	m, err := ownership.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var fence txnetcd.Fence
	waitFor(t, fmt.Sprintf("node %d owns partition %d", cfg.NodeID, p), func() bool {
		var ok bool
		fence, ok = m.Fence(p)
		return ok
	})
	ps, err := st.Partition(fence)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	ep := &etcdPartition{member: m, store: ps, fm: &fakeMarkers{complete: true}, log: &lockedBuffer{}}
	ep.c, err = Open(Config{View: testView("127.0.0.1:1"), Store: ps, ProducerIDs: NewProducerIDPool(st, 10),
		Markers: ep.fm, KafkaVersion: "4.2", AbortScanInterval: time.Hour, Log: zerolog.New(ep.log)})
	if err != nil {
		t.Fatal(err)
	}
	ep.fm.mu.Lock()
	ep.fm.c = ep.c
	ep.fm.mu.Unlock()
	t.Cleanup(func() { ep.c.Close() })
	if owned := m.Owned()[p]; ep.c.Epoch() != owned || ps.Epoch() != owned {
		t.Fatalf("coordinator epoch %d, store's %d, the member acquired partition %d with epoch %d", ep.c.Epoch(), ps.Epoch(), p, owned)
	}
	return ep
}

// TestCoordinatorOverEtcdPartition opens the coordinator over one etcd
// partition owned through ownership, runs transactions of that partition,
// restarts on a new owner with a higher epoch and finds them, and shows the
// former owner, still running with its stale fence, can write nothing.
func TestCoordinatorOverEtcdPartition(t *testing.T) {
	cluster := etcdtest.Start(t, 1)
	cli := cluster.Client(t)
	const parts = 4
	layout := txnetcd.Layout{Prefix: "/txncoord/coordinator-test"}
	st := txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: parts})
	member := func(node int32) ownership.Config {
		return ownership.Config{Client: cli, Layout: layout, NodeID: node, Partitions: parts,
			LeaseTTL: time.Second, Settle: 10 * time.Millisecond, Log: zerolog.Nop()}
	}
	const p = 2
	var ids []string // five ids of partition p
	for i := 0; len(ids) < 5; i++ {
		if id := fmt.Sprintf("txn-%d", i); st.PartitionFor(id) == p {
			ids = append(ids, id)
		}
	}
	done, open, late, prep, fresh := ids[0], ids[1], ids[2], ids[3], ids[4]

	// Owner 1: one committed transaction, one left open.
	a := openEtcdPartition(t, st, member(0), p)
	if a.c.Epoch() != 1 {
		t.Fatalf("first owner's coordinator epoch %d, want 1", a.c.Epoch())
	}
	pidDone, epochDone := initPID(t, a.c, done)
	if code := addPartitionsV3(a.c, done, pidDone, epochDone, "orders", 0, 1); code != 0 {
		t.Fatalf("AddPartitionsToTxn %s: %v", done, kerr.ErrorForCode(code))
	}
	if r := endTxn(a.c, 4, done, pidDone, epochDone, true); r.ErrorCode != 0 {
		t.Fatalf("EndTxn %s: %v", done, kerr.ErrorForCode(r.ErrorCode))
	}
	waitState(t, a.c, done, txnlog.CompleteCommit)
	if m := a.fm.snapshot(); len(m) != 1 || m[0].CoordinatorEpoch != 1 || !m[0].Commit {
		t.Fatalf("markers %+v, want one commit with coordinator epoch 1", m)
	}
	pidOpen, epochOpen := initPID(t, a.c, open)
	if code := addPartitionsV3(a.c, open, pidOpen, epochOpen, "orders", 3); code != 0 {
		t.Fatalf("AddPartitionsToTxn %s: %v", open, kerr.ErrorForCode(code))
	}
	if pidOpen == pidDone {
		t.Fatalf("two ids got producer id %d", pidOpen)
	}
	// One commit decided whose markers never got written: the next owner
	// must send them again, with its own epoch.
	a.fm.mu.Lock()
	a.fm.complete = false
	a.fm.mu.Unlock()
	pidPrep, epochPrep := initPID(t, a.c, prep)
	if code := addPartitionsV3(a.c, prep, pidPrep, epochPrep, "orders", 2); code != 0 {
		t.Fatalf("AddPartitionsToTxn %s: %v", prep, kerr.ErrorForCode(code))
	}
	if r := endTxn(a.c, 4, prep, pidPrep, epochPrep, true); r.ErrorCode != 0 {
		t.Fatalf("EndTxn %s: %v", prep, kerr.ErrorForCode(r.ErrorCode))
	}
	waitState(t, a.c, prep, txnlog.PrepareCommit)
	a.c.Close()
	a.store.Close()
	a.member.Close() // releases the partition at once

	// Owner 2, another node: a higher epoch, the same transactions.
	b := openEtcdPartition(t, st, member(1), p)
	if b.c.Epoch() != 2 {
		t.Fatalf("second owner's coordinator epoch %d, want 2", b.c.Epoch())
	}
	if d := waitState(t, b.c, done, txnlog.CompleteCommit); d.ProducerID != pidDone {
		t.Fatalf("%s after the takeover: %+v", done, d)
	}
	d := waitState(t, b.c, open, txnlog.Ongoing)
	if d.ProducerID != pidOpen || len(d.Partitions) != 1 || d.Partitions[0].Topic != "orders" || d.Partitions[0].Partition != 3 {
		t.Fatalf("%s after the takeover: %+v", open, d)
	}
	// The Prepare left behind is resent at Open with the new epoch; its
	// markers written, it completes under the new owner.
	m := b.fm.snapshot()
	if len(m) != 1 || m[0].TransactionalID != prep || m[0].CoordinatorEpoch != 2 || !m[0].Commit || m[0].ProducerID != pidPrep {
		t.Fatalf("second owner's markers %+v, want %s's commit with coordinator epoch 2", m, prep)
	}
	b.c.MarkersWritten(m[0])
	waitState(t, b.c, prep, txnlog.CompleteCommit)
	// Producer ids come from a fresh etcd block: never one handed out before.
	pidLate, _ := initPID(t, b.c, late)
	if pidLate == pidDone || pidLate == pidOpen || pidLate == pidPrep || pidLate < 10 {
		t.Fatalf("producer id %d after the takeover (first owner's block was [0,10): %d, %d, %d)", pidLate, pidDone, pidOpen, pidPrep)
	}

	// Owner 2 loses the partition (its lease is gone) and owner 3 takes it,
	// while owner 2's coordinator still runs with its old fence: a zombie.
	b.member.Close()
	c := openEtcdPartition(t, st, member(2), p)
	if c.c.Epoch() != 3 {
		t.Fatalf("third owner's coordinator epoch %d, want 3", c.c.Epoch())
	}
	// Every write of the zombie is fenced out, and each request that
	// needed one is answered NOT_COORDINATOR (the client must find the
	// new owner), not COORDINATOR_NOT_AVAILABLE.
	if code := addPartitionsV3(b.c, open, pidOpen, epochOpen, "orders", 0); code != kerr.NotCoordinator.Code {
		t.Fatalf("zombie's AddPartitionsToTxn: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	serveOffsets(b.c)
	oreq := kmsg.NewPtrAddOffsetsToTxnRequest()
	oreq.SetVersion(3)
	oreq.TransactionalID, oreq.ProducerID, oreq.ProducerEpoch, oreq.Group = open, pidOpen, epochOpen, "my-group"
	if r := call(b.c, 25, oreq).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("zombie's AddOffsetsToTxn: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := endTxn(b.c, 4, open, pidOpen, epochOpen, false); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("zombie's EndTxn: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	for _, id := range []string{done, fresh} { // an epoch bump, a new id
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
		if r := call(b.c, 22, req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("zombie's InitProducerId %s: %v, want NOT_COORDINATOR", id, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if !errors.Is(txnetcd.ErrNotOwner, txnlog.ErrNotOwner) || !errors.Is(fmt.Errorf("wrapped: %w", txnlog.ErrNotOwner), txnetcd.ErrNotOwner) {
		t.Fatal("txnetcd.ErrNotOwner is not txnlog.ErrNotOwner")
	}
	if !strings.Contains(b.log.String(), txnetcd.ErrNotOwner.Error()) {
		t.Fatalf("the zombie's log does not say why its writes failed:\n%s", b.log.String())
	}
	if err := txnlog.Apply(t.Context(), b.store, txnlog.Batch{}); !errors.Is(err, txnetcd.ErrNotOwner) || !errors.Is(err, txnlog.ErrNotOwner) {
		t.Fatalf("zombie's fence check: %v, want ErrNotOwner", err)
	}
	// Nothing of the zombie's reached etcd: the new owner's coordinator
	// still has the transaction as owner 1 left it, and serves it.
	d = waitState(t, c.c, open, txnlog.Ongoing)
	if len(d.Partitions) != 1 || d.Partitions[0].Partition != 3 {
		t.Fatalf("%s at the third owner: %+v", open, d)
	}
	if d := waitState(t, c.c, done, txnlog.CompleteCommit); d.ProducerID != pidDone || d.ProducerEpoch != epochDone {
		t.Fatalf("%s at the third owner: %+v, want producer %d epoch %d", done, d, pidDone, epochDone)
	}
	if d, ok := c.c.Describe(fresh); ok {
		t.Fatalf("the zombie's new id %s reached etcd: %+v", fresh, d)
	}
	if r := endTxn(c.c, 4, open, pidOpen, epochOpen, false); r.ErrorCode != 0 {
		t.Fatalf("EndTxn %s at the third owner: %v", open, kerr.ErrorForCode(r.ErrorCode))
	}
	waitState(t, c.c, open, txnlog.CompleteAbort)
	if m := c.fm.snapshot(); len(m) != 1 || m[0].TransactionalID != open || m[0].CoordinatorEpoch != 3 || m[0].Commit {
		t.Fatalf("third owner's markers %+v, want one abort with coordinator epoch 3", m)
	}
}
