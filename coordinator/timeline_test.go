package coordinator

import (
	"fmt"
	"testing"

	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/txntimeline"
)

// TestTimelineRecordsEachStep: a committed TV1 transaction on two
// partitions, then an aborted one, leave in the timeline InitProducerId,
// each partition added once (a second add of the same one adds nothing),
// Prepare and Complete with their results, in that order.
func TestTimelineRecordsEachStep(t *testing.T) {
	c, _ := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), true)
	c.cfg.Timeline = txntimeline.New(0)
	pid, epoch := initPID(t, c, "tl")
	if code := addPartitionsV3(c, "tl", pid, epoch, "orders", 0, 1); code != 0 {
		t.Fatalf("add: %d", code)
	}
	if code := addPartitionsV3(c, "tl", pid, epoch, "orders", 1); code != 0 {
		t.Fatalf("add again: %d", code)
	}
	if resp := endTxn(c, 3, "tl", pid, epoch, true); resp.ErrorCode != 0 {
		t.Fatalf("commit: %d", resp.ErrorCode)
	}
	waitState(t, c, "tl", txnlog.CompleteCommit)
	if code := addPartitionsV3(c, "tl", pid, epoch, "orders", 2); code != 0 {
		t.Fatalf("add to the second: %d", code)
	}
	if resp := endTxn(c, 3, "tl", pid, epoch, false); resp.ErrorCode != 0 {
		t.Fatalf("abort: %d", resp.ErrorCode)
	}
	waitState(t, c, "tl", txnlog.CompleteAbort)

	var got []string
	for _, ev := range c.cfg.Timeline.Timeline("tl") {
		s := ev.Kind.String()
		switch ev.Kind {
		case txntimeline.PartitionAdded:
			s += fmt.Sprintf(" %s-%d", ev.Topic, ev.Partition)
		case txntimeline.Prepare, txntimeline.Complete:
			s += fmt.Sprintf(" commit=%v", ev.Commit)
		}
		if ev.ProducerID != pid {
			t.Errorf("%s: producer id %d, want %d", s, ev.ProducerID, pid)
		}
		got = append(got, s)
	}
	want := []string{"InitProducerId", "PartitionAdded orders-0", "PartitionAdded orders-1", "Prepare commit=true", "Complete commit=true",
		"PartitionAdded orders-2", "Prepare commit=false", "Complete commit=false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("timeline:\n got %q\nwant %q", got, want)
	}
}

// TestRecordStepAllocatesNothing: recording a transition of an id that
// has its timeline already (a partition added, a Prepare) allocates
// nothing on the commit path.
func TestRecordStepAllocatesNothing(t *testing.T) {
	c, _ := openTest(t, testView("127.0.0.1:1"), txnlog.NewMemory(), true)
	c.cfg.Timeline = txntimeline.New(0)
	ongoing := Metadata{TransactionalID: "a", ProducerID: 7, ProducerEpoch: 1, State: txncore.Ongoing,
		Partitions: []txncore.TopicPartition{{Topic: "orders", Partition: 0}}}
	added := ongoing.Clone()
	added.Partitions = append(added.Partitions, txncore.TopicPartition{Topic: "orders", Partition: 1})
	prepare := added.Clone()
	prepare.State = txncore.PrepareCommit
	c.recordStep(nil, &ongoing)
	allocs := testing.AllocsPerRun(1000, func() {
		c.recordStep(&ongoing, &added)
		c.recordStep(&added, &prepare)
	})
	if allocs != 0 {
		t.Fatalf("recordStep allocates %.1f times per two steps, want 0", allocs)
	}
}
