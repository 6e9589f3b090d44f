package coordinator

import (
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txntimeline"
)

// recordStep adds to the id's timeline what a decided write changes, read
// from the state it was decided on (prev, nil for a new id) and the state
// it puts (next). One place sees every transition, whichever handler or
// background step decided it; the events carry the decision's time.
// Partitions are appended by the core in the order they joined, so the
// ones added by this step are next's tail.
func (c *Coordinator) recordStep(prev, next *Metadata) {
	tl := c.cfg.Timeline
	if tl == nil || next == nil {
		return
	}
	id, at := next.TransactionalID, next.LastUpdateTimestamp
	ev := func(kind txntimeline.Kind) txntimeline.Event {
		return txntimeline.Event{AtMs: at, Kind: kind, ProducerID: next.ProducerID, Epoch: next.ProducerEpoch}
	}
	samePID := prev != nil && prev.ProducerID == next.ProducerID && prev.ProducerEpoch == next.ProducerEpoch
	if next.State == txncore.Empty && !samePID {
		tl.Record(id, ev(txntimeline.InitProducerID))
	}
	if prev != nil && prev.Completing != nil && next.Completing == nil {
		// The previous transaction's Complete, written while this one
		// is already Ongoing (TV2).
		done := prev.Completing
		tl.Record(id, txntimeline.Event{AtMs: at, Kind: txntimeline.Complete, Commit: done.Commit, ProducerID: done.ProducerID, Epoch: done.ProducerEpoch})
	}
	if next.State == txncore.Ongoing {
		added := next.Partitions
		if prev != nil && prev.State == txncore.Ongoing && samePID && len(prev.Partitions) <= len(added) {
			added = added[len(prev.Partitions):]
		}
		for _, tp := range added {
			e := ev(txntimeline.PartitionAdded)
			e.Topic, e.Partition = tp.Topic, tp.Partition
			tl.Record(id, e)
		}
	}
	if prev != nil && prev.State == next.State {
		return
	}
	switch next.State {
	case txncore.PrepareCommit, txncore.PrepareAbort:
		e := ev(txntimeline.Prepare)
		e.Commit = next.State == txncore.PrepareCommit
		tl.Record(id, e)
	case txncore.CompleteCommit, txncore.CompleteAbort:
		e := ev(txntimeline.Complete)
		e.Commit = next.State == txncore.CompleteCommit
		tl.Record(id, e)
	}
}
