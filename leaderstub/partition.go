package leaderstub

import (
	"encoding/binary"
	"sort"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wal"
)

// batchIndex is the in-memory index entry of one stored batch; the bytes
// live in bbolt and are read on Fetch, except while the batch is durable
// in the process log but not yet applied to bbolt (raw).
type batchIndex struct {
	Base, Last    int64
	Size          int64
	MaxTimestamp  int64
	ProducerID    int64
	Control       bool
	Transactional bool
	// raw is the stored batch until the process log's applier has
	// written it to bbolt (keepRaw); Fetch reads it from bbolt after.
	raw []byte
	// cleanPos, when set, is the log position of the log cleaner's op
	// that rewrote this batch: raw holds the rewrite until bbolt does.
	cleanPos wal.Pos
}

// abortedTxn is one entry of the aborted-transaction index, Kafka's
// AbortedTxn: version 0, pid, first offset, last offset (the marker), and the
// last stable offset when it completed.
type abortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

func (a abortedTxn) marshal() []byte {
	b := make([]byte, 0, 34)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(a.LastStableOffset))
	return b
}

func unmarshalAborted(b []byte) (abortedTxn, bool) {
	if len(b) != 34 {
		return abortedTxn{}, false
	}
	return abortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, true
}

// unreplicatedTxn is a transaction whose marker is appended but not yet
// durable: it keeps holding the LSO back until the high watermark passes
// its marker (Kafka's "unreplicated" transactions), so read_committed never
// sees a transaction's records before its outcome is on disk.
type unreplicatedTxn struct {
	FirstOffset, MarkerOffset int64
}

// partition is one partition this leader owns. Offsets are assigned in
// memory under mu; the high watermark only covers durable batches.
type partition struct {
	topic string
	index int32
	key   []byte

	mu           sync.RWMutex
	logStart     int64
	nextOffset   int64 // log end offset, in memory
	hw           int64 // end of the durable log: what Fetch may read
	batches      []batchIndex
	size         int64
	producers    map[int64]producerEntry
	open         map[int64]int64 // pid → first offset of its open transaction
	aborted      []abortedTxn    // by marker offset
	unreplicated []unreplicatedTxn

	// firstDirty is where the log cleaner's last clean ended: the batches
	// from it on are dirty (cleaner_run.go). lastClean is when it ran.
	firstDirty int64
	lastClean  time.Time
	dirtyRatio float64 // when the cleaner last looked (CleanableRatio)
	// horizon is when a tombstone or marker the last clean kept for its
	// age may go (-1: none; 0 at recovery, so that the first clean after
	// a restart finds them).
	horizon int64

	// held is, per producer, the newest of its batches held back until
	// the producer's previous transaction here is closed by a marker
	// (awaitsPreviousMarker), or queued behind such a batch: every later
	// batch of that producer queues behind it, so the producer's batches
	// are appended in the order they arrived (00_produce.go).
	held map[int64]*heldBatch
	// markerApplied is closed and cleared when a marker is applied; nil
	// until a held batch waits on it (nextMarker).
	markerApplied chan struct{}
	// unapplied are this partition's appends not yet applied to bbolt,
	// in log order: their batches keep their bytes (batchIndex.raw).
	unapplied []unappliedAppend
	// cleaned are the log cleaner's ops not yet applied to bbolt, in log
	// order, with the batches they rewrote (batchIndex.cleanPos).
	cleaned []unappliedClean
}

// unappliedClean is one op of the log cleaner at log position pos.
type unappliedClean struct {
	pos   wal.Pos
	bases []int64
}

// unappliedAppend is one append whose batches end before end, at log
// position pos.
type unappliedAppend struct {
	pos wal.Pos
	end int64
}

// keepRaw notes that the batches appended below end keep their bytes in
// memory until the process log is applied up to pos. The caller holds mu.
func (p *partition) keepRaw(pos wal.Pos, end int64) {
	p.unapplied = append(p.unapplied, unappliedAppend{pos: pos, end: end})
}

