package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// serveOffsets gives c a registry on which a group coordinator serves
// WriteTxnMarkers, so __consumer_offsets has a leader that applies markers.
func serveOffsets(c *Coordinator) {
	reg := wire.NewRegistry()
	reg.Register(writeTxnMarkersKey, 0, 1, func(context.Context, *wire.Request) wire.Reply { return nil })
	c.Register(reg)
}

// Invariant 10: while no group coordinator serves __consumer_offsets (the
// coordinator node registers only the stand-in every node advertises),
// neither AddOffsetsToTxn nor AddPartitionsToTxn puts one of its partitions
// into a transaction, and each refusal is one debug line; the transaction
// stays usable. Once a group coordinator registers WriteTxnMarkers, both
// add it.
func TestNoPartitionWithoutLeader(t *testing.T) {
	var logs logtest.Buffer
	fm := &fakeMarkers{complete: true}
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: txnlog.NewMemory(), Markers: fm, KafkaVersion: "4.2",
		Log: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	fm.c = c
	t.Cleanup(func() { c.Close() })
	// What node.listen does today: the coordinator's handlers, then the
	// stand-ins of every API the cluster advertises.
	reg := wire.NewRegistry()
	c.Register(reg)
	cluster.RegisterNotServed(reg, map[int16][2]int16{writeTxnMarkersKey: {0, 1}})

	pid, epoch := initPID(t, c, "t")
	offsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	offsets.SetVersion(3)
	offsets.TransactionalID, offsets.ProducerID, offsets.ProducerEpoch, offsets.Group = "t", pid, epoch, "my-group"
	if r := call(c, 25, offsets).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("AddOffsetsToTxn without a group coordinator: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
	}
	group := cluster.OffsetsPartitionFor("my-group", 50)
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.SetVersion(3)
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "t", pid, epoch
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"orders", 0}, {cluster.OffsetsTopic, group}} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, []int32{tp.p}
		add.Topics = append(add.Topics, rt)
	}
	codes := map[string]int16{}
	for _, rt := range call(c, 24, add).(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, p := range rt.Partitions {
			codes[rt.Topic] = p.ErrorCode
		}
	}
	if codes["orders"] != kerr.OperationNotAttempted.Code || codes[cluster.OffsetsTopic] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("AddPartitionsToTxn with __consumer_offsets and no group coordinator: %v", codes)
	}
	if d, _ := c.Describe("t"); d.State != "Empty" || len(d.Partitions) != 0 {
		t.Fatalf("after the refusals: %s %v, want Empty with no partition", d.State, d.Partitions)
	}
	if n := strings.Count(logs.String(), "a transaction never contains a partition without a leader"); n != 2 {
		t.Fatalf("%d refusal lines, want 2 (one per request):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"level":"debug"`) || !strings.Contains(logs.String(), "no group coordinator serves __consumer_offsets") {
		t.Fatalf("refusal not logged at debug with its reason:\n%s", logs.String())
	}

	serveOffsets(c)
	if r := call(c, 25, offsets).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn with a group coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if d, _ := c.Describe("t"); d.State != "Ongoing" || len(d.Partitions) != 1 || d.Partitions[0].Partition != group {
		t.Fatalf("after AddOffsetsToTxn: %s %v", d.State, d.Partitions)
	}
}

// `txn abort` ends a transaction whose markers cannot all be delivered
// (invariant 10): a stuck PrepareAbort as it is; a PrepareCommit only with
// Force, as committed, giving up on the partitions that did not acknowledge.
// Without Force both are refused while their markers are on their way, and
// the id is usable again afterwards.
func TestOperatorEndsStuckPrepare(t *testing.T) {
	c, fm := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), false)
	ctx := context.Background()
	for _, tc := range []struct {
		id     string
		commit bool
	}{{"aborting", false}, {"committing", true}} {
		pid, epoch := initPID(t, c, tc.id)
		if code := addPartitionsV5(c, tc.id, pid, epoch, "orders", 0, 1); code != 0 {
			t.Fatal(code)
		}
		if r := endTxn(c, 5, tc.id, pid, epoch, tc.commit); r.ErrorCode != 0 {
			t.Fatal(r.ErrorCode)
		}
		waitFor(t, "markers", func() bool {
			return len(fm.snapshot()) > 0 && fm.snapshot()[len(fm.snapshot())-1].TransactionalID == tc.id
		})
		txn := fm.snapshot()[len(fm.snapshot())-1]
		// Markers on their way: refused without Force, saying what Force does.
		_, err := c.AbortWith(ctx, tc.id, AbortOptions{})
		if !errors.Is(err, kerr.ConcurrentTransactions) || !strings.Contains(err.Error(), "--force completes it as") {
			t.Fatalf("%s: abort without force: %v", tc.id, err)
		}
		c.MarkersStuck(txn, txn.Partitions[1], "leader 1 answers NOT_LEADER_FOR_PARTITION")
		res, err := c.AbortWith(ctx, tc.id, AbortOptions{})
		if tc.commit {
			if !errors.Is(err, kerr.ConcurrentTransactions) || !strings.Contains(err.Error(), "its markers are stuck: orders-1") {
				t.Fatalf("stuck PrepareCommit without force: %v", err)
			}
			res, err = c.AbortWith(ctx, tc.id, AbortOptions{Force: true})
		}
		want := map[bool]string{false: "CompleteAbort", true: "CompleteCommit"}[tc.commit]
		if err != nil || res.Completed != want || len(res.GaveUp) != 2 {
			t.Fatalf("%s: %+v %v, want %s giving up both partitions (the fake sender cannot tell which acknowledged)", tc.id, res, err, want)
		}
		if d, _ := c.Describe(tc.id); d.State != want || d.StuckReason != "" {
			t.Fatalf("%s after the operator's abort: %s (stuck %q)", tc.id, d.State, d.StuckReason)
		}
		// Usable again: a new transaction begins and ends.
		pid, epoch = initPID(t, c, tc.id)
		if code := addPartitionsV5(c, tc.id, pid, epoch, "orders", 2); code != 0 {
			t.Fatalf("%s: next transaction: %v", tc.id, kerr.ErrorForCode(code))
		}
	}
	if _, err := c.AbortWith(ctx, "nope", AbortOptions{Force: true}); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}
