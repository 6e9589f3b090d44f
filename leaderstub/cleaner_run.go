package leaderstub

// The log cleaner at work: every Config.CleanerBackoff (Kafka's
// log.cleaner.backoff.ms) the leader plans a clean of each partition of a
// compacted topic (planClean, cleaner.go) and writes it through the
// process log, as every other change of the leader:
//
//  1. under the partition's read lock, a copy of its index, aborted index,
//     LSO and producers;
//  2. without the lock, the batches of the cleanable part are read (from
//     bbolt, or memory while not yet applied) and planned;
//  3. the rewritten batches are built, and each run of them up to
//     cleanOpBytes becomes one persistOp (batches put again at their base
//     offset, batches dropped, aborted-index entries dropped), queued under
//     the partition's write lock after its index has been changed to
//     match, so it is ordered with the partition's writes in the process
//     log, and waited for.
//
// One persistOp is one process-log record, applied to bbolt in one
// transaction: a SIGKILL leaves each op wholly done or not at all. A clean
// that takes several ops leaves, when cut short, a log cleaned up to some
// batch, which is a log the cleaner could have produced: a record goes
// only when a later record of its key stays, a marker only with the last
// data of its transaction (earlier in the log, so in an earlier or the
// same op), an aborted-index entry with its marker. The end of the clean
// (the next clean's first dirty offset) is stored with the last op, so a
// clean cut short is done again after a restart.
//
// Until an op is applied to bbolt, the index holds the rewritten batches'
// bytes (batchIndex.cleanPos), so a fetch reads the new ones at once. A
// fetch that took its batches from the index before the op reads a
// rewritten batch's old or new bytes, or stops at a dropped one: the old
// bytes hold every record of the new ones, and the data of an aborted
// transaction is always dropped whole (its producer's last batch is its
// marker), so the aborted index never loses an entry whose data a fetch
// could still read.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/storage"
)

// DefaultCleanerBackoff is Kafka's log.cleaner.backoff.ms default (15 s).
const DefaultCleanerBackoff = 15 * time.Second

// cleanOpBytes bounds the rewritten bytes of one op of a clean.
const cleanOpBytes = 64 << 20

// CleanResult sums what one CleanLogs did.
type CleanResult struct {
	Partitions     int   // partitions cleaned
	RecordsRemoved int   // records (and markers) removed
	BytesCleaned   int64 // bytes of the cleanable parts read
	BytesRemoved   int64 // bytes the logs shrank by
}

// CleanLogs runs the log cleaner once over every partition of a compacted
// topic, by Config.Now; it returns once what it changed is durable (an
// error if a write failed: the store is then offline, as after any failed
// write).
func (l *Leader) CleanLogs() (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	var sum CleanResult
	if err := l.space.Err(); err != nil {
		return sum, err
	}
	for _, p := range l.sortedPartitions() {
		r, err := l.cleanPartition(p)
		sum.Partitions += r.Partitions
		sum.RecordsRemoved += r.RecordsRemoved
		sum.BytesCleaned += r.BytesCleaned
		sum.BytesRemoved += r.BytesRemoved
		if err != nil {
			return sum, err
		}
	}
	if sum.RecordsRemoved > 0 {
		l.log.Info().Int("partitions", sum.Partitions).Int("records_removed", sum.RecordsRemoved).
			Int64("bytes_removed", sum.BytesRemoved).Msg("log cleaner: partitions cleaned")
	}
	return sum, nil
}

// cleanLoop is CleanLogs for Leader.every.
func (l *Leader) cleanLoop() (int, error) {
	r, err := l.CleanLogs()
	return r.RecordsRemoved, err
}

