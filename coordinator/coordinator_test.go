package coordinator

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// Invariant 1: EndTxn is answered only after Prepare is durable, and the
// markers reach a leader elsewhere only after that too.
func TestEndTxnAnsweredAfterPrepareDurable(t *testing.T) {
	s := newObservedStore()
	c, fm := openTest(t, testView("127.0.0.1:1"), s, false)
	pid, epoch := initPID(t, c, "t")
	if code := addPartitionsV3(c, "t", pid, epoch, "orders", 0); code != 0 {
		t.Fatal(code)
	}
	waitFor(t, "the registration durable", func() bool { d, _ := c.Describe("t"); return !d.Pending })
	for len(s.submitted) > 0 {
		<-s.submitted
	}
	s.Hold() // from now on, writes are durable only when released
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(5)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "t", pid, epoch, true
	reply := c.handleEndTxn(context.Background(), &wire.Request{Body: req, Key: 26, Version: 5, Log: zerolog.Nop()})
	answered := make(chan *kmsg.EndTxnResponse, 1)
	go func() {
		resp, _ := reply()
		answered <- resp.(*kmsg.EndTxnResponse)
	}()
	if b := <-s.submitted; len(b.Puts) != 1 || b.Puts[0].State != txnlog.PrepareCommit {
		t.Fatalf("submitted %+v, want the PrepareCommit", b)
	}
	select {
	case <-answered:
		t.Fatal("EndTxn answered before its Prepare was durable")
	case <-time.After(50 * time.Millisecond):
	}
	if len(fm.snapshot()) != 0 {
		t.Fatal("markers delivered before Prepare was durable")
	}
	// Meanwhile the id is pending: a concurrent EndTxn retry gets 51.
	if r := endTxn(c, 5, "t", pid, epoch, true); r.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("EndTxn during the write: %d, want 51", r.ErrorCode)
	}
	s.Release(1)
	resp := <-answered
	if resp.ErrorCode != 0 || resp.ProducerEpoch != epoch+1 || resp.ProducerID != pid {
		t.Fatalf("EndTxn v5: %+v, want (pid %d, epoch %d)", resp, pid, epoch+1)
	}
	waitFor(t, "markers", func() bool { return len(fm.snapshot()) == 1 })
	m := fm.snapshot()[0]
	if m.ProducerEpoch != epoch+1 || m.TransactionVersion != 2 || !m.Commit || m.CoordinatorEpoch != c.Epoch() {
		t.Fatalf("markers %+v", m)
	}
	waitState(t, c, "t", txnlog.PrepareCommit)
	s.Resume()
	c.MarkersWritten(m)
	waitState(t, c, "t", txnlog.CompleteCommit)
}

// A write that fails leaves the transaction as it was durably, sends no
// marker, and is answered KAFKA_STORAGE_ERROR when the store stopped for
// good (the process log after a failed fsync: nothing is written until a
// restart), COORDINATOR_NOT_AVAILABLE when only its log failed (an etcd
// partition store being replaced: the client retries and finds the
// coordinator again).
func TestStoreFailureAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stopped bool
		want    int16
	}{
		{"store stopped", true, kerr.KafkaStorageError.Code},
		{"log failed", false, kerr.CoordinatorNotAvailable.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := txnlog.NewMemory()
			var store txnlog.Store = mem
			if !tc.stopped {
				store = replacedStore{mem}
			}
			c, fm := openTest(t, testView("127.0.0.1:1"), store, false)
			pid, epoch := initPID(t, c, "t")
			if code := addPartitionsV3(c, "t", pid, epoch, "orders", 1); code != 0 {
				t.Fatal(code)
			}
			waitFor(t, "the registration durable", func() bool { d, _ := c.Describe("t"); return !d.Pending })
			mem.Fail(errors.New("disk on fire"))
			if r := endTxn(c, 4, "t", pid, epoch, true); r.ErrorCode != tc.want {
				t.Fatalf("EndTxn with a failed store: %d, want %d", r.ErrorCode, tc.want)
			}
			if d, _ := c.Describe("t"); d.State != "Ongoing" || d.Pending {
				t.Fatalf("state after a failed write: %+v", d)
			}
			if len(fm.snapshot()) != 0 {
				t.Fatal("markers sent for a Prepare that was never durable")
			}
		})
	}
}

// replacedStore is a store whose log fails without the store stopping for
// good, as an etcd partition store's does when it is fenced out.
type replacedStore struct{ *txnlog.MemoryStore }

