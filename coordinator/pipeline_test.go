package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txnlog"
)

// submitGate is a store with Submit (as BoltStore) whose transaction
// writes wait for release: it shows which writes are queued while an
// earlier one of the same id is not yet durable.
type submitGate struct {
	*txnlog.MemoryStore
	gate   chan struct{}
	queued chan txnlog.Batch
}

func (s *submitGate) Submit(b txnlog.Batch) <-chan error {
	out := make(chan error, 1)
	gate := s.gate // read before the test may replace it
	s.queued <- b
	go func() {
		<-gate
		out <- s.MemoryStore.Apply(context.Background(), b)
	}()
	return out
}

// TestRegistrationsPipelined: while one leader's registration (Ongoing +
// partition 0) is still being written, the transaction's second leader
// registers partition 1. It is decided on the pending state and its write
// is queued at once behind the first (one group commit for both, instead
// of a CONCURRENT_TRANSACTIONS wait and a second fsync), and neither
// answer comes before the writes are durable.
func TestRegistrationsPipelined(t *testing.T) {
	g := &submitGate{MemoryStore: txnlog.NewMemory(), gate: make(chan struct{}), queued: make(chan txnlog.Batch, 16)}
	close(g.gate)
	c, _ := openTest(t, testView("127.0.0.1:1"), g, false)
	pid, epoch := initPID(t, c, "t")
	<-g.queued // InitProducerId's write
	g.gate = make(chan struct{})

	answers := make(chan int16, 2)
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 0) }()
	first := <-g.queued
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 1) }()
	var second txnlog.Batch
	select {
	case second = <-g.queued: // queued before the first is durable
	case <-time.After(10 * time.Second): // a failure bound, not a synchronization
		close(g.gate)
		t.Fatal("the second registration's write was not queued while the first was pending")
	}
	if got := first.Puts[0].Partitions; len(got) != 1 {
		t.Fatalf("first write partitions %v", got)
	}
	if got := second.Puts[0]; got.State != txnlog.Ongoing || len(got.Partitions) != 2 {
		t.Fatalf("second write %+v, want Ongoing with both partitions", got)
	}
	select {
	case code := <-answers:
		t.Fatalf("registration answered (%d) before its write was durable", code)
	default:
	}
	close(g.gate)
	for range 2 {
		if code := <-answers; code != 0 {
			t.Fatalf("registration: %d", code)
		}
	}
	d, ok := c.Describe("t")
	if !ok || d.State != txnlog.Ongoing.String() || len(d.Partitions) != 2 {
		t.Fatalf("describe %+v", d)
	}
}

// manualStore hands every Submit to the test, which answers them in any
// order it likes (a group commit's answers reach their waiters in any
// order).
type manualStore struct {
	*txnlog.MemoryStore
	submits chan manualWrite
}

type manualWrite struct {
	batch  txnlog.Batch
	result chan error
}

func (s *manualStore) Submit(b txnlog.Batch) <-chan error {
	w := manualWrite{batch: b, result: make(chan error, 1)}
	s.submits <- w
	return w.result
}

// commit applies w and answers it.
func (s *manualStore) commit(w manualWrite) {
	w.result <- s.MemoryStore.Apply(context.Background(), w.batch)
}