// cleanPartition cleans p when it is due.
func (l *Leader) cleanPartition(p *partition) (CleanResult, error) {
	vals := l.topicValues(p.topic)
	if !vals.Compact {
		l.metrics.setDirtyRatio(p.topic, p.index, false, 0)
		return CleanResult{}, nil
	}
	p.mu.RLock()
	in := cleanInput{
		Batches:    make([]cleanBatch, len(p.batches)),
		Aborted:    slices.Clone(p.aborted),
		FirstDirty: p.firstDirty,
		LSO:        p.lso(),
		Limit:      -1,
		Now:        l.nowMillis(),
		Vals:       vals,
		Active:     make(map[int64]bool, len(p.producers)),
		Horizon:    p.horizon,
	}
	raws := make([][]byte, len(p.batches))
	for i, b := range p.batches {
		in.Batches[i] = cleanBatch{Base: b.Base, Last: b.Last, Size: b.Size, MaxTimestamp: b.MaxTimestamp,
			ProducerID: b.ProducerID, Control: b.Control, Transactional: b.Transactional}
		raws[i] = b.raw
	}
	for pid := range p.producers {
		in.Active[pid] = true
	}
	p.mu.RUnlock()

	// Due? The decision needs no records.
	due, _ := planClean(&in)
	l.metrics.setDirtyRatio(p.topic, p.index, true, due.DirtyRatio)
	p.mu.Lock()
	p.dirtyRatio = due.DirtyRatio
	p.mu.Unlock()
	if !due.Run {
		return CleanResult{}, nil
	}
	stop := 0
	for stop < len(in.Batches) && in.Batches[stop].Last < due.End {
		stop++
	}
	// The plan decodes the stored batches in place, inside one read
	// transaction: no record is copied out of bbolt.
	var plan cleanPlan
	ok := true
	err := l.space.View(func(r storage.Root) error {
		log := partitionLog(r, p)
		for i := range in.Batches[:stop] {
			b := &in.Batches[i]
			raw := raws[i]
			if raw == nil && log != nil {
				raw = log.Get(u64(b.Base))
			}
			if raw == nil {
				ok = false // a batch went meanwhile (retention): next time
				return nil
			}
			b.setRaw(raw)
		}
		var err error
		plan, err = planClean(&in)
		for i := range in.Batches[:stop] {
			in.Batches[i].raw = nil
		}
		return err
	})
	if err != nil || !ok || !plan.Run {
		return CleanResult{}, err
	}
	res := CleanResult{Partitions: 1, BytesCleaned: plan.BytesCleaned}
	// The ops, each up to cleanOpBytes of rewritten batches.
	for start := 0; start < len(plan.Actions) || start == 0; {
		endAt, size := start, 0
		for endAt < len(plan.Actions) && (endAt == start || size < cleanOpBytes) {
			if !plan.Actions[endAt].Drop {
				size += int(in.Batches[plan.Actions[endAt].Index].Size)
			}
			endAt++
		}
		last := endAt >= len(plan.Actions)
		chunk := plan.Actions[start:endAt]
		rewritten := make(map[int][]byte, len(chunk))
		refs := make([]cleanBatch, 0, len(chunk))
		idx := make([]int, 0, len(chunk))
		for _, a := range chunk {
			if !a.Drop {
				refs = append(refs, in.Batches[a.Index])
				idx = append(idx, a.Index)
			}
		}
		chunkRaws := make([][]byte, len(idx))
		for j, i := range idx {
			chunkRaws[j] = raws[i]
		}
		ok := true
		err := l.readBatches2(p, refs, chunkRaws, func(j int, raw []byte) error {
			a := chunk[slices.IndexFunc(chunk, func(a batchAction) bool { return a.Index == idx[j] })]
			nb, err := rewriteBatch(raw, a.Keep)
			rewritten[idx[j]] = nb
			return err
		}, &ok)
		if err != nil || !ok {
			return res, err
		}
		n, removed, op := l.commitClean(p, &in, chunk, rewritten, plan.End, plan.Horizon, last)
		res.RecordsRemoved += n
		res.BytesRemoved += removed
		if op != nil {
			if err := op.Wait(); err != nil {
				return res, err
			}
		}
		start = endAt
		if last {
			break
		}
	}
	l.metrics.cleaned(res, l.cfg.Now())
	p.mu.Lock()
	p.lastClean = l.cfg.Now()
	p.mu.Unlock()
	return res, nil
}

