package txnlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/txncore"
)

func sampleTxn(id string) TxnMetadata {
	return TxnMetadata{
		TransactionalID: id, ProducerID: 1001, PrevProducerID: 1000, NextProducerID: -1,
		ProducerEpoch: 32767, LastProducerEpoch: 32766, TimeoutMs: 60000, State: PrepareCommit,
		Partitions:     []txncore.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 5}, {Topic: "__consumer_offsets", Partition: 49}},
		StartTimestamp: 1700000000000, LastUpdateTimestamp: 1700000000123, ClientTransactionVersion: 2,
	}
}

// completingTxn is a TV2 id whose next transaction is Ongoing while the
// previous one's markers are still being written.
func completingTxn(id string) TxnMetadata {
	m := sampleTxn(id)
	m.State, m.ProducerEpoch, m.LastProducerEpoch, m.NextProducerID = Ongoing, 8, 7, -1
	m.Partitions = []txncore.TopicPartition{{Topic: "orders", Partition: 0}}
	m.Completing = &Completion{Commit: true, ProducerID: 1001, ProducerEpoch: 8, TransactionVersion: 2,
		Partitions: []txncore.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 5}}}
	return m
}

func TestCodecRoundTrip(t *testing.T) {
	for _, m := range []TxnMetadata{sampleTxn("t1"), {TransactionalID: "empty", ProducerID: 7, NextProducerID: -1, LastProducerEpoch: -1}, completingTxn("c")} {
		got, err := DecodeTxn(EncodeTxn(m))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
	// A record without a completing transaction stays at version 1, so
	// a binary that reads only version 1 reads it.
	if v := EncodeTxn(sampleTxn("t1"))[0]; v != 1 {
		t.Fatalf("record without Completing at version %d, want 1", v)
	}
	if v := EncodeTxn(completingTxn("c"))[0]; v != 2 {
		t.Fatalf("record with Completing at version %d, want 2", v)
	}
}

func TestCodecRejectsUnknownVersion(t *testing.T) {
	raw := EncodeTxn(sampleTxn("t1"))
	raw[0] = 3
	_, err := DecodeTxn(raw)
	if !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("version 3: got %v, want ErrUnknownVersion", err)
	}
	raw[0] = 2 // a version 2 record must carry the completing transaction
	if _, err := DecodeTxn(raw); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2 without its section: got %v, want ErrCorrupt", err)
	}
	raw = EncodeTxn(sampleTxn("t1"))
	if _, err := DecodeTxn(raw[:len(raw)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: got %v, want ErrCorrupt", err)
	}
	if _, err := decodeMeta([]byte{9, 0, 0, 0, 0, 0, 0, 0, 1}); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("meta version 9: got %v", err)
	}
}

func FuzzDecodeTxn(f *testing.F) {
	f.Add(EncodeTxn(sampleTxn("t1")))
	f.Add(EncodeTxn(completingTxn("c")))
	f.Add([]byte{1})
	f.Add([]byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := DecodeTxn(raw)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		if again := EncodeTxn(m); string(again) != string(raw) {
			t.Fatalf("decode/encode changed the record:\n in %x\nout %x", raw, again)
		}
	})
}

// storeContract runs the behaviour both stores share.
func storeContract(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := sampleTxn("a"), sampleTxn("b")
	if err := Apply(ctx, s, Batch{Puts: []TxnMetadata{a, b}, CoordinatorEpoch: 3, ProducerIDHighWater: 2000}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, s, Batch{Deletes: []string{"a"}, ProducerIDHighWater: 1000}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Txns["a"]; ok || !reflect.DeepEqual(st.Txns["b"], b) {
		t.Fatalf("txns after put+delete: %+v", st.Txns)
	}
	if st.CoordinatorEpoch != 3 || st.ProducerIDHighWater != 2000 {
		t.Fatalf("meta: epoch %d hw %d, want 3 2000 (the high-water mark never goes down)", st.CoordinatorEpoch, st.ProducerIDHighWater)
	}
}

func TestMemoryStore(t *testing.T) { storeContract(t, NewMemory()) }

func TestBoltStoreDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "txn.db")
	s, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	storeContract(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Apply(context.Background(), s, Batch{CoordinatorEpoch: 9}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close: %v", err)
	}
	s2, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	st, err := s2.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Txns) != 1 || !reflect.DeepEqual(st.Txns["b"], sampleTxn("b")) || st.CoordinatorEpoch != 3 || st.ProducerIDHighWater != 2000 {
		t.Fatalf("after reopen: %+v", st)
	}
}

