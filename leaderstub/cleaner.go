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
//     has a later offset in the map goes. Kafka's SkimpyOffsetMap keeps a
//     fixed-size hash of each key, and a hash collision loses a record;
//     this map keeps the key itself (Go's map hashes it all the same), so
//     it costs one string per distinct key and none per record (a key is
//     looked up from the stored bytes without a copy), and two bits per
//     record of the dirty part (superseded, tombstone);
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
//
// The records are decoded from the stored batches as planClean goes and
// never held: the dirty part once, to build the offset map, whose bits
// then decide its records; the part cleaned before once, to look its keys
// up; a batch that is rewritten once more for the offsets it keeps. A
// batch that loses no record is left as it is stored, so the clean reads
// the log but writes only the batches that change.

import (
	"encoding/binary"

	"github.com/txncoord/txncoord/topicconfig"
)

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
	// Records are a data batch's records, when raw is nil (the scenario
	// tables).
	Records []cleanRecord
	// raw is the stored batch, whose records planClean decodes (valid
	// only while the caller's read transaction is open); n is its record
	// count, which stays valid after.
	raw []byte
	n   int
}

// count is the number of records of a data batch.
func (b *cleanBatch) count() int {
	if b.Records != nil {
		return len(b.Records)
	}
	return b.n
}

// setRaw makes planClean decode b's records from the stored batch raw,
// and reads a control batch's type.
func (b *cleanBatch) setRaw(raw []byte) {
	b.raw, b.n = raw, int(binary.BigEndian.Uint32(raw[offRecordCount:]))
	if b.Control {
		b.Commit = controlIsCommit(raw)
	}
}

// eachRecord calls fn with each record of a data batch: its offset, its
// key (valid only during fn) and whether its value is null.
func (b *cleanBatch) eachRecord(fn func(offset int64, key []byte, tombstone bool)) error {
	if b.raw == nil {
		for _, r := range b.Records {
			fn(r.Offset, []byte(r.Key), r.Tombstone)
		}
		return nil
	}
	return eachRecord(b.raw, func(offset int64, key []byte, valueNull bool, _ []byte) {
		fn(offset, key, valueNull)
	})
}

// offsetMap is the dirty part's keys, read once: the index of the last
// record of each key (its string made once, when the key is first seen; a
// lookup by the stored bytes makes none), and per record of the dirty
// part, in log order, whether a later record of its key supersedes it and
// whether it is a tombstone. The decision then reads the dirty part's
// records from these bits, without decoding them again.
type offsetMap struct {
	index      map[string]int32 // key → its slot in last
	last       []int32          // the index of the key's last record
	superseded []uint64         // bit per record
	tombstone  []uint64
	n          int32 // records so far
}

func setBit(bits []uint64, i int32) []uint64 {
	for int(i>>6) >= len(bits) {
		bits = append(bits, 0)
	}
	bits[i>>6] |= 1 << (i & 63)
	return bits
}

func hasBit(bits []uint64, i int32) bool {
	return int(i>>6) < len(bits) && bits[i>>6]&(1<<(i&63)) != 0
}

// add is the dirty part's next record: one lookup of the key, which
// allocates only for a key not seen before.
func (m *offsetMap) add(key []byte, tombstone bool) {
	if slot, ok := m.index[string(key)]; ok {
		m.superseded = setBit(m.superseded, m.last[slot])
		m.last[slot] = m.n
	} else {
		m.index[string(key)] = int32(len(m.last))
		m.last = append(m.last, m.n)
	}
	if tombstone {
		m.tombstone = setBit(m.tombstone, m.n)
	}
	m.n++
}

// has: the dirty part holds key, so a record of it before the dirty part
// is superseded.
func (m *offsetMap) has(key []byte) bool {
	_, ok := m.index[string(key)]
	return ok
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

// planClean decides a clean of one partition (see the top of this file);
// the error is a stored batch that does not decode.
func planClean(in *cleanInput) (cleanPlan, error) {
	end, stop := cleanableEnd(in)
	plan := cleanPlan{End: end, Horizon: in.Horizon}
	if stop == 0 {
		return plan, nil
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
		return plan, nil
	}
	overdue := firstDirty >= 0 && !youngerThan(in.Batches[firstDirty].MaxTimestamp, in.Now, in.Vals.MaxCompactionLagMs)
	if plan.DirtyRatio < in.Vals.MinCleanableDirtyRatio && !overdue && !horizon {
		return plan, nil
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
	// The offset map: the last record of each key in the dirty part;
	// first[i] is the map's index of batch i's first record (-1: not in
	// the map).
	last := offsetMap{index: map[string]int32{}}
	first := make([]int32, stop)
	for i := range stop {
		first[i] = -1
		b := &in.Batches[i]
		if i < firstDirty || b.Control || aborted(b) {
			continue
		}
		first[i] = last.n
		if err := b.eachRecord(func(_ int64, key []byte, tombstone bool) { last.add(key, tombstone) }); err != nil {
			return cleanPlan{}, err
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
	var scratch []int64
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
		// keep collects the offsets of the records that stay, into
		// scratch; it is copied only for a batch that is rewritten.
		keep, removed, n := scratch[:0], false, b.count()
		stays := func(tombstone bool) bool {
			if !tombstone {
				return true
			}
			if olderThan(b.MaxTimestamp, in.Now, in.Vals.DeleteRetentionMs) {
				return false
			}
			keptYoung(b.MaxTimestamp)
			return true
		}
		var err error
		switch g := first[i]; {
		case aborted(b): // all of it goes, undecoded
			removed = n > 0
		case g >= 0: // in the map: its bits say which records stay
			kept := 0
			for j := range int32(n) {
				if !hasBit(last.superseded, g+j) && stays(hasBit(last.tombstone, g+j)) {
					kept++
				}
			}
			removed = kept < n
			if removed && kept > 0 { // the offsets of a rewritten batch's records
				j := g
				err = b.eachRecord(func(offset int64, _ []byte, _ bool) {
					if !hasBit(last.superseded, j) && (!hasBit(last.tombstone, j) || !olderThan(b.MaxTimestamp, in.Now, in.Vals.DeleteRetentionMs)) {
						keep = append(keep, offset)
					}
					j++
				})
			}
		default: // before the dirty part: superseded if the map has its key
			err = b.eachRecord(func(offset int64, key []byte, tombstone bool) {
				if !last.has(key) && stays(tombstone) {
					keep = append(keep, offset)
				} else {
					removed = true
				}
			})
		}
		scratch = keep
		if err != nil {
			return cleanPlan{}, err
		}
		if !removed {
			keep = keep[:0] // unused: the batch is left as stored
		}
		if b.Transactional && n > 0 && (!removed || len(keep) > 0) {
			txnHasData[b.ProducerID] = true
		}
		if !removed && (n > 0 || retainEmpty) {
			continue // every record stays: the batch is left as stored
		}
		plan.RecordsRemoved += n - len(keep)
		if len(keep) == 0 && !retainEmpty {
			plan.Actions = append(plan.Actions, batchAction{Index: i, Drop: true})
			plan.BatchesDropped++
			continue
		}
		plan.Actions = append(plan.Actions, batchAction{Index: i, Keep: append([]int64{}, keep...)})
	}
	return plan, nil
}