// readBatches2 reads the stored bytes of batches (raws[i] when still in
// memory) and calls fn with each, inside one bbolt read transaction (the
// bytes are valid only during fn). A batch no longer stored sets *ok to
// false and stops.
func (l *Leader) readBatches2(p *partition, batches []cleanBatch, raws [][]byte, fn func(i int, raw []byte) error, ok *bool) error {
	if len(batches) == 0 {
		return nil
	}
	return l.space.View(func(r storage.Root) error {
		log := partitionLog(r, p)
		for i, b := range batches {
			raw := raws[i]
			if raw == nil && log != nil {
				raw = log.Get(u64(b.Base))
			}
			if raw == nil {
				*ok = false
				return nil
			}
			if err := fn(i, raw); err != nil {
				return err
			}
		}
		return nil
	})
}

// partitionLog is p's log bucket (nil: none stored).
func partitionLog(r storage.Root, p *partition) *bbolt.Bucket {
	if root := r.Bucket(bucketPartitions); root != nil {
		if pb := root.Bucket(p.key); pb != nil {
			return pb.Bucket(bucketLog)
		}
	}
	return nil
}

// commitClean changes p's index as chunk says and queues its op; the last
// chunk also stores the end of the clean. It returns the records removed,
// the bytes the log shrank by, and the op (nil: nothing to write).
func (l *Leader) commitClean(p *partition, in *cleanInput, chunk []batchAction, rewritten map[int][]byte, end, horizon int64, last bool) (int, int64, *writeOp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !l.holds(p) {
		return 0, 0, nil
	}
	op := &persistOp{key: p.key}
	removedRecords := 0
	var removedBytes int64
	drop := map[int64]bool{}
	for _, a := range chunk {
		b := in.Batches[a.Index]
		i := p.findBatch(b.Base)
		if i >= len(p.batches) || p.batches[i].Base != b.Base {
			continue // gone meanwhile (retention, DeleteRecords)
		}
		if a.Drop {
			drop[b.Base] = true
			op.dropped = append(op.dropped, b.Base)
			removedBytes += p.batches[i].Size
			if b.Control {
				removedRecords++
			} else {
				removedRecords += b.count()
			}
			continue
		}
		raw := rewritten[a.Index]
		op.addBatch(b.Base, raw)
		removedBytes += p.batches[i].Size - int64(len(raw))
		removedRecords += b.count() - len(a.Keep)
		p.size -= p.batches[i].Size - int64(len(raw))
		p.batches[i].Size = int64(len(raw))
	}
	if len(drop) > 0 {
		p.batches = slices.DeleteFunc(p.batches, func(b batchIndex) bool {
			if drop[b.Base] {
				p.size -= b.Size
				return true
			}
			return false
		})
	}
	// An ABORT marker dropped takes its aborted-index entry along.
	for _, a := range chunk {
		b := in.Batches[a.Index]
		if a.Drop && b.Control && !b.Commit && drop[b.Base] {
			if i := slices.IndexFunc(p.aborted, func(x abortedTxn) bool { return x.LastOffset == b.Last }); i >= 0 {
				p.aborted = slices.Delete(p.aborted, i, i+1)
				op.droppedAborted = append(op.droppedAborted, b.Last)
			}
		}
	}
	if last {
		p.horizon = horizon
		p.firstDirty = max(p.firstDirty, end)
		op.firstDirty = p.firstDirty
	}
	op.logStart = p.logStart
	if len(op.batches) == 0 && len(op.dropped) == 0 && len(op.droppedAborted) == 0 && op.firstDirty == 0 {
		return removedRecords, removedBytes, nil
	}
	w := l.enqueue(op)
	if w.Pos() != 0 && len(op.batches) > 0 {
		// Fetch serves the rewrites from memory until bbolt holds them
		// (partition.applied).
		uc := unappliedClean{pos: w.Pos()}
		for _, nb := range op.batches {
			if i := p.findBatch(nb.base); i < len(p.batches) && p.batches[i].Base == nb.base {
				p.batches[i].raw, p.batches[i].cleanPos = nb.raw, w.Pos()
				uc.bases = append(uc.bases, nb.base)
			}
		}
		p.cleaned = append(p.cleaned, uc)
	}
	return removedRecords, removedBytes, w
}