func (replacedStore) Err() error { return nil }

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func TestTimeoutScanAbortsAndExpires(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_000_000)}
	fm := &fakeMarkers{complete: true}
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: txnlog.NewMemory(), Markers: fm, Now: clock.Now, IDExpiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fm.c = c
	defer c.Close()
	pid, epoch := initPID(t, c, "slow") // timeout 60 s
	if code := addPartitionsV5(c, "slow", pid, epoch, "orders", 2); code != 0 {
		t.Fatal(code)
	}
	clock.advance(60 * time.Second)
	c.scan()
	if d, _ := c.Describe("slow"); d.State != "Ongoing" {
		t.Fatalf("aborted at exactly the timeout: %s", d.State)
	}
	clock.advance(time.Millisecond)
	c.scan()
	d := waitState(t, c, "slow", txnlog.CompleteAbort)
	if d.ProducerEpoch != epoch+1 {
		t.Fatalf("timeout abort epoch %d, want %d (one bump)", d.ProducerEpoch, epoch+1)
	}
	m := fm.snapshot()
	if len(m) != 1 || m[0].Commit || m[0].ProducerEpoch != epoch+1 || m[0].TransactionVersion != 2 {
		t.Fatalf("timeout markers %+v", m)
	}
	// The client's EndTxn at its old epoch: TV2 retry of the abort → NONE.
	if r := endTxn(c, 5, "slow", pid, epoch, false); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("late abort: %+v", r)
	}
	if s := c.Stats(); s.TimeoutAborts != 1 {
		t.Fatalf("stats %+v", s)
	}
	clock.advance(time.Hour)
	c.scan()
	waitFor(t, "expiry", func() bool { _, ok := c.Describe("slow"); return !ok })
}

func TestOperatorAbort(t *testing.T) {
	c, fm := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), false)
	ctx := context.Background()
	if err := c.Abort(ctx, "nope"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	pid, epoch := initPID(t, c, "t")
	if err := c.Abort(ctx, "t"); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("Empty: %v", err)
	}
	addPartitionsV3(c, "t", pid, epoch, "orders", 0)
	if err := c.Abort(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Describe("t"); d.State != "PrepareAbort" {
		t.Fatalf("after abort: %s", d.State)
	}
	if err := c.Abort(ctx, "t"); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("PrepareAbort: %v", err)
	}
	// The markers are queued once the Prepare is durable, after Abort returns.
	waitFor(t, "abort markers queued", func() bool { return len(fm.snapshot()) == 1 })
	m := fm.snapshot()
	c.MarkersStuck(m[0], m[0].Partitions[0], "INVALID_PRODUCER_EPOCH at leader 1")
	if d, _ := c.Describe("t"); d.StuckReason == "" {
		t.Fatal("stuck reason not visible")
	}
	if l := c.List(ListFilter{States: []txnlog.State{txnlog.PrepareAbort}}); len(l) != 1 || l[0].StuckReason == "" {
		t.Fatalf("list %+v", l)
	}
	c.MarkersWritten(m[0])
	d := waitState(t, c, "t", txnlog.CompleteAbort)
	if d.StuckReason != "" {
		t.Fatal("stuck reason kept after completion")
	}
}

func TestNullTransactionalIDAndPIDBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	store, err := txnlog.OpenBolt(path, txnlog.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fm := &fakeMarkers{}
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: store, Markers: fm, PIDBlockSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var last int64
	for i := 0; i < 25; i++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp := call(c, 22, req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || seen[resp.ProducerID] {
			t.Fatalf("idempotent InitProducerId: %+v", resp)
		}
		seen[resp.ProducerID], last = true, resp.ProducerID
	}
	c.Close()
	store.Close()
	store, err = txnlog.OpenBolt(path, txnlog.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c2, _ := openTest(t, testView("127.0.0.1:1"), store, false)
	if pid, _ := initPID(t, c2, "x"); pid <= last {
		t.Fatalf("pid %d after restart, %d was already handed out", pid, last)
	}
	if c2.Epoch() != 2 {
		t.Fatalf("coordinator epoch %d after one restart, want 2", c2.Epoch())
	}
}

func TestBadRequests(t *testing.T) {
	c, _ := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), false)
	empty := ""
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &empty, 1000, -1, -1
	if r := call(c, 22, req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty id: %d", r.ErrorCode)
	}
	id := "t"
	req.TransactionalID, req.TransactionTimeoutMillis = &id, int32((16 * time.Minute).Milliseconds())
	if r := call(c, 22, req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above max: %d", r.ErrorCode)
	}
	req.TransactionTimeoutMillis, req.ProducerID = 1000, 5
	if r := call(c, 22, req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("pid without epoch: %d", r.ErrorCode)
	}
	pid, epoch := initPID(t, c, "t")
	// Unknown topic: 3 for it, 55 for the others; nothing written.
	areq := kmsg.NewPtrAddPartitionsToTxnRequest()
	areq.SetVersion(3)
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch = "t", pid, epoch
	for _, tp := range []struct {
		topic string
		parts []int32
	}{{"orders", []int32{0, 99}}, {"missing", []int32{0}}} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, tp.parts
		areq.Topics = append(areq.Topics, rt)
	}
	aresp := call(c, 24, areq).(*kmsg.AddPartitionsToTxnResponse)
	got := map[string]int16{}
	for _, t := range aresp.Topics {
		for _, p := range t.Partitions {
			got[t.Topic+"-"+string(rune('0'+p.Partition%10))] = p.ErrorCode
		}
	}
	if got["orders-0"] != kerr.OperationNotAttempted.Code || got["orders-9"] != kerr.UnknownTopicOrPartition.Code || got["missing-0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("per-partition errors %v", got)
	}
	if d, _ := c.Describe("t"); d.State != "Empty" {
		t.Fatalf("state %s after a refused add", d.State)
	}
	// Old versions get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED.
	if r := endTxn(c, 1, "t", pid, epoch+5, true); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("EndTxn v1 fenced: %d", r.ErrorCode)
	}
	if r := endTxn(c, 3, "t", pid, epoch+5, true); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn v3 fenced: %d", r.ErrorCode)
	}
	// AddOffsetsToTxn adds the group's __consumer_offsets partition, once
	// a group coordinator serves it (leaderless_test.go: before).
	serveOffsets(c)
	oreq := kmsg.NewPtrAddOffsetsToTxnRequest()
	oreq.SetVersion(3)
	oreq.TransactionalID, oreq.ProducerID, oreq.ProducerEpoch, oreq.Group = "t", pid, epoch, "my-group"
	if r := call(c, 25, oreq).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %d", r.ErrorCode)
	}
	d, _ := c.Describe("t")
	if len(d.Partitions) != 1 || d.Partitions[0] != (txncore.TopicPartition{Topic: "__consumer_offsets", Partition: cluster.OffsetsPartitionFor("my-group", 50)}) {
		t.Fatalf("partitions %+v", d.Partitions)
	}
}

func TestDescribeAndListTransactions(t *testing.T) {
	c, _ := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), false)
	pid, epoch := initPID(t, c, "app-1")
	addPartitionsV3(c, "app-1", pid, epoch, "orders", 0, 1)
	initPID(t, c, "other")

	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"app-1", "ghost"}
	dresp := call(c, 65, dreq).(*kmsg.DescribeTransactionsResponse)
	if len(dresp.TransactionStates) != 2 {
		t.Fatalf("%+v", dresp)
	}
	a, g := dresp.TransactionStates[0], dresp.TransactionStates[1]
	if a.ErrorCode != 0 || a.State != "Ongoing" || a.ProducerID != pid || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 || a.TimeoutMillis != 60000 {
		t.Fatalf("describe app-1: %+v", a)
	}
	if g.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe ghost: %d", g.ErrorCode)
	}

	list := func(v int16, mod func(*kmsg.ListTransactionsRequest)) *kmsg.ListTransactionsResponse {
		req := kmsg.NewPtrListTransactionsRequest()
		req.SetVersion(v)
		req.DurationFilterMillis = -1
		mod(req)
		return call(c, 66, req).(*kmsg.ListTransactionsResponse)
	}
	if r := list(0, func(*kmsg.ListTransactionsRequest) {}); len(r.TransactionStates) != 2 {
		t.Fatalf("list all: %+v", r.TransactionStates)
	}
	if r := list(0, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing", "Bogus"} }); len(r.TransactionStates) != 1 || r.TransactionStates[0].TransactionalID != "app-1" || len(r.UnknownStateFilters) != 1 {
		t.Fatalf("state filter: %+v", r)
	}
	pat := "^oth"
	if r := list(2, func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &pat }); len(r.TransactionStates) != 1 || r.TransactionStates[0].TransactionalID != "other" {
		t.Fatalf("pattern: %+v", r)
	}
	bad := "("
	if r := list(2, func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &bad }); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad pattern: %d", r.ErrorCode)
	}
	if r := list(1, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = int64(time.Hour / time.Millisecond) }); len(r.TransactionStates) != 0 {
		t.Fatalf("duration filter: %+v", r.TransactionStates)
	}
}