// applied drops the bytes of the batches bbolt now holds (the log is
// applied up to pos).
func (p *partition) applied(pos wal.Pos) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := 0
	for c < len(p.cleaned) && p.cleaned[c].pos <= pos {
		for _, base := range p.cleaned[c].bases {
			if i := p.findBatch(base); i < len(p.batches) && p.batches[i].Base == base && p.batches[i].cleanPos == p.cleaned[c].pos {
				p.batches[i].raw, p.batches[i].cleanPos = nil, 0
			}
		}
		c++
	}
	p.cleaned = append(p.cleaned[:0], p.cleaned[c:]...)
	n := 0
	end := int64(-1)
	for n < len(p.unapplied) && p.unapplied[n].pos <= pos {
		end = p.unapplied[n].end
		n++
	}
	if n == 0 {
		return
	}
	p.unapplied = append(p.unapplied[:0], p.unapplied[n:]...)
	for i := len(p.batches) - 1; i >= 0; i-- {
		if p.batches[i].Base >= end {
			continue
		}
		if p.batches[i].raw == nil {
			break // and so are all before it
		}
		if p.batches[i].cleanPos > pos {
			continue // a rewrite bbolt does not hold yet
		}
		p.batches[i].raw, p.batches[i].cleanPos = nil, 0
	}
}

// heldBatch is one held-back produce batch (partition.held).
type heldBatch struct {
	prev <-chan struct{} // done of the producer's previous held batch, nil if none
	done chan struct{}   // closed once this batch is appended or refused
}

func newPartition(topic string, index int32) *partition {
	return &partition{topic: topic, index: index, key: partitionKey(topic, index),
		producers: map[int64]producerEntry{}, open: map[int64]int64{}, held: map[int64]*heldBatch{}}
}

// nextMarker returns a channel that is closed when the next marker is
// applied to this partition. The caller holds mu and reads the state it
// waits on under the same lock, so no marker can slip in between.
func (p *partition) nextMarker() <-chan struct{} {
	if p.markerApplied == nil {
		p.markerApplied = make(chan struct{})
	}
	return p.markerApplied
}

// wakeMarkerWaiters wakes the held batches waiting for a marker;
// writeMarker calls it under mu (write) once the marker changed the producer
// state and was queued for the group commit.
func (p *partition) wakeMarkerWaiters() {
	if p.markerApplied != nil {
		close(p.markerApplied)
		p.markerApplied = nil
	}
}

func (p *partition) entry(pid int64) producerEntry {
	if e, ok := p.producers[pid]; ok {
		return e
	}
	return emptyEntry(pid)
}

func (p *partition) setEntry(e producerEntry) {
	p.producers[e.ProducerID] = e
	if e.txnOpen() {
		p.open[e.ProducerID] = e.TxnFirstOffset
	} else {
		delete(p.open, e.ProducerID)
	}
}

// firstUnstable is the first offset of the earliest open (or not yet
// durably completed) transaction, or -1.
func (p *partition) firstUnstable(exceptPID int64) int64 {
	first := int64(-1)
	for pid, off := range p.open {
		if pid != exceptPID && (first < 0 || off < first) {
			first = off
		}
	}
	return first
}

// lso is the last stable offset: min(first unstable offset, high watermark).
func (p *partition) lso() int64 {
	lso := p.hw
	if f := p.firstUnstable(-1); f >= 0 && f < lso {
		lso = f
	}
	for _, u := range p.unreplicated {
		if u.MarkerOffset >= p.hw && u.FirstOffset < lso {
			lso = u.FirstOffset
		}
	}
	return lso
}

// advanceHW runs when an op is durable.
func (p *partition) advanceHW(end int64) {
	p.mu.Lock()
	if end > p.hw {
		p.hw = end
	}
	kept := p.unreplicated[:0]
	for _, u := range p.unreplicated {
		if u.MarkerOffset >= p.hw {
			kept = append(kept, u)
		}
	}
	p.unreplicated = kept
	p.mu.Unlock()
}

// appendIndex records a new batch at the log end.
func (p *partition) appendIndex(b batchIndex) {
	p.batches = append(p.batches, b)
	p.size += b.Size
	p.nextOffset = b.Last + 1
}

// findBatch is the index of the first batch whose last offset ≥ off.
func (p *partition) findBatch(off int64) int {
	return sort.Search(len(p.batches), func(i int) bool { return p.batches[i].Last >= off })
}

// persistOp is the bbolt side of one append: batches, the producer entry,
// an aborted-index entry, and retention deletions.
type persistOp struct {
	key            []byte
	batches        []opBatch
	entry          *producerEntry
	entryRaw       []byte // the entry's record in an op decoded from the log (entry nil): written as it is
	aborted        *abortedTxn
	dropped        []int64
	droppedAborted []int64
	logStart       int64
	expired        []int64 // producer ids forgotten (expire.go)
	firstDirty     int64   // the end of a clean, stored when > 0 (cleaner_run.go)
	// first holds batches' first element: most ops (a Produce's, a
	// marker's) carry one batch, which then costs no allocation of its own.
	first [1]opBatch
	// ownEntry is entry's storage when the op makes the entry, w the op's
	// write once enqueued, and l, hw, hwEnd what runs once it is durable
	// (advanceOnDurable): all in the op, so that enqueueing a Produce or a
	// marker allocates the op and its record, nothing else.
	ownEntry producerEntry
	w        storage.Write
	l        *Leader
	hw       *partition
	hwEnd    int64
}

