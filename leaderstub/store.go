package leaderstub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/storage"
)

// The bbolt layout of a leader, at the top level of its own file
// (DataDir/leader-<id>.db) or inside its bucket of a file shared by the
// nodes of `txncoord up` (Config.Log):
//
//	partitions/<topic>\x00<partition>/
//	    log/      base offset (8 bytes BE) → the batch as stored and fetched
//	    producers/ producer id (8 bytes BE) → producerEntry.marshal()
//	    aborted/  marker offset (8 bytes BE) → AbortedTxn (34 bytes, Kafka's .txnindex entry)
//	    meta/     "log_start" → int64, "first_dirty" → int64 (the log cleaner's)
var (
	bucketPartitions = []byte("partitions")
	bucketLog        = []byte("log")
	bucketProducers  = []byte("producers")
	bucketAborted    = []byte("aborted")
	bucketMeta       = []byte("meta")
	keyLogStart      = []byte("log_start")
	keyFirstDirty    = []byte("first_dirty")
)

func partitionKey(topic string, partition int32) []byte {
	return []byte(topic + "\x00" + strconv.Itoa(int(partition)))
}

func parsePartitionKey(k []byte) (string, int32, error) {
	topic, p, ok := strings.Cut(string(k), "\x00")
	n, err := strconv.Atoi(p)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("leaderstub: bad partition bucket %q", k)
	}
	return topic, int32(n), nil
}

