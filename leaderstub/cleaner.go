package leaderstub

// The log cleaner's decision, pure: given a partition's batches (their
// records' keys), its aborted-transaction index, its last stable offset and
// its topic's configs, which records of which batches remain. The leader
// (cleaner_run.go) reads the batches, calls planClean and rewrites what it
// says through the process log. Kafka's LogCleaner, batch by batch:
//
//   - the cleanable part ends at the first of: the last stable offset (an
//     open transaction's data is never cleaned), the active segment (the
//     newest batches within segment.bytes and younger than segment.ms, by
//     their largest timestamp; the last batch always), the first batch
//     younger than min.compaction.lag.ms, and Limit;
//   - a partition is cleaned when its dirty bytes (written since the last
//     clean, FirstDirty) over the cleanable bytes reach
//     min.cleanable.dirty.ratio, when its first dirty batch is older
//     than max.compaction.lag.ms, or when a tombstone or marker the last
//     clean kept for its age may go (Horizon);
//   - the offset map holds the last offset of each key in the dirty part,
//     from committed and non-transactional data only; a record whose key
//     has a later offset in the map goes;
//   - a tombstone (null value) that is the last of its key goes once its
//     batch is older than delete.retention.ms;
//   - the data of an aborted transaction goes;
//   - a COMMIT or ABORT marker goes when no data of its transaction remains
//     and it is older than delete.retention.ms; an ABORT marker's entry of
//     the aborted-transaction index goes with it;
//   - the last batch of each producer that still has state is kept, empty
//     of records if none remain (Kafka's RETAIN_EMPTY), so that the log
//     keeps its last sequence and epoch; any other batch left without a
//     record goes.
//
// Offsets never change: a kept batch keeps its base and last offset, so a
// fetch at a removed offset gets the next batch.

import "github.com/txncoord/txncoord/topicconfig"

// cleanRecord is one record of a data batch as the cleaner sees it.
type cleanRecord struct {
	Offset    int64
	Key       string
	Tombstone bool
}

// cleanBatch is one batch as the cleaner sees it.
type cleanBatch struct {
	Base, Last    int64
	Size          int64
	MaxTimestamp  int64
	ProducerID    int64
	Control       bool
	Commit        bool // a control batch's type
	Transactional bool
	Records       []cleanRecord // data batches only
}

// cleanInput is one partition, from its log start to its high watermark.
type cleanInput struct {
	Batches    []cleanBatch
	Aborted    []abortedTxn
	FirstDirty int64 // the end of the previous clean (0: never cleaned)
	LSO        int64
	Limit      int64 // a further bound of the cleanable part (-1: none)
	Now        int64
	Vals       topicconfig.Values
	// Active are the producers that have state on the partition; the
	// last batch of each is kept.
	Active map[int64]bool
	// Horizon is when a tombstone or marker kept by the last clean for
	// its age may go (-1: none): the partition is due then even with no
	// dirty bytes.
	Horizon int64
}

// batchAction is what becomes of one batch of the cleanable part that
// changes: dropped, or rewritten with the records at Keep.
type batchAction struct {
	Index int
	Drop  bool
	Keep  []int64 // offsets of the records kept (empty: a kept empty batch)
}

// cleanPlan is planClean's answer.
type cleanPlan struct {
	// End is the end of the cleanable part: the next clean's FirstDirty
	// when this one runs.
	End int64
	// DirtyRatio is dirty bytes over cleanable bytes (0 when none).
	DirtyRatio float64
	// Run: the partition is cleaned now (the actions may still be none).
	Run            bool
	Actions        []batchAction
	DroppedAborted []int64 // marker offsets whose aborted-index entries go
	RecordsRemoved int
	BatchesDropped int
	BytesCleaned   int64 // size of the cleanable part read
	// Horizon is the next cleanInput.Horizon: when the first tombstone
	// or marker this clean kept for its age may go (-1: none).
	Horizon int64
}

// cleanableEnd is the offset the cleanable part ends at, and the index of
// its first batch not cleanable.
func cleanableEnd(in *cleanInput) (int64, int) {
	n := len(in.Batches)
	if n == 0 || !in.Vals.Compact {
		return 0, 0
	}
	// The active segment: back from the last batch while it holds
	// segment.bytes and its batches are younger than segment.ms.
	active := n - 1
	size := in.Batches[active].Size
	for active > 0 {
		b := in.Batches[active-1]
		if size+b.Size > in.Vals.SegmentBytes || !youngerThan(b.MaxTimestamp, in.Now, in.Vals.SegmentMs) {
			break
		}
		size += b.Size
		active--
	}
	end := in.Batches[active].Base
	end = min(end, in.LSO)
	if in.Limit >= 0 {
		end = min(end, in.Limit)
	}
	i := 0
	for i < n && in.Batches[i].Last < end {
		if in.Vals.MinCompactionLagMs > 0 && youngerThan(in.Batches[i].MaxTimestamp, in.Now, in.Vals.MinCompactionLagMs) {
			break
		}
		i++
	}
	if i == 0 {
		return in.Batches[0].Base, 0
	}
	return in.Batches[i-1].Last + 1, i
}