// A leader's batched AddPartitionsToTxn v4/v5: several transactions, each
// answered on its own; VerifyOnly only checks.
func TestLeaderBatchedAddPartitions(t *testing.T) {
	c, _ := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), false)
	pa, ea := initPID(t, c, "a")
	pb, eb := initPID(t, c, "b")
	for _, v := range []int16{4, 5} {
		req := leaderAddRequest("a", pa, ea, "orders", 0, 1)
		req.SetVersion(v)
		verify := kmsg.NewAddPartitionsToTxnRequestTransaction()
		verify.TransactionalID, verify.ProducerID, verify.ProducerEpoch, verify.VerifyOnly = "b", pb, eb, true
		vt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		vt.Topic, vt.Partitions = "orders", []int32{2}
		verify.Topics = append(verify.Topics, vt)
		fenced := kmsg.NewAddPartitionsToTxnRequestTransaction()
		fenced.TransactionalID, fenced.ProducerID, fenced.ProducerEpoch = "b", pb, eb+3
		fenced.Topics = append(fenced.Topics, vt)
		req.Transactions = append(req.Transactions, verify, fenced)
		resp := call(c, 24, req).(*kmsg.AddPartitionsToTxnResponse)
		if len(resp.Transactions) != 3 {
			t.Fatalf("v%d: %d transactions answered", v, len(resp.Transactions))
		}
		if code := resp.Transactions[0].Topics[0].Partitions[1].ErrorCode; code != 0 {
			t.Fatalf("v%d add: %d", v, code)
		}
		wantVerify := kerr.TransactionAbortable.Code
		if v == 4 {
			wantVerify = kerr.InvalidTxnState.Code
		}
		if code := resp.Transactions[1].Topics[0].Partitions[0].ErrorCode; code != wantVerify {
			t.Fatalf("v%d verify of a partition not in the txn: %d, want %d", v, code, wantVerify)
		}
		if code := resp.Transactions[2].Topics[0].Partitions[0].ErrorCode; code != kerr.ProducerFenced.Code {
			t.Fatalf("v%d fenced: %d", v, code)
		}
	}
	d, _ := c.Describe("a")
	if d.State != "Ongoing" || d.ClientTransactionVersion != 2 || len(d.Partitions) != 2 {
		t.Fatalf("a: %+v", d)
	}
	if d, _ := c.Describe("b"); d.State != "Empty" {
		t.Fatalf("b changed by VerifyOnly/fenced requests: %s", d.State)
	}
}

// overlapNextTransaction commits a TV2 transaction of "t" on orders-0 and,
// with its markers handed to the sender but not written, registers the next
// transaction (at the bumped epoch, returned) on orders-1 as a leader would:
// answered at once.
func overlapNextTransaction(t *testing.T, c *Coordinator, fm *fakeMarkers) (pid int64, next int16) {
	t.Helper()
	pid, epoch := initPID(t, c, "t")
	if code := addPartitionsV5(c, "t", pid, epoch, "orders", 0); code != 0 {
		t.Fatal(code)
	}
	if r := endTxn(c, 5, "t", pid, epoch, true); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	waitFor(t, "markers", func() bool { return len(fm.snapshot()) == 1 })
	next = epoch + 1
	if code := addPartitionsV5(c, "t", pid, next, "orders", 1); code != 0 {
		t.Fatalf("AddPartitionsToTxn v5 during PrepareCommit: %d, want 0 at once", code)
	}
	return pid, next
}

