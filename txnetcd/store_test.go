package txnetcd

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// idsIn returns n transactional ids of partition p (of 50).
func idsIn(p int32, n int, tag string) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("%s-%d", tag, i); PartitionFor(id, DefaultPartitions) == p {
			ids = append(ids, id)
		}
	}
	return ids
}

// everyState is one record per txncore state, under TV 0 and TV 2, plus a
// TV2 record with a Completing transaction and one at epoch exhaustion.
func everyState(ids []string) []txnlog.TxnMetadata {
	states := []txncore.State{txncore.Empty, txncore.Ongoing, txncore.PrepareCommit, txncore.PrepareAbort,
		txncore.CompleteCommit, txncore.CompleteAbort, txncore.Dead, txncore.PrepareEpochFence}
	var out []txnlog.TxnMetadata
	i := 0
	for _, tv := range []int16{0, 2} {
		for _, st := range states {
			m := txnlog.TxnMetadata{TransactionalID: ids[i], ProducerID: int64(1000 + i), PrevProducerID: -1, NextProducerID: -1,
				ProducerEpoch: int16(i), LastProducerEpoch: int16(i - 1), TimeoutMs: 60000, State: st,
				StartTimestamp: 1700000000000 + int64(i), LastUpdateTimestamp: 1700000000500 + int64(i), ClientTransactionVersion: tv}
			if st != txncore.Empty && st != txncore.Dead {
				m.Partitions = []txncore.TopicPartition{{Topic: "orders", Partition: int32(i)}, {Topic: "__consumer_offsets", Partition: 49}}
			}
			out = append(out, m)
			i++
		}
	}
	completing := txnlog.TxnMetadata{TransactionalID: ids[i], ProducerID: 77, PrevProducerID: -1, NextProducerID: -1,
		ProducerEpoch: 9, LastProducerEpoch: 8, TimeoutMs: 1000, State: txncore.Ongoing, ClientTransactionVersion: 2,
		Partitions: []txncore.TopicPartition{{Topic: "a", Partition: 0}},
		Completing: &txnlog.Completion{Commit: true, ProducerID: 77, ProducerEpoch: 9, TransactionVersion: 2,
			Partitions: []txncore.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 3}}}}
	exhausted := txnlog.TxnMetadata{TransactionalID: ids[i+1], ProducerID: 5000, PrevProducerID: 4999, NextProducerID: 5001,
		ProducerEpoch: 32767, LastProducerEpoch: 32766, TimeoutMs: 1000, State: txncore.PrepareCommit, ClientTransactionVersion: 2,
		Partitions: []txncore.TopicPartition{{Topic: "a", Partition: 1}}}
	return append(out, completing, exhausted)
}