// youngerThan: ts lies within ms of now (no overflow for Kafka's
// "forever", Long.MAX_VALUE).
func youngerThan(ts, now, ms int64) bool {
	return now-ts < ms
}

// olderThan: ts lies more than ms before now (ms ≥ 0).
func olderThan(ts, now, ms int64) bool {
	return now-ts >= ms
}

// planClean decides a clean of one partition (see the top of this file).
func planClean(in *cleanInput) cleanPlan {
	end, stop := cleanableEnd(in)
	plan := cleanPlan{End: end, Horizon: in.Horizon}
	if stop == 0 {
		return plan
	}
	var dirty, total int64
	firstDirty := -1
	for i := range stop {
		b := &in.Batches[i]
		total += b.Size
		if b.Base >= in.FirstDirty {
			dirty += b.Size
			if firstDirty < 0 {
				firstDirty = i
			}
		}
	}
	if total > 0 {
		plan.DirtyRatio = float64(dirty) / float64(total)
	}
	horizon := in.Horizon >= 0 && in.Now >= in.Horizon
	if (firstDirty < 0 || dirty == 0) && !horizon {
		return plan
	}
	overdue := firstDirty >= 0 && !youngerThan(in.Batches[firstDirty].MaxTimestamp, in.Now, in.Vals.MaxCompactionLagMs)
	if plan.DirtyRatio < in.Vals.MinCleanableDirtyRatio && !overdue && !horizon {
		return plan
	}
	if firstDirty < 0 {
		firstDirty = stop
	}
	plan.Run = true
	plan.Horizon = -1
	keptYoung := func(ts int64) {
		h := ts + in.Vals.DeleteRetentionMs
		if h < ts { // overflow: never
			return
		}
		if plan.Horizon < 0 || h < plan.Horizon {
			plan.Horizon = h
		}
	}
	plan.BytesCleaned = total

	aborted := func(b *cleanBatch) bool {
		if !b.Transactional || b.Control {
			return false
		}
		for _, a := range in.Aborted {
			if a.ProducerID == b.ProducerID && a.FirstOffset <= b.Base && b.Base <= a.LastOffset {
				return true
			}
		}
		return false
	}
	// The offset map: the last offset of each key in the dirty part.
	last := map[string]int64{}
	for i := firstDirty; i < stop; i++ {
		b := &in.Batches[i]
		if b.Control || aborted(b) {
			continue
		}
		for _, r := range b.Records {
			last[r.Key] = r.Offset
		}
	}
	// The last batch of each producer with state, anywhere in the log.
	lastOfProducer := map[int64]int{}
	for i := range in.Batches {
		if pid := in.Batches[i].ProducerID; pid >= 0 && in.Active[pid] {
			lastOfProducer[pid] = i
		}
	}
	txnHasData := map[int64]bool{} // pid → its current transaction keeps data
	for i := range stop {
		b := &in.Batches[i]
		retainEmpty := b.ProducerID >= 0 && in.Active[b.ProducerID] && lastOfProducer[b.ProducerID] == i
		if b.Control {
			remains := txnHasData[b.ProducerID]
			delete(txnHasData, b.ProducerID)
			if remains || retainEmpty {
				continue
			}
			if !olderThan(b.MaxTimestamp, in.Now, in.Vals.DeleteRetentionMs) {
				keptYoung(b.MaxTimestamp)
				continue
			}
			plan.Actions = append(plan.Actions, batchAction{Index: i, Drop: true})
			plan.BatchesDropped++
			plan.RecordsRemoved++
			if !b.Commit {
				plan.DroppedAborted = append(plan.DroppedAborted, b.Last)
			}
			continue
		}
		discardAll := aborted(b)
		var keep []int64 // nil while every record so far stays
		for j, r := range b.Records {
			stays := !discardAll
			if off, ok := last[r.Key]; stays && ok && r.Offset < off {
				stays = false
			}
			if stays && r.Tombstone {
				if olderThan(b.MaxTimestamp, in.Now, in.Vals.DeleteRetentionMs) {
					stays = false
				} else {
					keptYoung(b.MaxTimestamp)
				}
			}
			switch {
			case stays && keep != nil:
				keep = append(keep, r.Offset)
			case !stays && keep == nil:
				keep = make([]int64, 0, len(b.Records))
				for _, k := range b.Records[:j] {
					keep = append(keep, k.Offset)
				}
			}
		}
		if keep == nil { // every record stays
			if b.Transactional && len(b.Records) > 0 {
				txnHasData[b.ProducerID] = true
			}
			if len(b.Records) > 0 || retainEmpty {
				continue
			}
			keep = []int64{}
		}
		if b.Transactional && len(keep) > 0 {
			txnHasData[b.ProducerID] = true
		}
		plan.RecordsRemoved += len(b.Records) - len(keep)
		if len(keep) == 0 && !retainEmpty {
			plan.Actions = append(plan.Actions, batchAction{Index: i, Drop: true})
			plan.BatchesDropped++
			continue
		}
		plan.Actions = append(plan.Actions, batchAction{Index: i, Keep: keep})
	}
	return plan
}