// addBatch appends one batch to the op.
func (o *persistOp) addBatch(base int64, raw []byte) {
	if o.batches == nil {
		o.batches = o.first[:0]
	}
	o.batches = append(o.batches, opBatch{base: base, raw: raw})
}

// opBatch is one batch of a persistOp, at its base offset.
type opBatch struct {
	base int64
	raw  []byte
}

func (o *persistOp) apply(r storage.Root) error {
	log, producers, aborted, meta, err := partitionBuckets(r, o.key)
	if err != nil {
		return err
	}
	for _, b := range o.batches {
		if err := log.Put(u64(b.base), b.raw); err != nil {
			return err
		}
	}
	if o.entry != nil {
		if err := producers.Put(u64(o.entry.ProducerID), o.entry.marshal()); err != nil {
			return err
		}
	} else if o.entryRaw != nil {
		if err := producers.Put(u64(entryProducerID(o.entryRaw)), o.entryRaw); err != nil {
			return err
		}
	}
	if o.aborted != nil {
		if err := aborted.Put(u64(o.aborted.LastOffset), o.aborted.marshal()); err != nil {
			return err
		}
	}
	for _, pid := range o.expired {
		if err := producers.Delete(u64(pid)); err != nil {
			return err
		}
	}
	for _, base := range o.dropped {
		if err := log.Delete(u64(base)); err != nil {
			return err
		}
	}
	for _, k := range o.droppedAborted {
		if err := aborted.Delete(u64(k)); err != nil {
			return err
		}
	}
	if o.firstDirty > 0 {
		if err := meta.Put(keyFirstDirty, u64(o.firstDirty)); err != nil {
			return err
		}
	}
	// The log start only moves forward: by retention (dropped batches)
	// or by DeleteRecords, which may move it into a batch and drop none.
	// Ops that leave it alone carry the current one or 0 (expiry).
	// Read the stored one only for an op that may move it.
	if len(o.dropped) == 0 && o.logStart <= 0 {
		return nil
	}
	if cur := meta.Get(keyLogStart); len(cur) != 8 || o.logStart > int64(binary.BigEndian.Uint64(cur)) {
		return meta.Put(keyLogStart, u64(o.logStart))
	}
	return nil
}

// loadPartition rebuilds a partition from its buckets: exact recovery of
// the log, the producer entries (epochs, sequences, open transactions) and
// the aborted index. Everything stored was durable, so hw = log end.
func loadPartition(topic string, index int32, pb *bbolt.Bucket) (*partition, error) {
	p := newPartition(topic, index)
	storedStart := false
	if meta := pb.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keyLogStart); len(v) == 8 {
			p.logStart = int64(binary.BigEndian.Uint64(v))
			storedStart = true
		}
		if v := meta.Get(keyFirstDirty); len(v) == 8 {
			p.firstDirty = int64(binary.BigEndian.Uint64(v))
		}
	}
	p.nextOffset = p.logStart
	if log := pb.Bucket(bucketLog); log != nil {
		err := log.ForEach(func(k, v []byte) error {
			h, n, err := parseHeader(v)
			if err != nil {
				return err
			}
			base := int64(binary.BigEndian.Uint64(k))
			p.appendIndex(batchIndex{Base: base, Last: base + int64(h.LastOffsetDelta), Size: int64(n),
				MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID, Control: h.control(), Transactional: h.transactional()})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(p.batches) > 0 && !storedStart {
		p.logStart = p.batches[0].Base
	}
	// A stored start is kept as it is: DeleteRecords may have left it
	// inside the first batch, and the log cleaner may have removed the
	// batches at it (the log start stays, as Kafka's first segment keeps
	// its base offset when cleaned). Retention stores the start it moves.
	p.hw = p.nextOffset
	if prods := pb.Bucket(bucketProducers); prods != nil {
		err := prods.ForEach(func(_, v []byte) error {
			e, err := unmarshalEntry(v)
			if err != nil {
				return err
			}
			p.setEntry(e)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if ab := pb.Bucket(bucketAborted); ab != nil {
		ab.ForEach(func(_, v []byte) error {
			if a, ok := unmarshalAborted(v); ok {
				p.aborted = append(p.aborted, a)
			}
			return nil
		})
	}
	return p, nil
}