func TestLoadApplyRoundTripEveryState(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 7
	fence := acquire(t, cli, l, p, 0)
	ids := idsIn(p, 20, "rt")
	recs := everyState(ids)

	// The same batches applied to txnlog's in-memory store must leave the
	// same transactions: the coordinator sees one state whichever store
	// holds it.
	mem := txnlog.NewMemory()
	apply := func(b txnlog.Batch) {
		t.Helper()
		if err := s.Apply(ctxT(t), fence, b); err != nil {
			t.Fatal(err)
		}
		if err := txnlog.Apply(ctxT(t), mem, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(txnlog.Batch{Puts: recs[:9]})
	apply(txnlog.Batch{Puts: recs[9:]})
	// A transition: the first id moves on, another id is deleted, both in
	// one Txn.
	moved := recs[0].Clone()
	moved.State, moved.ProducerEpoch = txncore.Ongoing, moved.ProducerEpoch+1
	moved.Partitions = []txncore.TopicPartition{{Topic: "x", Partition: 2}}
	apply(txnlog.Batch{Puts: []txnlog.TxnMetadata{moved}, Deletes: []string{recs[3].TransactionalID}})

	got, err := s.Load(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mem.Load()
	if !reflect.DeepEqual(got.Txns, want.Txns) {
		t.Fatalf("etcd state differs from the in-memory store's:\n got %+v\nwant %+v", got.Txns, want.Txns)
	}
	if len(got.Txns) != len(recs)-1 {
		t.Fatalf("%d transactions loaded, want %d", len(got.Txns), len(recs)-1)
	}
	if g := got.Txns[recs[8].TransactionalID].ClientTransactionVersion; g != 2 {
		t.Fatalf("TV of a TV2 record loaded as %d", g)
	}
	if got.Epoch != 1 || got.OwnerValue != fence.OwnerValue {
		t.Fatalf("epoch %d owner %q, want 1 and %q", got.Epoch, got.OwnerValue, fence.OwnerValue)
	}
	// Another partition holds nothing of this one.
	other, err := s.Load(ctxT(t), p+1)
	if err != nil || len(other.Txns) != 0 || other.Epoch != 0 || other.OwnerValue != "" {
		t.Fatalf("partition %d: %+v, %v", p+1, other, err)
	}
}

func TestLoadPagesAtOneRevision(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 3
	fence := acquire(t, cli, l, p, 0)
	defer func(n int64) { loadPageSize = n }(loadPageSize)
	loadPageSize = 4
	var puts []txnlog.TxnMetadata
	for _, id := range idsIn(p, 23, "page") {
		puts = append(puts, txnlog.TxnMetadata{TransactionalID: id, ProducerID: 1, NextProducerID: -1, LastProducerEpoch: -1})
	}
	if err := s.Apply(ctxT(t), fence, txnlog.Batch{Puts: puts}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Txns) != len(puts) {
		t.Fatalf("loaded %d of %d over pages of %d", len(got.Txns), len(puts), loadPageSize)
	}
}

// A takeover rewrites the owner key (and bumps the epoch): the former
// owner's fenced writes then change nothing and fail with ErrNotOwner.
func TestStaleFenceChangesNothing(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 11
	old := acquire(t, cli, l, p, 0)
	ids := idsIn(p, 3, "fence")
	kept := txnlog.TxnMetadata{TransactionalID: ids[0], ProducerID: 1, NextProducerID: -1, LastProducerEpoch: -1, State: txncore.Ongoing,
		Partitions: []txncore.TopicPartition{{Topic: "t", Partition: 0}}}
	if err := s.Apply(ctxT(t), old, txnlog.Batch{Puts: []txnlog.TxnMetadata{kept}}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Load(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}

	takeover := acquire(t, cli, l, p, 1)
	if o, _ := takeover.Owner(); o.Epoch != 2 {
		t.Fatalf("takeover epoch %d, want 2", o.Epoch)
	}
	zombie := kept.Clone()
	zombie.State = txncore.PrepareCommit
	fresh := txnlog.TxnMetadata{TransactionalID: ids[1], ProducerID: 2, NextProducerID: -1, LastProducerEpoch: -1}
	for _, b := range []txnlog.Batch{
		{Puts: []txnlog.TxnMetadata{zombie}},
		{Puts: []txnlog.TxnMetadata{fresh}},
		{Deletes: []string{kept.TransactionalID}},
		{Puts: []txnlog.TxnMetadata{fresh}, Deletes: []string{kept.TransactionalID}},
	} {
		if err := s.Apply(ctxT(t), old, b); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("stale fence wrote %+v: err %v, want ErrNotOwner", b, err)
		}
	}
	after, err := s.Load(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Txns, before.Txns) {
		t.Fatalf("a stale fence changed the partition:\n got %+v\nwant %+v", after.Txns, before.Txns)
	}

	// The same node taking the partition back has a new epoch: its old
	// fence stays stale.
	back := acquire(t, cli, l, p, 0)
	if err := s.Apply(ctxT(t), old, txnlog.Batch{Puts: []txnlog.TxnMetadata{fresh}}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("node 0's epoch-1 fence after it re-took the partition at epoch 3: %v", err)
	}
	if err := s.Apply(ctxT(t), back, txnlog.Batch{Puts: []txnlog.TxnMetadata{zombie, fresh}}); err != nil {
		t.Fatalf("the current owner's write: %v", err)
	}
	got, _ := s.Load(ctxT(t), p)
	if got.Epoch != 3 || len(got.Txns) != 2 || got.Txns[kept.TransactionalID].State != txncore.PrepareCommit {
		t.Fatalf("after the owner's write: epoch %d, %+v", got.Epoch, got.Txns)
	}
}

// When the owner's lease ends (a paused process), its owner key goes and
// so does its right to write.
func TestExpiredLeaseFencesTheOwner(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 20
	lease, err := cli.Grant(ctxT(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	fence := acquire(t, cli, l, p, 2, clientv3.WithLease(lease.ID))
	id := idsIn(p, 1, "lease")[0]
	put := txnlog.Batch{Puts: []txnlog.TxnMetadata{{TransactionalID: id, ProducerID: 3, NextProducerID: -1, LastProducerEpoch: -1}}}
	if err := s.Apply(ctxT(t), fence, put); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctxT(t), lease.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctxT(t), fence, txnlog.Batch{Deletes: []string{id}}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("write after the lease ended: %v, want ErrNotOwner", err)
	}
	got, _ := s.Load(ctxT(t), p)
	if len(got.Txns) != 1 || got.OwnerValue != "" {
		t.Fatalf("after the lease ended: %+v", got)
	}
}

// A batch is written whole or not at all: one id of another partition, or
// more keys than one etcd Txn holds, refuses all of it.
func TestBatchRefusedWhole(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l, MaxTxnOps: 4})
	const p = 30
	fence := acquire(t, cli, l, p, 0)
	mine := idsIn(p, 5, "whole")
	rec := func(id string) txnlog.TxnMetadata {
		return txnlog.TxnMetadata{TransactionalID: id, ProducerID: 1, NextProducerID: -1, LastProducerEpoch: -1}
	}
	foreign := idsIn(p+1, 1, "whole")[0]
	if err := s.Apply(ctxT(t), fence, txnlog.Batch{Puts: []txnlog.TxnMetadata{rec(mine[0]), rec(foreign)}}); !errors.Is(err, ErrWrongPartition) {
		t.Fatalf("batch with an id of partition %d: %v", p+1, err)
	}
	if err := s.Apply(ctxT(t), fence, txnlog.Batch{Deletes: []string{foreign}}); !errors.Is(err, ErrWrongPartition) {
		t.Fatalf("delete of an id of partition %d: %v", p+1, err)
	}
	var five []txnlog.TxnMetadata
	for _, id := range mine {
		five = append(five, rec(id))
	}
	if err := s.Apply(ctxT(t), fence, txnlog.Batch{Puts: five}); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("5 keys with MaxTxnOps 4: %v", err)
	}
	if got, _ := s.Load(ctxT(t), p); len(got.Txns) != 0 {
		t.Fatalf("a refused batch wrote %d records", len(got.Txns))
	}
	// One id named twice counts once, and the delete wins, as in txnlog
	// (puts, then deletes).
	if err := s.Apply(ctxT(t), fence, txnlog.Batch{Puts: append(five[:4:4], five[0]), Deletes: []string{mine[1]}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Load(ctxT(t), p)
	if _, ok := got.Txns[mine[1]]; ok || len(got.Txns) != 3 {
		t.Fatalf("put then delete of one id: %v", got.Txns)
	}
}

func TestLoadRefusesForeignRecords(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 4
	id := idsIn(p, 1, "corrupt")[0]
	other := idsIn(p, 2, "corrupt")[1]
	// A record under the key of another id.
	rec := txnlog.EncodeTxn(txnlog.TxnMetadata{TransactionalID: other, NextProducerID: -1})
	if _, err := cli.Put(ctxT(t), l.IDKey(p, id), string(rec)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctxT(t), p); !errors.Is(err, txnlog.ErrCorrupt) {
		t.Fatalf("record of %q under %q: %v", other, id, err)
	}
	if _, err := cli.Put(ctxT(t), l.IDKey(p, id), "\x09garbage"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctxT(t), p); !errors.Is(err, txnlog.ErrUnknownVersion) {
		t.Fatalf("record of version 9: %v", err)
	}
}

// PartitionStore is what a coordinator opens: Load hands it the owner's
// epoch minus one (it bumps what it loads), the epoch write it then makes
// is a fence check, and producer-id high-water marks are refused.
func TestPartitionStoreAsTxnlogStore(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 42
	acquire(t, cli, l, p, 0)
	fence := acquire(t, cli, l, p, 1) // epoch 2
	ps, err := s.Partition(fence)
	if err != nil {
		t.Fatal(err)
	}
	var store txnlog.Store = ps
	loaded, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if loaded.CoordinatorEpoch+1 != 2 || len(loaded.Txns) != 0 || loaded.ProducerIDHighWater != 0 {
		t.Fatalf("loaded %+v", loaded)
	}
	if err := txnlog.Apply(ctxT(t), store, txnlog.Batch{CoordinatorEpoch: loaded.CoordinatorEpoch + 1}); err != nil {
		t.Fatalf("writing the owner's epoch: %v", err)
	}
	if err := txnlog.Apply(ctxT(t), store, txnlog.Batch{CoordinatorEpoch: 5}); err == nil {
		t.Fatal("an epoch other than the owner's was accepted")
	}
	if err := txnlog.Apply(ctxT(t), store, txnlog.Batch{ProducerIDHighWater: 1000}); !errors.Is(err, ErrProducerIDs) {
		t.Fatalf("producer-id high water: %v", err)
	}
	id := idsIn(p, 1, "ps")[0]
	m := txnlog.TxnMetadata{TransactionalID: id, ProducerID: 9, NextProducerID: -1, LastProducerEpoch: -1, State: txncore.Empty, ClientTransactionVersion: 2}
	if err := txnlog.Apply(ctxT(t), store, txnlog.Batch{Puts: []txnlog.TxnMetadata{m}}); err != nil {
		t.Fatal(err)
	}
	if loaded, err = store.Load(); err != nil || !reflect.DeepEqual(loaded.Txns[id], m) {
		t.Fatalf("reloaded %+v, %v", loaded.Txns, err)
	}

	acquire(t, cli, l, p, 2) // taken over
	if err := txnlog.Apply(ctxT(t), store, txnlog.Batch{CoordinatorEpoch: 2}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("fence check after a takeover: %v", err)
	}
	if _, err := store.Load(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("load after a takeover: %v", err)
	}
	store.Close()
	if err := txnlog.Apply(ctxT(t), store, txnlog.Batch{}); !errors.Is(err, txnlog.ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
}

// Writes queued while a Txn is in flight are committed together in the
// next one, in submission order (the last write of an id wins); a batch
// that cannot be written fails alone; after a takeover a whole group fails
// with ErrNotOwner and writes nothing.
func TestPartitionStoreGroupCommit(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	const p = 9
	fence := acquire(t, cli, l, p, 0)
	ps, err := s.Partition(fence)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	ps.beforeCommit = func() { // the writer holds each group until released
		entered <- struct{}{}
		<-release
	}
	ids := idsIn(p, 10, "group")
	rec := func(i int) txnlog.TxnMetadata {
		return txnlog.TxnMetadata{TransactionalID: ids[i%len(ids)], ProducerID: int64(i), NextProducerID: -1, LastProducerEpoch: -1, State: txncore.Ongoing}
	}
	var results []<-chan error
	results = append(results, submit(ps, txnlog.Batch{Puts: []txnlog.TxnMetadata{rec(0)}}))
	<-entered // the first group, that write alone, is in flight
	for i := 1; i <= 40; i++ {
		b := txnlog.Batch{Puts: []txnlog.TxnMetadata{rec(i)}}
		if i%10 == 3 {
			b = txnlog.Batch{Deletes: []string{ids[3]}}
		}
		results = append(results, submit(ps, b))
	}
	results = append(results, submit(ps, txnlog.Batch{CoordinatorEpoch: ps.Epoch()}))
	foreign := submit(ps, txnlog.Batch{Deletes: idsIn(p+1, 1, "group")})
	if err := <-foreign; !errors.Is(err, ErrWrongPartition) {
		t.Fatalf("batch of another partition: %v", err)
	}
	release <- struct{}{}
	<-entered
	release <- struct{}{}
	for i, r := range results {
		if err := <-r; err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if st := ps.Stats(); st.Commits != 2 || st.Batches != 42 {
		t.Fatalf("stats %+v, want 2 commits of 42 batches", st)
	}
	got, err := s.Load(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		m, ok := got.Txns[id]
		last := 30 + i // write i goes to ids[i%10]: 31..39, and 40 to ids[0]
		if i == 0 {
			last = 40
		}
		switch {
		case i == 3 && ok:
			t.Fatalf("%s: deleted last, still there", id)
		case i != 3 && (!ok || m.ProducerID != int64(last)):
			t.Fatalf("%s: %+v (present %v), want the last write, producer id %d", id, m, ok, last)
		}
	}

	acquire(t, cli, l, p, 1) // taken over
	// The writer is idle (every result above was received), so the hook
	// can change: it holds only the next group, whatever the writer took
	// into it (under load it may take the first stale write alone, and
	// then the other two as a second group, which must not wait).
	var hold sync.Once
	ps.beforeCommit = func() {
		hold.Do(func() {
			entered <- struct{}{}
			<-release
		})
	}
	var stale []<-chan error
	for i := range 3 {
		stale = append(stale, submit(ps, txnlog.Batch{Puts: []txnlog.TxnMetadata{rec(100 + i)}}))
	}
	<-entered
	release <- struct{}{}
	for _, r := range stale {
		if err := <-r; !errors.Is(err, ErrNotOwner) {
			t.Fatalf("group after a takeover: %v", err)
		}
	}
	after, _ := s.Load(ctxT(t), p)
	if !reflect.DeepEqual(after.Txns, got.Txns) {
		t.Fatal("a fenced-out group changed the partition")
	}
	ps.beforeCommit = nil
}

// submit is PartitionStore.Submit with its outcome as a channel: the
// error of the refusal, or of the batch's position once the log knows it.
func submit(ps *PartitionStore, b txnlog.Batch) <-chan error {
	ch := make(chan error, 1)
	pos, err := ps.Submit(b)
	if err != nil {
		ch <- err
		return ch
	}
	ps.Log().OnDurable(pos, func(err error) { ch <- err })
	return ch
}