// TestNextTransactionOverlapsMarkers: a TV2 producer begins its next
// transaction while the previous one's markers are still on their way. The
// leader's AddPartitionsToTxn v5 meets PrepareCommit and is answered at
// once: the record holds the next transaction (Ongoing at the bumped epoch)
// and the previous one as Completing. The next EndTxn waits until those
// markers are written; markers that never complete leave it at 51 after the
// bounded wait. A client's own AddPartitionsToTxn (v3, TV1) still waits for
// Complete.
func TestNextTransactionOverlapsMarkers(t *testing.T) {
	c, fm := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), false)
	pid, next := overlapNextTransaction(t, c, fm)
	d, _ := c.Describe("t")
	if d.State != "Ongoing" || d.ProducerEpoch != next || len(d.Partitions) != 1 || d.Partitions[0].Partition != 1 {
		t.Fatalf("next transaction: %+v", d)
	}
	if cp := d.Completing; cp == nil || !cp.Commit || cp.ProducerEpoch != next || len(cp.Partitions) != 1 || cp.Partitions[0].Partition != 0 {
		t.Fatalf("Describe does not show the completing transaction: %+v", d.Completing)
	}
	if err := c.Abort(context.Background(), "t"); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("operator abort while the previous markers are written: %v, want 51", err)
	}
	ended := make(chan *kmsg.EndTxnResponse, 1)
	go func() { ended <- endTxn(c, 5, "t", pid, next, true) }()
	select {
	case r := <-ended:
		t.Fatalf("EndTxn answered %d before the previous transaction's markers were written", r.ErrorCode)
	case <-time.After(50 * time.Millisecond):
	}
	if len(fm.snapshot()) != 1 {
		t.Fatalf("the next transaction's markers were queued before the previous ones completed: %+v", fm.snapshot())
	}
	c.MarkersWritten(fm.snapshot()[0])
	if r := <-ended; r.ErrorCode != 0 || r.ProducerEpoch != next+1 {
		t.Fatalf("EndTxn after the previous markers: %+v", r)
	}
	if d, _ := c.Describe("t"); d.Completing != nil {
		t.Fatalf("completing transaction still shown after its markers: %+v", d.Completing)
	}
	waitFor(t, "second markers", func() bool { return len(fm.snapshot()) == 2 })
	// A Kafka broker's registration (another client id) does not start
	// the next transaction early: Kafka's leaders do not hold data for the
	// previous marker. It waits for Complete (here: 51 after the wait).
	broker := callAs(c, "kafka-broker", 24, leaderAddRequest("t", pid, next+1, "orders", 2)).(*kmsg.AddPartitionsToTxnResponse)
	if code := firstV4Error(broker); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("a Kafka broker's registration during PrepareCommit: %d, want 51", code)
	}
	if m := fm.snapshot()[1]; m.ProducerEpoch != next+1 || len(m.Partitions) != 1 || m.Partitions[0].Partition != 1 {
		t.Fatalf("second transaction's markers: %+v", m)
	}

	// A TV1-style registration (v3, from the client) during Prepare still
	// waits for Complete, then succeeds; stuck markers → 51 after the wait.
	if code := addPartitionsV3(c, "t", pid, next+1, "orders", 2); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("AddPartitionsToTxn v3 with markers stuck: %d, want 51", code)
	}
	c.MarkersWritten(fm.snapshot()[1])
	waitState(t, c, "t", txnlog.CompleteCommit)
}

// TestRecoveryResendsCompletingMarkers: a restart between the next
// transaction's registration and the previous one's completion resends the
// previous transaction's markers (with the new coordinator epoch), keeps the
// next transaction Ongoing, and its EndTxn works once they are written.
func TestRecoveryResendsCompletingMarkers(t *testing.T) {
	store := txnlog.NewMemory()
	c, fm := openTest(t, testView("127.0.0.1:1"), store, false)
	pid, next := overlapNextTransaction(t, c, fm)
	c.Close()

	c2, fm2 := openTest(t, testView("127.0.0.1:1"), store, false)
	waitFor(t, "resent markers", func() bool { return len(fm2.snapshot()) == 1 })
	m := fm2.snapshot()[0]
	if !m.Commit || m.ProducerEpoch != next || m.TransactionVersion != 2 || m.CoordinatorEpoch != c2.Epoch() ||
		len(m.Partitions) != 1 || m.Partitions[0].Partition != 0 {
		t.Fatalf("resent markers %+v (coordinator epoch %d)", m, c2.Epoch())
	}
	if d, _ := c2.Describe("t"); d.State != "Ongoing" || d.ProducerEpoch != next || len(d.Partitions) != 1 || d.Partitions[0].Partition != 1 {
		t.Fatalf("after restart: %+v", d)
	}
	c2.MarkersWritten(m)
	if r := endTxn(c2, 5, "t", pid, next, true); r.ErrorCode != 0 || r.ProducerEpoch != next+1 {
		t.Fatalf("EndTxn after the resent markers: %+v", r)
	}
}

