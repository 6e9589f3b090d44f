package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groupcommit"
	"github.com/txncoord/txncoord/groupcommit/gctest"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// openShared opens a coordinator (fake markers) whose transaction log is
// the space "coordinator" of a groupcommit Log, and the space "leader-1"
// of a leader writing in the same Log (FailStop, as leaders are).
func openShared(t *testing.T) (*groupcommit.Log, *Coordinator, *fakeMarkers, *groupcommit.Space) {
	t.Helper()
	shared := gctest.Open(t, groupcommit.Options{})
	store, err := txnlog.OpenBoltIn(shared, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	leader := gctest.Space(t, shared, "leader-1", groupcommit.SpaceOptions{FailStop: true})
	c, fm := openTest(t, testView("127.0.0.1:1"), store, false)
	return shared, c, fm, leader
}

// registerWith runs a leader's AddPartitionsToTxn v5 with ctx in the
// background and returns the channel its first error code arrives on.
func registerWith(c *Coordinator, ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) <-chan int16 {
	id := cluster.LeaderClientID
	reply := c.handleAddPartitionsToTxn(ctx, &wire.Request{Body: req, Key: 24, Version: req.GetVersion(), ClientID: &id, Log: zerolog.Nop()})
	out := make(chan int16, 1)
	go func() {
		resp, err := reply()
		if err != nil {
			panic(err)
		}
		out <- firstV4Error(resp.(*kmsg.AddPartitionsToTxnResponse))
	}()
	return out
}

// With the transaction log in a groupcommit Log shared with an in-process
// leader, a registration that carries a Deferral for that Log is answered
// once its write is queued, with the write's ticket deferred to the
// caller, whose own write then carries it; without a Deferral, or with one
// for another Log, the answer waits for the fsync as before. A refusal
// defers nothing.
func TestRegistrationDeferredInSharedLog(t *testing.T) {
	shared, c, _, leader := openShared(t)
	elsewhere := gctest.Open(t, groupcommit.Options{})
	hold := func() func() { return gctest.Hold(t, leader) }
	const bound = 10 * time.Second // a failure bound, not a synchronization

	pid, epoch := initPID(t, c, "deferred")
	release := hold()
	df := groupcommit.NewDeferral(shared)
	select {
	case code := <-registerWith(c, groupcommit.WithDeferral(context.Background(), df), leaderAddRequest("deferred", pid, epoch, "orders", 0)):
		if code != 0 {
			t.Fatalf("deferred registration: %v", kerr.ErrorForCode(code))
		}
	case <-time.After(bound):
		release()
		t.Fatal("a registration with a Deferral for the store's Log waited for its fsync")
	}
	tickets := df.Tickets()
	if len(tickets) != 1 {
		t.Fatalf("%d tickets deferred, want the registration's write", len(tickets))
	}
	data := leader.SubmitAfter(tickets, func(groupcommit.Root) error { return nil }, nil)
	release()
	if err := <-data.Done(); err != nil {
		t.Fatalf("the caller's write after the registration: %v", err)
	}
	if d := waitState(t, c, "deferred", txnlog.Ongoing); len(d.Partitions) != 1 {
		t.Fatalf("registration not durable: %+v", d)
	}

	// No Deferral, or one for another Log: the answer waits for the fsync.
	for i, ctx := range []context.Context{
		context.Background(),
		groupcommit.WithDeferral(context.Background(), groupcommit.NewDeferral(elsewhere)),
	} {
		id := []string{"plain", "elsewhere"}[i]
		pid, epoch := initPID(t, c, id)
		release := hold()
		answer := registerWith(c, ctx, leaderAddRequest(id, pid, epoch, "orders", 1))
		select {
		case code := <-answer:
			release()
			t.Fatalf("%s: answered (code %d) while its write could not be durable", id, code)
		case <-time.After(100 * time.Millisecond):
		}
		release()
		select {
		case code := <-answer:
			if code != 0 {
				t.Fatalf("%s: %v", id, kerr.ErrorForCode(code))
			}
		case <-time.After(bound):
			t.Fatalf("%s: never answered", id)
		}
	}

	// A refusal (a fenced epoch) defers nothing.
	df = groupcommit.NewDeferral(shared)
	if code := <-registerWith(c, groupcommit.WithDeferral(context.Background(), df), leaderAddRequest("deferred", pid, epoch-1, "orders", 2)); code != kerr.ProducerFenced.Code {
		t.Fatalf("fenced registration: code %d", code)
	}
	if n := len(df.Tickets()); n != 0 {
		t.Fatalf("a refusal deferred %d writes", n)
	}
}

// Markers written by in-process leaders whose writes are not durable yet
// come with their tickets (Txn.Written): Complete is written after them.
// If one of them failed, Complete is not written (the marker is not on
// disk); the markers are sent again and the transaction stays in
// PrepareCommit until they are written.
func TestCompleteAfterDeferredMarkers(t *testing.T) {
	shared, c, fm, leader := openShared(t)
	// The write that fails is another leader's: leader-1 must go on.
	failing := gctest.Space(t, shared, "leader-2", groupcommit.SpaceOptions{})
	pid, epoch := initPID(t, c, "m")
	if code := addPartitionsV5(c, "m", pid, epoch, "orders", 0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if resp := endTxn(c, 5, "m", pid, epoch, true); resp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
	}
	waitFor(t, "markers handed over", func() bool { return len(fm.snapshot()) == 1 })
	txn := fm.snapshot()[0]

	failed := failing.SubmitAfter(nil, func(groupcommit.Root) error { return errors.New("marker write failed") }, nil)
	txn.Written = []groupcommit.Ticket{failed}
	c.MarkersWritten(txn)
	waitFor(t, "markers sent again", func() bool { return len(fm.snapshot()) == 2 })
	if again := fm.snapshot()[1]; len(again.Written) != 0 || again.ProducerEpoch != txn.ProducerEpoch {
		t.Fatalf("markers sent again: %+v", again)
	}
	if d, _ := c.Describe("m"); d.State != txnlog.PrepareCommit.String() {
		t.Fatalf("state after a failed marker write: %s, want PrepareCommit", d.State)
	}

	written := leader.SubmitAfter(nil, func(groupcommit.Root) error { return nil }, nil)
	txn.Written = []groupcommit.Ticket{written}
	c.MarkersWritten(txn)
	waitState(t, c, "m", txnlog.CompleteCommit)
}
