package leaderstub

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/groupcommit"
	"github.com/txncoord/txncoord/groupcommit/gctest"
	"github.com/txncoord/txncoord/wire"
)

// deferringCoordinator answers as the twin, and writes each registration
// in its space of the leader's shared Log the way the coordinator of
// `txncoord up` does for an in-process leader: queued, its ticket deferred
// to the request's Deferral, answered at once. With fail set the write
// fails (a store error).
type deferringCoordinator struct {
	*twinCoordinator
	space    *groupcommit.Space
	fail     atomic.Bool
	deferred atomic.Int32
}

var errCoordinatorStore = errors.New("coordinator store failed")

func (c *deferringCoordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp, err := c.twinCoordinator.AddPartitionsToTxn(ctx, req)
	if err != nil {
		return nil, err
	}
	df := groupcommit.DeferralFrom(ctx)
	if !df.For(c.space) {
		return nil, errors.New("no Deferral for the shared Log")
	}
	fail := c.fail.Load()
	df.Defer(c.space.SubmitAfter(nil, func(r groupcommit.Root) error {
		if fail {
			return errCoordinatorStore
		}
		b, err := r.CreateBucketIfNotExists([]byte("txns"))
		if err != nil {
			return err
		}
		return b.Put([]byte(req.Transactions[0].TransactionalID), []byte("ongoing"))
	}, nil))
	c.deferred.Add(1)
	return resp, nil
}

// sharedFixture is a leader writing in a groupcommit Log (opened with
// opts) with a deferringCoordinator in the same Log.
func sharedFixture(t *testing.T, opts groupcommit.Options) (*fixture, *deferringCoordinator, *groupcommit.Log) {
	t.Helper()
	shared := gctest.Open(t, opts) // closed after the fixture's leader
	dc := &deferringCoordinator{twinCoordinator: newTwin(), space: gctest.Space(t, shared, "coordinator", groupcommit.SpaceOptions{})}
	return newFixtureWith(t, func(c *Config) { c.Shared, c.Coordinator = shared, dc }), dc, shared
}

// In a Log shared with the coordinator, a transaction's registration is
// answered once queued and the data write carries it: the Produce handler
// returns while the writer is held (it did not wait for the registration's
// fsync), and both writes land in one commit. When the registration's
// write fails, the data write fails with it, unwritten: the Produce gets
// KAFKA_STORAGE_ERROR, the leader stops (its memory is ahead of disk), and
// after a restart the batch is not in the log.
func TestRegistrationDeferredToDataWrite(t *testing.T) {
	var mu sync.Mutex
	var commits []groupcommit.CommitStats
	f, dc, shared := sharedFixture(t, groupcommit.Options{
		Observe: func(s groupcommit.CommitStats) { mu.Lock(); commits = append(commits, s); mu.Unlock() },
	})
	coordSpace := dc.space
	other := gctest.Space(t, shared, "other", groupcommit.SpaceOptions{})

	// produce runs the handler while the writer is held; the handler
	// must return before the hold is released.
	produce := func(req *kmsg.ProduceRequest) (*pendingProduce, int) {
		t.Helper()
		release := gctest.Hold(t, other)
		mu.Lock()
		before := len(commits)
		mu.Unlock()
		started := make(chan *pendingProduce, 1)
		go func() { started <- f.startProduce(req, 12, f.l.log) }()
		var pend *pendingProduce
		select {
		case pend = <-started:
		case <-time.After(10 * time.Second): // a failure bound
			release()
			t.Fatal("the Produce handler waited for the registration's fsync")
		}
		release()
		return pend, before
	}

	pend, before := produce(txnProduce("a", testBatch{pid: 7, payload: "first"}))
	rs := awaitProduce(t, pend)
	if len(rs) != 1 || rs[0].code != 0 {
		t.Fatalf("produce: %+v", rs)
	}
	if dc.deferred.Load() != 1 {
		t.Fatalf("%d registrations deferred, want 1", dc.deferred.Load())
	}
	mu.Lock()
	after := append([]groupcommit.CommitStats(nil), commits[before:]...)
	mu.Unlock()
	// The held op's commit, then one commit with the registration and
	// the data (queued together while the writer was held: one batch).
	ops := 0
	for _, c := range after {
		ops += c.Ops
	}
	if ops != 3 || len(after) > 2 {
		t.Fatalf("commits after the hold %+v: want the hold and one commit of registration + data", after)
	}
	var stored string
	if err := coordSpace.View(func(r groupcommit.Root) error {
		if b := r.Bucket([]byte("txns")); b != nil {
			stored = string(b.Get([]byte("a")))
		}
		return nil
	}); err != nil || stored != "ongoing" {
		t.Fatalf("registration not durable with the data: %q %v", stored, err)
	}

	// The registration's write fails: the data write fails with it.
	dc.fail.Store(true)
	pend, _ = produce(txnProduce("b", testBatch{pid: 8, payload: "second"}))
	rs = awaitProduce(t, pend)
	if len(rs) != 1 || rs[0].code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce whose registration failed: %+v, want KAFKA_STORAGE_ERROR", rs)
	}
	if err := f.l.space.Err(); !errors.Is(err, groupcommit.ErrDependencyFailed) {
		t.Fatalf("leader space after a failed registration write: %v, want stopped on the dependency", err)
	}
	dc.fail.Store(false)
	f.restart()
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	end := p.nextOffset
	p.mu.RUnlock()
	if end != 1 {
		t.Fatalf("log end after restart %d, want 1: only the first batch is durable", end)
	}
	if rp := f.mustProduce(t, txnProduce("c", testBatch{pid: 9, payload: "third"})); rp != 1 {
		t.Fatalf("after restart the next batch is at %d, want 1", rp)
	}
}