// TestInlineCallerGivesUp: a registration waiting for the previous
// transaction's markers (CONCURRENT_TRANSACTIONS, up to maxConcurrentWait)
// ends its wait when its in-process caller gives up. An Inline LocalClient
// (the embedded leaders') waits for the Reply on its own goroutine, so
// without this a closing leader would be held for the whole wait.
func TestInlineCallerGivesUp(t *testing.T) {
	view := testView("127.0.0.1:1")
	c, fm := openTest(t, view, txnlog.NewMemory(), false)
	pid, epoch := initPID(t, c, "t")
	if code := addPartitionsV5(c, "t", pid, epoch, "orders", 0); code != 0 {
		t.Fatal(code)
	}
	if r := endTxn(c, 5, "t", pid, epoch, true); r.ErrorCode != 0 { // its markers never complete
		t.Fatal(r.ErrorCode)
	}
	waitFor(t, "markers", func() bool { return len(fm.snapshot()) == 1 })
	reg := wire.NewRegistry()
	c.Register(reg)
	srv := startServer(t, listenLocal(t), reg, view)
	local := srv.Local("").WithClientID("kafka-broker").Inline()

	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		// A Kafka broker's registration waits for Complete
		// (TestNextTransactionOverlapsMarkers).
		resp, err := local.Do(ctx, leaderAddRequest("t", pid, epoch+1, "orders", 2))
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("registration answered (%v, %v) while the previous markers are stuck", r.resp, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	r := <-done
	if waited := time.Since(start); waited >= maxConcurrentWait {
		t.Fatalf("the registration waited %v: its caller's giving up did not end the wait", waited)
	}
	if r.err != nil || firstV4Error(r.resp.(*kmsg.AddPartitionsToTxnResponse)) != kerr.ConcurrentTransactions.Code {
		t.Fatalf("registration after its caller gave up: %v, %v; want 51", r.resp, r.err)
	}
}

// TestNoOverlapWithLegacyMarkerLeader: when a partition of the Prepare is
// led by a leader that gets WriteTxnMarkers v1 (4.1: Kafka's legacy epoch
// >= rule), the id's next transaction does not start while the markers
// are in flight: a resent or retried marker would be applied to it, as it
// has the same epoch under TV2. The leader's registration then waits for
// the Complete, as Kafka's would (here: CONCURRENT_TRANSACTIONS once the
// bounded wait ends, since the fake markers never complete). With every
// leader on 4.2 the same registration is answered at once
// (TestNextTransactionOverlapsMarkers).
func TestNoOverlapWithLegacyMarkerLeader(t *testing.T) {
	for _, c := range []struct {
		leaderVersion, coordVersion string
	}{{"4.1", "4.2"}, {"4.2", "4.1"}} {
		t.Run("leader="+c.leaderVersion+"/coordinator="+c.coordVersion, func(t *testing.T) {
			view := cluster.NewView(&cluster.File{ClusterID: "test",
				Coordinator: &cluster.Node{NodeID: 0, Addr: "127.0.0.1:1", KafkaVersion: c.coordVersion},
				Leaders:     []cluster.Node{{NodeID: 1, Addr: "127.0.0.1:2", KafkaVersion: c.leaderVersion}},
				Topics:      map[string]int32{"orders": 4}, DefaultPartitions: 3})
			fm := &fakeMarkers{}
			co, err := Open(Config{View: view, Store: txnlog.NewMemory(), Markers: fm, KafkaVersion: c.coordVersion, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			fm.mu.Lock()
			fm.c = co
			fm.mu.Unlock()
			t.Cleanup(func() { co.Close() })
			pid, epoch := initPID(t, co, "t")
			if code := addPartitionsV5(co, "t", pid, epoch, "orders", 0); code != 0 {
				t.Fatal(code)
			}
			if r := endTxn(co, 5, "t", pid, epoch, true); r.ErrorCode != 0 {
				t.Fatal(r.ErrorCode)
			}
			waitFor(t, "markers", func() bool { return len(fm.snapshot()) == 1 })
			if code := addPartitionsV5(co, "t", pid, epoch+1, "orders", 1); code == 0 {
				t.Fatal("the next transaction started while markers to a v1 leader were in flight")
			}
			if d, _ := co.Describe("t"); d.State != "PrepareCommit" || d.Completing != nil {
				t.Fatalf("state %s, completing %+v: want PrepareCommit alone", d.State, d.Completing)
			}
		})
	}
}
