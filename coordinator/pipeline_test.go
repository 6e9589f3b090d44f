package coordinator

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txnlog"
)

// TestRegistrationsPipelined: while one leader's registration (Ongoing +
// partition 0) is still being written, the transaction's second leader
// registers partition 1. It is decided on the pending state and its write
// is submitted at once behind the first (one group commit for both,
// instead of a CONCURRENT_TRANSACTIONS wait and a second fsync), and
// neither answer comes before the writes are durable.
func TestRegistrationsPipelined(t *testing.T) {
	s := newObservedStore()
	c, _ := openTest(t, testView("127.0.0.1:1"), s, false)
	pid, epoch := initPID(t, c, "t")
	<-s.submitted // Open's
	<-s.submitted // InitProducerId's
	s.Hold()

	answers := make(chan int16, 2)
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 0) }()
	first := <-s.submitted
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 1) }()
	var second txnlog.Batch
	select {
	case second = <-s.submitted: // submitted before the first is durable
	case <-time.After(10 * time.Second): // a failure bound, not a synchronization
		s.Release(10)
		t.Fatal("the second registration's write was not submitted while the first was pending")
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
	case <-time.After(50 * time.Millisecond):
	}
	s.Release(2)
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

// TestPipelinedWritesThenMarkers: a registration, a second leader's
// registration and the EndTxn are submitted back to back, and made
// durable together (one group commit). The Prepare's markers reach a
// leader elsewhere only then; their completion is decided on the durable
// Prepare and the transaction reaches CompleteCommit.
func TestPipelinedWritesThenMarkers(t *testing.T) {
	s := newObservedStore()
	c, fm := openTest(t, testView("127.0.0.1:1"), s, true)
	pid, epoch := initPID(t, c, "t")
	<-s.submitted // Open's
	<-s.submitted // InitProducerId's
	s.Hold()

	done := make(chan struct{}, 3)
	go func() { addPartitionsV5(c, "t", pid, epoch, "orders", 0); done <- struct{}{} }()
	<-s.submitted
	go func() { addPartitionsV5(c, "t", pid, epoch, "orders", 1); done <- struct{}{} }()
	<-s.submitted
	go func() { endTxn(c, 5, "t", pid, epoch, true); done <- struct{}{} }()
	if w3 := <-s.submitted; w3.Puts[0].State != txnlog.PrepareCommit {
		t.Fatalf("third write %v, want PrepareCommit", w3.Puts[0].State)
	}
	if n := len(fm.snapshot()); n != 0 {
		t.Fatalf("%d markers delivered before the Prepare was durable", n)
	}
	s.Release(3)
	var complete txnlog.Batch
	select {
	case complete = <-s.submitted: // the Complete write, after the markers
	case <-time.After(10 * time.Second): // a failure bound, not a synchronization
		t.Fatalf("no Complete write: the markers' completion was refused (markers delivered: %d)", len(fm.snapshot()))
	}
	if complete.Puts[0].State != txnlog.CompleteCommit {
		t.Fatalf("fourth write %v, want CompleteCommit", complete.Puts[0].State)
	}
	s.Release(1)
	for range 3 {
		<-done
	}
	waitState(t, c, "t", txnlog.CompleteCommit)
}

// TestSpeculatedAnswerFailsWithTheWriteItRestsOn: a registration of a
// partition already in the pending state writes nothing itself; it rests
// on the write in flight (its position). When that write fails, the answer
// must fail too, not claim a registration that is not on disk.
func TestSpeculatedAnswerFailsWithTheWriteItRestsOn(t *testing.T) {
	s := newObservedStore()
	c, _ := openTest(t, testView("127.0.0.1:1"), s, false)
	pid, epoch := initPID(t, c, "t")
	<-s.submitted // Open's
	<-s.submitted // InitProducerId's
	s.Hold()

	answers := make(chan int16, 2)
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 0) }()
	<-s.submitted
	go func() { answers <- addPartitionsV5(c, "t", pid, epoch, "orders", 0) }()
	select {
	case extra := <-s.submitted:
		t.Fatalf("the repeated registration wrote %+v; it should rest on the pending write", extra)
	case <-time.After(200 * time.Millisecond): // decided by now; nothing else to write
	}
	s.Fail(errors.New("disk on fire"))
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