func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// partitionBuckets opens (creating) the sub-buckets of one partition.
func partitionBuckets(tx storage.Root, key []byte) (log, producers, aborted, meta *bbolt.Bucket, err error) {
	root, err := storage.Ensure(tx, bucketPartitions)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	pb, err := storage.Ensure(root, key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	get := func(name []byte) *bbolt.Bucket {
		if err != nil {
			return nil
		}
		var b *bbolt.Bucket
		b, err = storage.Ensure(pb, name)
		return b
	}
	log, producers, aborted, meta = get(bucketLog), get(bucketProducers), get(bucketAborted), get(bucketMeta)
	return log, producers, aborted, meta, err
}

// writeOp is one appended change of this leader: Wait blocks until it is
// durable or failed, Refused is its error if the log refused it at once
// (never appended).
type writeOp = storage.Write

var errStoreClosed = errors.New("leaderstub: store closed")

// enqueue appends a change to the process log behind every change appended
// before it; once it is fsync'd, the high watermark of the partition the
// op names (advanceOnDurable) moves. Callers enqueue while holding the
// partition lock, so a partition's changes are in the log in offset order.
// After a failed write the whole process's log stops (fail-stop): memory is
// then ahead of disk, and every later write is refused
// (KAFKA_STORAGE_ERROR), as Kafka takes a failed log dir offline.
func (l *Leader) enqueue(op *persistOp) *writeOp { return l.submit(op, durable.Gather) }

// enqueueLazy is enqueue for an op nobody waits for now
// (storage.Space.AppendLazy).
func (l *Leader) enqueueLazy(op *persistOp) *writeOp { return l.submit(op, durable.Lazy) }

func (l *Leader) submit(op *persistOp, u durable.Urgency) *writeOp {
	var onDurable storage.Durable
	if op.hw != nil {
		onDurable = op
	}
	l.space.SubmitTo(&op.w, op.encode(), onDurable, u)
	return &op.w
}

// advanceOnDurable makes the op, once durable, move p's high watermark to
// end and wake the leader's waiters (Durable).
func (o *persistOp) advanceOnDurable(l *Leader, p *partition, end int64) {
	o.l, o.hw, o.hwEnd = l, p, end
}

// Durable is the op's storage.Durable (advanceOnDurable).
func (o *persistOp) Durable() {
	o.hw.advanceHW(o.hwEnd)
	o.l.notify()
}

// persistOp record, version 1 (big endian; n is a uvarint):
//
//	u8 version (1)
//	n + partition key
//	n batches, each: i64 base offset, n + the batch
//	u8 has entry [, n + producerEntry.marshal()]
//	u8 has aborted [, 34 bytes AbortedTxn]
//	n dropped base offsets (i64 each), n dropped aborted keys (i64 each)
//	i64 log start
//	n expired producer ids (i64 each)
//	[i64 first dirty offset, when a clean stores it]
//
// The last field is optional, so records written before the log cleaner
// decode as they did.
const persistOpVersion = 1

func (o *persistOp) encode() []byte {
	size := 64 + len(o.key) + 8*(len(o.dropped)+len(o.droppedAborted)+len(o.expired))
	for _, b := range o.batches {
		size += 16 + len(b.raw)
	}
	if o.entry != nil {
		size += 8 + o.entry.size()
	}
	size += len(o.entryRaw)
	if o.aborted != nil {
		size += 34
	}
	out := make([]byte, 0, size)
	out = append(out, persistOpVersion)
	out = appendBytes(out, o.key)
	out = binary.AppendUvarint(out, uint64(len(o.batches)))
	for _, b := range o.batches {
		out = binary.BigEndian.AppendUint64(out, uint64(b.base))
		out = appendBytes(out, b.raw)
	}
	if o.entry != nil {
		out = append(out, 1)
		out = binary.AppendUvarint(out, uint64(o.entry.size()))
		out = o.entry.appendTo(out)
	} else if o.entryRaw != nil {
		out = append(out, 1)
		out = appendBytes(out, o.entryRaw)
	} else {
		out = append(out, 0)
	}
	if o.aborted != nil {
		out = append(out, 1)
		out = append(out, o.aborted.marshal()...)
	} else {
		out = append(out, 0)
	}
	out = appendInt64s(out, o.dropped)
	out = appendInt64s(out, o.droppedAborted)
	out = binary.BigEndian.AppendUint64(out, uint64(o.logStart))
	out = appendInt64s(out, o.expired)
	if o.firstDirty > 0 {
		out = binary.BigEndian.AppendUint64(out, uint64(o.firstDirty))
	}
	return out
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendInt64s(b []byte, vs []int64) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

var errBadRecord = errors.New("leaderstub: corrupt log record")

func readInt64s(r *recordio.Reader) []int64 {
	n := r.Uvarint()
	var out []int64
	for range n {
		out = append(out, r.Int64())
	}
	return out
}

func decodePersistOp(raw []byte) (*persistOp, error) {
	r := recordio.NewReader(raw, errBadRecord)
	if v := r.Take(1); v == nil || v[0] != persistOpVersion {
		return nil, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	o := &persistOp{key: r.Bytes()}
	for n := r.Uvarint(); n > 0 && r.Err() == nil; n-- {
		base := r.Int64()
		o.addBatch(base, r.Bytes())
	}
	if f := r.Flag(); f {
		// Kept as the record holds it: the applier writes those bytes.
		b := r.Bytes()
		if err := checkEntry(b); err != nil {
			r.FailWith(err)
		}
		o.entryRaw = b
	}
	if f := r.Flag(); f {
		a, ok := unmarshalAborted(r.Take(34))
		if !ok {
			r.Fail()
		}
		o.aborted = &a
	}
	o.dropped = readInt64s(r)
	o.droppedAborted = readInt64s(r)
	o.logStart = r.Int64()
	o.expired = readInt64s(r)
	if r.Err() == nil && r.Len() == 8 {
		o.firstDirty = r.Int64()
	}
	if r.Err() == nil && r.Len() != 0 {
		r.Fail()
	}
	if r.Err() != nil {
		return nil, r.Err()
	}
	return o, nil
}

// ApplyRecords is ApplyRecord for records in log order applied in one
// bbolt transaction (storage.BatchApplyFunc): a producer's entry is
// written only by the last change of the batch that writes or deletes it
// on its partition (a transaction's data and then its marker each carry
// the entry). Everything else is written as ApplyRecord writes it.
func ApplyRecords(root storage.Root, raws [][]byte) error {
	if len(raws) == 1 {
		return ApplyRecord(root, raws[0])
	}
	ops := make([]*persistOp, len(raws)) // nil: another kind of record
	for i, raw := range raws {
		if len(raw) > 0 && (raw[0] == dropTopicVersion || raw[0] == shareStateVersion) {
			continue
		}
		o, err := decodePersistOp(raw)
		if err != nil {
			return err
		}
		ops[i] = o
	}
	type producerKey struct {
		partition string
		pid       int64
	}
	later := map[producerKey]bool{} // written or deleted by a later op
	for i := len(ops) - 1; i >= 0; i-- {
		o := ops[i]
		if o == nil {
			continue
		}
		if o.entryRaw != nil {
			k := producerKey{string(o.key), entryProducerID(o.entryRaw)}
			if later[k] {
				o.entryRaw = nil
			} else {
				later[k] = true
			}
		}
		for _, pid := range o.expired {
			later[producerKey{string(o.key), pid}] = true
		}
	}
	for i, raw := range raws {
		var err error
		if o := ops[i]; o != nil {
			err = o.apply(root)
		} else {
			err = ApplyRecord(root, raw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ApplyRecord is the storage codec of KindLeader: it writes one leader
// change into the leader's buckets.
func ApplyRecord(root storage.Root, raw []byte) error {
	if len(raw) > 0 && raw[0] == dropTopicVersion {
		return applyDropTopic(root, raw)
	}
	if len(raw) > 0 && raw[0] == shareStateVersion {
		return applyShareState(root, raw)
	}
	o, err := decodePersistOp(raw)
	if err != nil {
		return err
	}
	return o.apply(root)
}