// A WriteTxnMarkers that carries a Deferral for the leader's Log is
// answered once its appends are queued, with their tickets deferred, so
// the coordinator's Complete record can share their commit; without one
// the answer waits for the fsync. The marker is applied either way (it
// releases held batches at once).
func TestMarkersDeferredInSharedLog(t *testing.T) {
	f, dc, shared := sharedFixture(t, groupcommit.Options{})
	coordSpace := dc.space

	marker := func(ctx context.Context, pid int64) <-chan int16 {
		req := markerReq(pid, 1, true, 0, 2, "t", 0)
		req.SetVersion(2)
		reply := f.l.handleWriteTxnMarkers(ctx, &wire.Request{Body: req, Key: 27, Version: 2, Log: f.l.log})
		out := make(chan int16, 1)
		go func() {
			resp, err := reply()
			if err != nil {
				t.Error(err)
				return
			}
			out <- resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
		}()
		return out
	}
	hold := func() func() { return gctest.Hold(t, coordSpace) }

	f.mustProduce(t, txnProduce("a", testBatch{pid: 7, payload: "x"}))
	release := hold()
	df := groupcommit.NewDeferral(shared)
	select {
	case code := <-marker(groupcommit.WithDeferral(context.Background(), df), 7):
		if code != 0 {
			t.Fatalf("marker: %s", codeName(code))
		}
	case <-time.After(10 * time.Second): // a failure bound
		release()
		t.Fatal("a marker with a Deferral for the leader's Log waited for its fsync")
	}
	tickets := df.Tickets()
	if len(tickets) != 1 {
		t.Fatalf("%d tickets, want the marker's append", len(tickets))
	}
	complete := coordSpace.SubmitAfter(tickets, func(groupcommit.Root) error { return nil }, nil)
	release()
	if err := <-complete.Done(); err != nil {
		t.Fatalf("the Complete record after the marker: %v", err)
	}

	// Without a Deferral: answered only once durable.
	f.mustProduce(t, txnProduce("b", testBatch{pid: 8, payload: "y"}))
	release = hold()
	answer := marker(context.Background(), 8)
	select {
	case code := <-answer:
		release()
		t.Fatalf("answered (%s) before the marker could be durable", codeName(code))
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if code := <-answer; code != 0 {
		t.Fatalf("marker: %s", codeName(code))
	}
	f.restart()
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.nextOffset != 4 { // two batches, two markers
		t.Fatalf("log end after restart %d, want 4", p.nextOffset)
	}
}