// TestPipelinedWritesFinishInOrder: a registration, a second leader's
// registration and the EndTxn are queued back to back; their answers
// arrive newest first. The Prepare's markers still go out only once every
// earlier write is accounted for, so their completion is not refused as
// "pending" and the transaction reaches CompleteCommit.
func TestPipelinedWritesFinishInOrder(t *testing.T) {
	s := &manualStore{MemoryStore: txnlog.NewMemory(), submits: make(chan manualWrite, 16)}
	c, fm := openTest(t, testView("127.0.0.1:1"), s, true)
	go func() { // InitProducerId's write
		s.commit(<-s.submits)
	}()
	pid, epoch := initPID(t, c, "t")

	done := make(chan struct{}, 3)
	go func() { addPartitionsV5(c, "t", pid, epoch, "orders", 0); done <- struct{}{} }()
	w1 := <-s.submits
	go func() { addPartitionsV5(c, "t", pid, epoch, "orders", 1); done <- struct{}{} }()
	w2 := <-s.submits
	go func() { endTxn(c, 5, "t", pid, epoch, true); done <- struct{}{} }()
	w3 := <-s.submits
	if w3.batch.Puts[0].State != txnlog.PrepareCommit {
		t.Fatalf("third write %v, want PrepareCommit", w3.batch.Puts[0].State)
	}
	s.commit(w3)
	s.commit(w2)
	if n := len(fm.snapshot()); n != 0 {
		t.Fatalf("%d markers sent before every earlier write finished", n)
	}
	s.commit(w1)
	var complete manualWrite
	select {
	case complete = <-s.submits: // the Complete write, after the markers
	case <-time.After(10 * time.Second): // a failure bound, not a synchronization
		t.Fatalf("no Complete write: the markers' completion was refused (markers sent: %d)", len(fm.snapshot()))
	}
	if complete.batch.Puts[0].State != txnlog.CompleteCommit {
		t.Fatalf("fourth write %v, want CompleteCommit", complete.batch.Puts[0].State)
	}
	s.commit(complete)
	for range 3 {
		<-done
	}
	waitState(t, c, "t", txnlog.CompleteCommit)
}

// TestSpeculatedAnswerFailsWithTheWriteItRestsOn: a registration of a
// partition already in the pending state writes nothing itself; it rests
// on the write in flight (decision.after). When that write fails, the
// answer must fail too, not claim a registration that is not on disk.
func TestSpeculatedAnswerFailsWithTheWriteItRestsOn(t *testing.T) {
	s := &manualStore{MemoryStore: txnlog.NewMemory(), submits: make(chan manualWrite, 16)}
	c, _ := openTest(t, testView("127.0.0.1:1"), s, false)
	go func() { s.commit(<-s.submits) }() // InitProducerId's write
	pid, epoch := initPID(t, c, "t")

	answers := make(chan int16, 2)
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 0) }()
	w := <-s.submits
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 0) }()
	select {
	case extra := <-s.submits:
		t.Fatalf("the repeated registration wrote %+v; it should rest on the pending write", extra.batch)
	case <-time.After(200 * time.Millisecond): // decided by now; nothing else to write
	}
	w.result <- errors.New("disk on fire")
	for range 2 {
		if code := <-answers; code == 0 {
			t.Fatal("a registration was answered 0 although the write it rests on failed")
		}
	}
}

// failedStore is a MemoryStore that says it has stopped (fail-stop), as a
// BoltStore whose process log failed does.
type failedStore struct {
	*txnlog.MemoryStore
	failed atomic.Bool
}

func (s *failedStore) Err() error {
	if s.failed.Load() {
		return errors.New("log failed")
	}
	return nil
}

// TestStoppedStoreAnswersStorageErrorNotConcurrent: once the store has
// stopped, a request that would wait for the id's markers to complete
// (CONCURRENT_TRANSACTIONS, which kgo retries forever) gets
// KAFKA_STORAGE_ERROR instead: nothing it waits for can be written until
// a restart.
func TestStoppedStoreAnswersStorageErrorNotConcurrent(t *testing.T) {
	s := &failedStore{MemoryStore: txnlog.NewMemory()}
	c, fm := openTest(t, testView("127.0.0.1:1"), s, false)
	pid, epoch := initPID(t, c, "t")
	if code := addPartitionsV5(c, "t", pid, epoch, "orders", 0); code != 0 {
		t.Fatal(code)
	}
	if r := endTxn(c, 5, "t", pid, epoch, true); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	waitFor(t, "markers", func() bool { return len(fm.snapshot()) == 1 }) // never completed: PrepareCommit
	s.failed.Store(true)
	start := time.Now()
	id := "t"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
	if code := call(c, 22, req).(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("InitProducerId during PrepareCommit with the store stopped: %d, want %d", code, kerr.KafkaStorageError.Code)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("answered after %v, want at once", took)
	}
}
