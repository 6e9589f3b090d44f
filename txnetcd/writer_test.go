package txnetcd

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.uber.org/zap"

	"github.com/txncoord/txncoord/internal/freeport"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// gate holds each Txn of a Store's shared writer until the test releases
// it, and hands the test what the Txn carries. Once opened, Txns pass.
type gate struct {
	entered chan *txnPlan
	release chan struct{}
	open    atomic.Bool
}

// newGate installs a gate on s; s's writer must be idle.
func newGate(s *Store) *gate {
	g := &gate{entered: make(chan *txnPlan), release: make(chan struct{})}
	s.w.beforeTxn = func(p *txnPlan) {
		if g.open.Load() {
			return
		}
		g.entered <- p
		<-g.release
	}
	return g
}

// next waits for the writer to hold its next Txn, and returns it.
func (g *gate) next(t *testing.T) *txnPlan {
	t.Helper()
	select {
	case p := <-g.entered:
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("the writer sent no Txn")
		return nil
	}
}

// pass releases the held Txn.
func (g *gate) pass() { g.release <- struct{}{} }

// openAndPass lets every later Txn through, then releases the held one.
func (g *gate) openAndPass() {
	g.open.Store(true)
	g.pass()
}

// noWriterLeft waits until no writer goroutine of any Store runs: one
// ends once it finds its queue empty, which it does right after
// answering its last batches.
func noWriterLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "txnetcd.(*Store).write(") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a writer goroutine is still running with nothing queued:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func partitionStores(t *testing.T, s *Store, cli *clientv3.Client, l Layout, partitions ...int32) []*PartitionStore {
	t.Helper()
	var out []*PartitionStore
	for _, p := range partitions {
		ps, err := s.Partition(acquire(t, cli, l, p, 0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
		out = append(out, ps)
	}
	return out
}

// put is a batch writing producer id pid into each id's record.
func put(pid int64, ids ...string) txnlog.Batch {
	var b txnlog.Batch
	for _, id := range ids {
		b.Puts = append(b.Puts, txnlog.TxnMetadata{TransactionalID: id, ProducerID: pid, NextProducerID: -1, PrevProducerID: -1,
			LastProducerEpoch: -1, TimeoutMs: 60000, State: txncore.Ongoing})
	}
	return b
}

func waitAll(t *testing.T, results []<-chan error) {
	t.Helper()
	for i, r := range results {
		if err := <-r; err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// producerIDs loads partitions and returns each id's producer id.
func producerIDs(t *testing.T, s *Store, partitions ...int32) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, p := range partitions {
		st, err := s.Load(ctxT(t), p)
		if err != nil {
			t.Fatal(err)
		}
		for id, m := range st.Txns {
			out[id] = m.ProducerID
		}
	}
	return out
}

// Writes of several partitions queued while a Txn is in flight go in one
// Txn; under concurrent submitters every write is committed, and each id's
// values appear in etcd's history in the order they were submitted.
func TestWriterGroupsPartitions(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	partitions := []int32{0, 5, 10, 15, 20, 25, 30, 35}
	stores := partitionStores(t, s, cli, l, partitions...)
	const writersPer, writes = 4, 25
	start, err := cli.Get(ctxT(t), l.PIDNextKey())
	if err != nil {
		t.Fatal(err)
	}

	g := newGate(s)
	blocker := submit(stores[0], txnlog.Batch{CoordinatorEpoch: stores[0].Epoch()}) // a fence check
	if p := g.next(t); len(p.batches) != 1 {
		t.Fatalf("first Txn carries %d batches", len(p.batches))
	}
	// While it is held, 32 writers (4 ids of each partition) submit
	// without waiting: everything queued fits in one Txn (8 compares, 32
	// keys).
	ids := map[*PartitionStore][]string{}
	var mu sync.Mutex
	var results []<-chan error
	submitAll := func(from int64) {
		var wg sync.WaitGroup
		for _, ps := range stores {
			for _, id := range ids[ps] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for pid := from; pid < from+writes; pid++ {
						r := submit(ps, put(pid, id))
						mu.Lock()
						results = append(results, r)
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
	}
	for i, ps := range stores {
		ids[ps] = idsIn(partitions[i], writersPer, "grouped")
	}
	submitAll(1)
	g.pass()
	second := g.next(t)
	if len(second.batches) != len(stores)*writersPer*writes || len(second.fences) != len(stores) || len(second.ops) != len(stores)*writersPer {
		t.Fatalf("second Txn: %d batches, %d compares, %d ops; want every queued batch of %d partitions", len(second.batches), len(second.fences), len(second.ops), len(stores))
	}
	g.openAndPass()
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	waitAll(t, results)
	st := s.Stats()
	if want := uint64(1 + len(results)); st.Txns != 2 || st.Batches != want || st.Transitions != uint64(len(stores)*writersPer) {
		t.Fatalf("store stats %+v, want 2 Txns of %d batches and %d keys", st, want, len(stores)*writersPer)
	}
	for i, ps := range stores {
		commits, batches := uint64(1), uint64(writersPer*writes)
		if i == 0 {
			commits, batches = 2, batches+1
		}
		if got := ps.Stats(); got.Commits != commits || got.Batches != batches || got.Transitions != writersPer {
			t.Fatalf("partition %d stats %+v, want %d commits, %d batches, %d transitions", partitions[i], got, commits, batches, writersPer)
		}
	}

	// Free running: the same writers again, each Txn taking what was
	// queued meanwhile.
	results = nil
	submitAll(writes + 1)
	waitAll(t, results)
	st = s.Stats()
	total := uint64(1 + 2*len(stores)*writersPer*writes)
	if st.Batches != total || st.Txns >= st.Batches || st.Refused != 0 {
		t.Fatalf("store stats %+v: want %d batches in fewer Txns, none refused", st, total)
	}
	var perPartition uint64
	for _, ps := range stores {
		perPartition += ps.Stats().Commits
	}
	if perPartition <= st.Txns {
		t.Fatalf("partitions' commits sum to %d, the store's Txns are %d: no Txn carried two partitions", perPartition, st.Txns)
	}

	got := producerIDs(t, s, partitions...)
	if len(got) != len(stores)*writersPer {
		t.Fatalf("%d ids in etcd, want %d", len(got), len(stores)*writersPer)
	}
	for id, pid := range got {
		if pid != 2*writes {
			t.Fatalf("%s: producer id %d, want the last write's %d", id, pid, 2*writes)
		}
	}
	checkHistoryOrder(t, cli, l, start.Header.Revision)
	noWriterLeft(t)
}

// checkHistoryOrder reads every change of the layout's records after
// revision from etcd's history: each id's producer ids must rise (values
// merged into one Txn are skipped, never reordered).
func checkHistoryOrder(t *testing.T, cli *clientv3.Client, l Layout, revision int64) {
	t.Helper()
	prefix := strings.TrimSuffix(l.IDsPrefix(0), "0/")
	now, err := cli.Get(ctxT(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var head int64 // the last write of a record
	for _, kv := range now.Kvs {
		head = max(head, kv.ModRevision)
	}
	last := map[string]int64{}
	for w := range cli.Watch(ctxT(t), prefix, clientv3.WithPrefix(), clientv3.WithRev(revision+1)) {
		if err := w.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range w.Events {
			m, err := txnlog.DecodeTxn(ev.Kv.Value)
			if err != nil {
				t.Fatal(err)
			}
			if m.ProducerID <= last[m.TransactionalID] {
				t.Fatalf("%s: producer id %d written after %d", m.TransactionalID, m.ProducerID, last[m.TransactionalID])
			}
			last[m.TransactionalID] = m.ProducerID
			if ev.Kv.ModRevision >= head {
				return
			}
		}
	}
	t.Fatal("watch ended before the head revision")
}

// A partition fenced out while its batches are queued with others': its
// batches fail with ErrNotOwner and write nothing; the others' go in the
// next Txn, in their order; one of a store closed meanwhile fails with
// ErrClosed (nothing of it was written either).
func TestWriterFencedPartitionFailsAlone(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const pFenced, pKept, pBlocker, pClosed = 12, 13, 14, 15
	stores := partitionStores(t, s, cli, l, pFenced, pKept, pBlocker, pClosed)
	fenced, kept, blocker, closed := stores[0], stores[1], stores[2], stores[3]
	fencedID, keptIDs, closedID := idsIn(pFenced, 1, "fenced")[0], idsIn(pKept, 2, "fenced"), idsIn(pClosed, 1, "fenced")[0]

	g := newGate(s)
	first := submit(blocker, put(1, idsIn(pBlocker, 1, "fenced")...))
	g.next(t)
	results := []<-chan error{
		submit(fenced, put(1, fencedID)),
		submit(kept, put(1, keptIDs[0])),
		submit(fenced, put(2, fencedID)),
		submit(kept, put(2, keptIDs[0], keptIDs[1])),
		submit(closed, put(1, closedID)),
		submit(kept, put(3, keptIDs[0])),
	}
	acquire(t, cli, l, pFenced, 1) // taken over
	g.pass()
	refused := g.next(t)
	if len(refused.batches) != len(results) || len(refused.fences) != 3 {
		t.Fatalf("second Txn: %d batches of %d fences", len(refused.batches), len(refused.fences))
	}
	closed.Close()                            // in flight: the Txn is not cut
	later := submit(kept, put(4, keptIDs[0])) // queued behind the refused Txn's batches
	g.pass()
	retried := g.next(t)
	if len(retried.batches) != 4 || len(retried.fences) != 1 || retried.fences[0] != kept.Fence() {
		t.Fatalf("third Txn: %d batches, fences %v; want the kept partition's 4", len(retried.batches), retried.fences)
	}
	g.openAndPass()

	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wantNotOwner := fmt.Sprintf("%v %d (fence %s)", ErrNotOwner, pFenced, fenced.Fence().OwnerValue)
	for _, i := range []int{0, 2} {
		if err := <-results[i]; !errors.Is(err, ErrNotOwner) || err.Error() != wantNotOwner {
			t.Fatalf("fenced partition's write %d: %v, want %q", i, err, wantNotOwner)
		}
	}
	for _, i := range []int{1, 3, 5} {
		if err := <-results[i]; err != nil {
			t.Fatalf("kept partition's write %d: %v", i, err)
		}
	}
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	if err := <-results[4]; !errors.Is(err, txnlog.ErrClosed) {
		t.Fatalf("closed store's write in a refused Txn: %v", err)
	}
	got := producerIDs(t, s, pFenced, pKept, pClosed)
	if len(got) != 2 || got[keptIDs[0]] != 4 || got[keptIDs[1]] != 2 {
		t.Fatalf("in etcd: %v; want only the kept partition's last writes (%s=4, %s=2)", got, keptIDs[0], keptIDs[1])
	}
	if st := s.Stats(); st.Txns != 2 || st.Refused != 1 || st.Batches != 5 {
		t.Fatalf("store stats %+v, want 2 Txns (5 batches) and 1 refused", st)
	}
	if st := kept.Stats(); st.Commits != 1 || st.Batches != 4 || st.Transitions != 2 {
		t.Fatalf("kept partition's stats %+v", st)
	}
	if st := fenced.Stats(); st != (txnlog.Stats{}) {
		t.Fatalf("fenced partition's stats %+v", st)
	}
	// The fenced store stays fenced; the others write on.
	if err := txnlog.Apply(ctxT(t), fenced, put(3, fencedID)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("write after the takeover: %v", err)
	}
	if err := txnlog.Apply(ctxT(t), kept, put(4, keptIDs[1])); err != nil {
		t.Fatal(err)
	}
	noWriterLeft(t)
}

// Closing a store whose batches are queued among others' fails its
// queued batches at once and later calls with ErrClosed; its batch in the
// Txn in flight gets that Txn's outcome; the others are committed.
func TestWriterCloseAmongOthers(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const pClosed, pOther = 21, 22
	stores := partitionStores(t, s, cli, l, pClosed, pOther)
	closing, other := stores[0], stores[1]
	closedIDs, otherIDs := idsIn(pClosed, 3, "close"), idsIn(pOther, 2, "close")

	g := newGate(s)
	inFlight := submit(closing, put(1, closedIDs[0]))
	g.next(t)
	queued := []<-chan error{
		submit(closing, put(1, closedIDs[1])),
		submit(other, put(1, otherIDs[0])),
		submit(closing, put(1, closedIDs[2])),
		submit(other, put(1, otherIDs[1])),
	}
	closing.Close()
	for _, i := range []int{0, 2} { // answered while the writer is held
		var err error
		select {
		case err = <-queued[i]:
		case <-time.After(30 * time.Second):
			t.Fatalf("queued write %d of the closed store not answered at Close", i)
		}
		if !errors.Is(err, txnlog.ErrClosed) {
			t.Fatalf("queued write %d of the closed store: %v", i, err)
		}
	}
	if err := txnlog.Apply(ctxT(t), closing, put(2, closedIDs[0])); !errors.Is(err, txnlog.ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
	if _, err := closing.Load(); !errors.Is(err, txnlog.ErrClosed) {
		t.Fatalf("load after close: %v", err)
	}
	g.pass()
	if p := g.next(t); len(p.batches) != 2 || len(p.fences) != 1 || p.fences[0] != other.Fence() {
		t.Fatalf("second Txn: %d batches, fences %v; want the other store's 2", len(p.batches), p.fences)
	}
	g.openAndPass()
	if err := <-inFlight; err != nil {
		t.Fatalf("the closed store's write in flight: %v", err)
	}
	for _, i := range []int{1, 3} {
		if err := <-queued[i]; err != nil {
			t.Fatalf("other store's write %d: %v", i, err)
		}
	}
	got := producerIDs(t, s, pClosed, pOther)
	if len(got) != 3 || got[closedIDs[0]] != 1 || got[otherIDs[0]] != 1 || got[otherIDs[1]] != 1 {
		t.Fatalf("in etcd: %v; want the write in flight and the other store's", got)
	}
	if err := closing.Close(); err != nil { // twice
		t.Fatal(err)
	}
	noWriterLeft(t)
}

// With a small MaxTxnOps, batches of many partitions and sizes are split
// into Txns whose compares and operations stay within it (a batch as
// large as MaxTxnOps goes alone), in order, and all committed.
func TestWriterMaxTxnOps(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	const maxOps = 6
	s := NewStore(cli, Options{Layout: l, MaxTxnOps: maxOps})
	partitions := []int32{40, 41, 42, 43, 44}
	stores := partitionStores(t, s, cli, l, partitions...)
	ids := map[*PartitionStore][]string{}
	for i, ps := range stores {
		ids[ps] = idsIn(partitions[i], maxOps, "max")
	}

	var mu sync.Mutex
	var plans []*txnPlan
	g := newGate(s)
	s.w.beforeTxn = func(p *txnPlan) {
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
		if !g.open.Load() {
			g.entered <- p
			<-g.release
		}
	}
	first := submit(stores[0], put(0, ids[stores[0]][0]))
	g.next(t)
	want := map[string]int64{ids[stores[0]][0]: 0}
	var results []<-chan error
	pid := int64(0)
	for round := range 4 {
		for i, ps := range stores {
			pid++
			// 1..6 keys (6 = MaxTxnOps, which must still be written), and
			// a fence check now and then.
			n := (round+i)%maxOps + 1
			b := put(pid, ids[ps][:n]...)
			if (round+i)%4 == 3 {
				b = txnlog.Batch{CoordinatorEpoch: ps.Epoch()}
			} else {
				for _, id := range ids[ps][:n] {
					want[id] = pid
				}
			}
			results = append(results, submit(ps, b))
		}
	}
	g.openAndPass()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	waitAll(t, results)

	mu.Lock()
	sent := plans
	mu.Unlock()
	batches, alone := 0, false
	for i, p := range sent {
		batches += len(p.batches)
		if len(p.ops) > maxOps || len(p.fences) > maxOps || len(p.partitions) > maxOps {
			t.Fatalf("Txn %d: %d ops, %d compares, %d reads: a branch above %d", i, len(p.ops), len(p.fences), len(p.partitions), maxOps)
		}
		if len(p.batches) > 1 && p.size() > maxOps {
			t.Fatalf("Txn %d: %d batches with %d compares + %d ops > %d", i, len(p.batches), len(p.fences), len(p.ops), maxOps)
		}
		if len(p.ops) == maxOps {
			alone = true
		}
	}
	if batches != len(results)+1 || !alone || s.Stats().Txns != uint64(len(sent)) {
		t.Fatalf("%d Txns carried %d batches of %d (a full-size batch seen: %v); stats %+v", len(sent), batches, len(results)+1, alone, s.Stats())
	}
	got := producerIDs(t, s, partitions...)
	if len(got) != len(want) {
		t.Fatalf("%d ids in etcd, want %d", len(got), len(want))
	}
	for id, pid := range want {
		if got[id] != pid {
			t.Fatalf("%s: producer id %d, want %d", id, got[id], pid)
		}
	}
	noWriterLeft(t)
}

// When etcd cannot be reached, every batch of the Txn fails with the
// client's error (here the commit timeout), naming its partition, not
// ErrNotOwner, and the writer does not wait on.
func TestWriterEtcdUnreachable(t *testing.T) {
	s := unreachableStore(t)
	var results []<-chan error
	for i := range 6 {
		p := int32(1 + i%2)
		ps, err := s.Partition(NewFence(p, Owner{NodeID: 0, Epoch: 1}))
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
		results = append(results, submit(ps, put(int64(i), idsIn(p, 1, "down")...)))
	}
	for i, r := range results {
		err := <-r
		if err == nil || errors.Is(err, ErrNotOwner) || !strings.Contains(err.Error(), fmt.Sprintf("partition %d:", 1+i%2)) {
			t.Fatalf("write %d with etcd unreachable: %v", i, err)
		}
	}
	if st := s.Stats(); st.Txns != 0 || st.Refused != 0 {
		t.Fatalf("stats %+v", st)
	}
	noWriterLeft(t)
}

// TestUnknownOutcomeIsSticky: a write that fails without saying whether
// etcd applied it (here: no etcd answers) tells OnUnknownOutcome once, and
// every later Submit of that store fails at once, unsent, so the caller
// reloads from etcd instead of writing on over a memory that may differ;
// a fenced-out write does not count.
func TestUnknownOutcomeIsSticky(t *testing.T) {
	s := unreachableStore(t)
	ps, err := s.Partition(NewFence(1, Owner{NodeID: 0, Epoch: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	told := make(chan error, 4)
	ps.OnUnknownOutcome(func(err error) { told <- err })
	if err := <-submit(ps, put(1, idsIn(1, 1, "unknown")...)); err == nil || errors.Is(err, ErrNotOwner) {
		t.Fatalf("first write: %v", err)
	}
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("OnUnknownOutcome not called")
	}
	before := s.Stats().Batches
	err = <-submit(ps, put(2, idsIn(1, 1, "unknown")...))
	if err == nil || !strings.Contains(err.Error(), "outcome is unknown") {
		t.Fatalf("later write: %v, want a refusal naming the unknown outcome", err)
	}
	if after := s.Stats().Batches; after != before {
		t.Fatalf("the refused write was queued: batches %d -> %d", before, after)
	}
	select {
	case err := <-told:
		t.Fatalf("OnUnknownOutcome called twice: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	noWriterLeft(t)
}

// unreachableStore is a store over an etcd endpoint nothing listens on,
// whose commits give up after 300 ms.
func unreachableStore(t *testing.T) *Store {
	t.Helper()
	port, err := freeport.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:" + strconv.Itoa(port)}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return NewStore(cli, Options{Layout: newLayout(t), CommitTimeout: 300 * time.Millisecond})
}

// The writer reaches etcd three ways: a dialed client's connection, the
// embedded member's KV server handed in (Options.KV, as `txncoord up`
// does), and the client's own Txn (an in-process client without one).
// Each commits a partition's write, refuses a fenced-out partition's, and
// puts deletes and puts where Load finds them.
func TestWriterKVPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(Layout) (*Store, *clientv3.Client)
	}{
		{"dialed", func(l Layout) (*Store, *clientv3.Client) {
			cli := newClient(t)
			return NewStore(cli, Options{Layout: l}), cli
		}},
		{"in-process KV", func(l Layout) (*Store, *clientv3.Client) {
			cli := v3client.New(etcdMember.Server)
			t.Cleanup(func() { cli.Close() })
			kv := adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(etcdMember.Server))
			return NewStore(cli, Options{Layout: l, KV: kv}), cli
		}},
		{"client Txn", func(l Layout) (*Store, *clientv3.Client) {
			cli := v3client.New(etcdMember.Server)
			t.Cleanup(func() { cli.Close() })
			return NewStore(cli, Options{Layout: l}), cli
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			s, cli := tc.store(l)
			const pKept, pFenced = 21, 22
			stores := partitionStores(t, s, cli, l, pKept, pFenced)
			kept, fenced := stores[0], stores[1]
			keptIDs, fencedID := idsIn(pKept, 2, "paths"), idsIn(pFenced, 1, "paths")[0]
			waitAll(t, []<-chan error{submit(kept, put(1, keptIDs...)), submit(fenced, put(1, fencedID))})

			acquire(t, cli, l, pFenced, 1) // taken over
			gone := put(2, keptIDs[0])
			gone.Deletes = []string{keptIDs[1]}
			if err := <-submit(kept, gone); err != nil {
				t.Fatal(err)
			}
			if err := <-submit(fenced, put(2, fencedID)); !errors.Is(err, ErrNotOwner) {
				t.Fatalf("fenced-out write: %v, want ErrNotOwner", err)
			}
			for p, want := range map[int32]map[string]int64{pKept: {keptIDs[0]: 2}, pFenced: {fencedID: 1}} {
				st, err := s.Load(ctxT(t), p)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				for id, m := range st.Txns {
					got[id] = m.ProducerID
				}
				if !maps.Equal(got, want) {
					t.Fatalf("partition %d holds %v, want %v", p, got, want)
				}
			}
		})
	}
}