// N concurrent Applies must share Updates: fewer commits than batches.
func TestBoltGroupCommitBatches(t *testing.T) {
	s, err := OpenBolt(filepath.Join(t.TempDir(), "txn.db"), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const writers, perWriter = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				m := sampleTxn(fmt.Sprintf("w%d", w))
				m.ProducerEpoch = int16(i)
				if err := Apply(context.Background(), s, Batch{Puts: []TxnMetadata{m}}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("batches=%d commits=%d transitions/commit=%.1f", st.Batches, st.Commits, float64(st.Transitions)/float64(st.Commits))
	if st.Batches != writers*perWriter || st.Transitions != writers*perWriter {
		t.Fatalf("stats %+v", st)
	}
	if st.Commits >= st.Batches {
		t.Fatalf("no group commit: %d commits for %d batches", st.Commits, st.Batches)
	}
	loaded, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	for w := 0; w < writers; w++ {
		if got := loaded.Txns[fmt.Sprintf("w%d", w)].ProducerEpoch; got != perWriter-1 {
			t.Fatalf("writer %d: last epoch %d, want %d", w, got, perWriter-1)
		}
	}
}

// A failing batch must not fail the batches that shared its Update.
func TestBoltBadBatchIsolated(t *testing.T) {
	s, err := OpenBolt(filepath.Join(t.TempDir(), "txn.db"), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	results := make([]error, 40)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("ok%d", i)
			if i%10 == 0 {
				id = "" // rejected by writeBatch
			}
			results[i] = Apply(context.Background(), s, Batch{Puts: []TxnMetadata{sampleTxn(id)}})
		}(i)
	}
	wg.Wait()
	for i, err := range results {
		if (i%10 == 0) != (err != nil) {
			t.Fatalf("batch %d: err %v", i, err)
		}
	}
	st, _ := s.Load()
	if len(st.Txns) != 36 {
		t.Fatalf("%d txns stored, want 36", len(st.Txns))
	}
}

// TestBoltSubmitInOrder: writes of one id submitted without waiting are
// committed in submission order (the last one wins after a reopen), at
// rising positions of the process log; after Close, Submit answers
// ErrClosed.
func TestBoltSubmitInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "txnlog.db")
	s, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last durable.Pos
	for epoch := int16(0); epoch < 50; epoch++ {
		pos, err := s.Submit(Batch{Puts: []TxnMetadata{{TransactionalID: "t", ProducerID: 1, ProducerEpoch: epoch, State: Ongoing}}})
		if err != nil || pos <= last {
			t.Fatalf("submit %d: position %d after %d, %v", epoch, pos, last, err)
		}
		last = pos
	}
	if err := s.Log().WaitDurable(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(Batch{Puts: []TxnMetadata{{TransactionalID: "u"}}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
	s, err = OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Txns["t"].ProducerEpoch; got != 49 {
		t.Fatalf("epoch after reopen %d, want 49 (the last submitted)", got)
	}
}

// TestMemoryStoreLog: the in-memory twin has the process log's shape:
// rising positions, durable in order (at once, or held until Release),
// and a failure that fails every batch not durable yet and later Submits.
func TestMemoryStoreLog(t *testing.T) {
	ctx := context.Background()
	s := NewMemory()
	p1, err := s.Submit(Batch{Puts: []TxnMetadata{sampleTxn("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Log().WaitDurable(ctx, p1); err != nil {
		t.Fatal(err)
	}
	s.Hold()
	p2, _ := s.Submit(Batch{Puts: []TxnMetadata{sampleTxn("b")}})
	p3, _ := s.Submit(Batch{Deletes: []string{"a"}})
	if p2 != p1+1 || p3 != p2+1 || s.Log().Durable() != p1 {
		t.Fatalf("positions %d %d %d, durable %d: want rising by one, held at %d", p1, p2, p3, s.Log().Durable(), p1)
	}
	if got := s.Release(1); got != p2 {
		t.Fatalf("Release(1): durable %d, want %d", got, p2)
	}
	boom := errors.New("disk gone")
	s.Fail(boom)
	if err := s.Log().WaitDurable(ctx, p3); !errors.Is(err, boom) {
		t.Fatalf("the held batch after Fail: %v, want the failure", err)
	}
	if _, err := s.Submit(Batch{CoordinatorEpoch: 3}); !errors.Is(err, boom) || !errors.Is(s.Err(), boom) {
		t.Fatalf("Submit after Fail: %v (Err %v), want the failure", err, s.Err())
	}
}