// controlIsCommit: a stored control batch is a COMMIT marker (its
// record's key is version, type; type 1 is COMMIT, 0 ABORT).
func controlIsCommit(raw []byte) bool {
	commit := false
	_ = eachRecord(raw, func(_ int64, key []byte, _ bool, _ []byte) {
		commit = len(key) >= 4 && binary.BigEndian.Uint16(key[2:]) == 1
	})
	return commit
}

var errBadStoredRecord = errors.New("leaderstub: malformed stored record")

// eachRecord calls fn with each record of a stored batch: its offset, key
// and whether its value is null, and its encoding (length prefix
// included), which is valid only during fn.
func eachRecord(raw []byte, fn func(offset int64, key []byte, valueNull bool, enc []byte)) error {
	h, _, err := parseHeader(raw)
	if err != nil {
		return err
	}
	base := int64(binary.BigEndian.Uint64(raw))
	recs, err := openRecords(raw[batchHeaderLen:], h.Attributes&attrCompressionMask, freeBudget{})
	if err != nil {
		return err
	}
	defer recs.close()
	data := recs.data // uncompressed: the batch's own bytes
	if recs.br != nil {
		if data, err = io.ReadAll(recs); err != nil {
			return err
		}
	}
	for range h.RecordCount {
		// A record: length, attributes, timestamp delta, offset delta,
		// key, value, headers (varints, zigzag); the cleaner reads up to
		// the value's length, once per record of the log, so by hand.
		length, i := zigzag(data, 0)
		if i < 0 || length < 0 || int64(len(data)-i) < length {
			return errBadStoredRecord
		}
		enc, body := data[:i+int(length)], data[i:i+int(length)]
		data = data[i+int(length):]
		_, i = zigzag(body, 1) // after the attributes: timestamp delta
		offDelta, i := zigzag(body, i)
		keyLen, i := zigzag(body, i)
		if i < 0 || keyLen > int64(len(body)-i) {
			return errBadStoredRecord
		}
		var key []byte
		if keyLen >= 0 {
			key, i = body[i:i+int(keyLen)], i+int(keyLen)
		}
		valueLen, i := zigzag(body, i)
		if i < 0 {
			return errBadStoredRecord
		}
		fn(base+offDelta, key, valueLen < 0, enc)
	}
	return nil
}

// zigzag decodes the zigzag varint at b[i:]: its value and the index
// after it (-1: malformed, or i already -1).
func zigzag(b []byte, i int) (int64, int) {
	if i < 0 {
		return 0, -1
	}
	var u uint64
	for shift := uint(0); shift < 64 && i < len(b); shift += 7 {
		c := b[i]
		i++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i
		}
	}
	return 0, -1
}

// rewriteBatch is a stored batch with only the records at keep (offsets,
// ascending), uncompressed: the same base and last offset, producer,
// sequence, timestamps and flags, a new record count, length and CRC.
func rewriteBatch(raw []byte, keep []int64) ([]byte, error) {
	out := make([]byte, batchHeaderLen, len(raw))
	copy(out, raw[:batchHeaderLen])
	n := int32(0)
	err := eachRecord(raw, func(offset int64, _ []byte, _ bool, enc []byte) {
		if _, found := slices.BinarySearch(keep, offset); found {
			out = append(out, enc...)
			n++
		}
	})
	if err != nil {
		return nil, err
	}
	attrs := binary.BigEndian.Uint16(out[offAttributes:]) &^ attrCompressionMask
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(n))
	binary.BigEndian.PutUint32(out[offBatchLength:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crc32c))
	return out, nil
}

// CleanableRatio is a partition's dirty ratio when the log cleaner last
// looked at it (dirty bytes over cleanable bytes); false when this leader
// does not hold the partition or its topic is not compacted.
func (l *Leader) CleanableRatio(topic string, partition int32) (float64, bool) {
	if !l.topicValues(topic).Compact {
		return 0, false
	}
	l.mu.Lock()
	p, ok := l.partitions[string(partitionKey(topic, partition))]
	l.mu.Unlock()
	if !ok {
		return 0, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.dirtyRatio, true
}
