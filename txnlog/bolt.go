package txnlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/storage"
)

var (
	bucketTxns = []byte("txns")
	bucketMeta = []byte("meta")
	keyEpoch   = []byte("coordinator_epoch")
	keyPIDHW   = []byte("pid_high_water")
)

// BoltOptions configures OpenBolt.
type BoltOptions struct {
	// UnsafeNoSync skips fsync. It loses acknowledged transactions on a
	// crash: only for benchmarks that measure everything but the disk.
	UnsafeNoSync bool
	Log          zerolog.Logger
}

// BoltStore is the Store whose state lives in bbolt and whose writes go
// through the process log (package storage): a Batch is one log record,
// durable at the log's next group commit, applied to the bbolt buckets
// txns and meta in the background. The space is a file of its own
// (OpenBolt) or the bucket "coordinator" of the process's shared file
// (OpenBoltIn).
type BoltStore struct {
	space *storage.Space
	own   *storage.Store // closed by Close (OpenBolt)

	mu    sync.Mutex
	stats Stats
}

// OpenBolt opens (creating if needed) the store in a file of its own, with
// its log beside it.
func OpenBolt(path string, opts BoltOptions) (*BoltStore, error) {
	st, err := storage.Open(path, storage.Options{NoSync: opts.UnsafeNoSync, Log: opts.Log,
		Kinds:      map[storage.Kind]storage.ApplyFunc{storage.KindTxn: ApplyRecord},
		BatchKinds: map[storage.Kind]storage.BatchApplyFunc{storage.KindTxn: ApplyRecords}})
	if err != nil {
		return nil, fmt.Errorf("txnlog: %w", err)
	}
	if opts.UnsafeNoSync {
		opts.Log.Warn().Str("path", path).Msg("txnlog: fsync disabled (UnsafeNoSync): acknowledged transactions can be lost on a crash")
	}
	s, err := openIn(st, "")
	if err != nil {
		st.Close()
		return nil, err
	}
	s.own = st
	return s, nil
}

// OpenBoltIn opens the store as the space name of a process's shared
// store (which must know KindTxn). Closing it leaves the store open.
func OpenBoltIn(st *storage.Store, name string) (*BoltStore, error) {
	return openIn(st, name)
}

func openIn(st *storage.Store, name string) (*BoltStore, error) {
	space, err := st.Space(name, storage.KindTxn, storage.SpaceOptions{Closed: ErrClosed})
	if err != nil {
		return nil, fmt.Errorf("txnlog: %w", err)
	}
	return &BoltStore{space: space}, nil
}

// Load reads the whole store: every batch made durable so far is applied
// to bbolt first.
func (s *BoltStore) Load() (LoadedState, error) {
	out := LoadedState{Txns: map[string]TxnMetadata{}}
	if err := s.space.Store().Apply(); err != nil {
		return LoadedState{}, fmt.Errorf("txnlog: load: %w", err)
	}
	err := s.space.View(func(r storage.Root) error {
		meta := r.Bucket(bucketMeta)
		if meta != nil {
			if raw := meta.Get(keyEpoch); raw != nil {
				v, err := decodeMeta(raw)
				if err != nil {
					return fmt.Errorf("coordinator epoch: %w", err)
				}
				out.CoordinatorEpoch = int32(v)
			}
			if raw := meta.Get(keyPIDHW); raw != nil {
				v, err := decodeMeta(raw)
				if err != nil {
					return fmt.Errorf("pid high-water mark: %w", err)
				}
				out.ProducerIDHighWater = v
			}
		}
		txns := r.Bucket(bucketTxns)
		if txns == nil {
			return nil
		}
		return txns.ForEach(func(k, v []byte) error {
			m, err := DecodeTxn(v)
			if err != nil {
				return fmt.Errorf("transaction %q: %w", k, err)
			}
			out.Txns[m.TransactionalID] = m
			return nil
		})
	})
	if err != nil {
		return LoadedState{}, fmt.Errorf("txnlog: load: %w", err)
	}
	return out, nil
}

// Submit appends b behind every record appended before it (by any
// space of the process store) and returns its position in the process log
// at once.
func (s *BoltStore) Submit(b Batch) (durable.Pos, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	pos, err := s.space.AppendWith(encodeBatch(b), b.Urgency)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.stats.Batches++
	s.stats.Transitions += uint64(len(b.Puts) + len(b.Deletes))
	s.mu.Unlock()
	return pos, nil
}

// Log is the process log (the store's: shared with every other space of
// it, the leaders' of `txncoord up` among them).
func (s *BoltStore) Log() durable.Log { return s.space.Store() }

// Err is the failure that stopped the process log's writes, nil if none.
func (s *BoltStore) Err() error { return s.space.Err() }

func (b Batch) check() error {
	for _, m := range b.Puts {
		if m.TransactionalID == "" {
			return errors.New("txnlog: transaction without an id")
		}
	}
	return nil
}

// Stats returns the store's counters; Commits are the process log's group
// commits (each one fdatasync), shared with the other spaces.
func (s *BoltStore) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Commits = s.space.Store().Stats().Syncs
	return st
}

// Close waits for the queued batches and refuses more with ErrClosed; a
// store of its own closes its file and log.
func (s *BoltStore) Close() error {
	err := s.space.Close()
	if s.own != nil {
		err = errors.Join(err, s.own.Close())
	}
	return err
}

// Batch record, version 1:
//
//	u8 version (1)
//	uvarint puts, each: uvarint len + EncodeTxn
//	uvarint deletes, each: uvarint len + id
//	i32 coordinator epoch, i64 producer-id high-water mark
const batchRecordVersion = 1

func encodeBatch(b Batch) []byte {
	// One buffer, sized up front: the records' lengths are known before
	// they are encoded.
	size := 1 + binary.MaxVarintLen64*(2+len(b.Deletes)) + 4 + 8
	for _, m := range b.Puts {
		size += binary.MaxVarintLen64 + txnSize(m)
	}
	for _, id := range b.Deletes {
		size += len(id)
	}
	out := make([]byte, 1, size)
	out[0] = batchRecordVersion
	out = binary.AppendUvarint(out, uint64(len(b.Puts)))
	for _, m := range b.Puts {
		out = binary.AppendUvarint(out, uint64(txnSize(m)))
		out = appendTxn(out, m)
	}
	out = binary.AppendUvarint(out, uint64(len(b.Deletes)))
	for _, id := range b.Deletes {
		out = binary.AppendUvarint(out, uint64(len(id)))
		out = append(out, id...)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(b.CoordinatorEpoch))
	return binary.BigEndian.AppendUint64(out, uint64(b.ProducerIDHighWater))
}

// ApplyRecord is the storage codec of KindTxn: it writes one Batch record
// into the space's buckets.
func ApplyRecord(r storage.Root, raw []byte) error {
	return ApplyRecords(r, [][]byte{raw})
}

// ApplyRecords is ApplyRecord for records in log order applied in one
// bbolt transaction (storage.BatchApplyFunc): each transactional id's last
// put or delete is written, once, the last coordinator epoch and the
// highest producer-id high-water mark. Between two applies a transaction
// is usually written four times (two registrations, Prepare, Complete).
// A put is written as the batch holds it (EncodeTxn's bytes): it is split
// from the batch, not decoded and encoded again.
func ApplyRecords(r storage.Root, raws [][]byte) error {
	var merged rawBatch
	// Each id's last put (nil: deleted), in first-seen order; the index
	// is looked up with the record's bytes, so only a new id allocates.
	index := map[string]int{}
	var ids []string
	var final [][]byte
	set := func(id []byte, put []byte) {
		if i, seen := index[string(id)]; seen {
			final[i] = put
			return
		}
		k := string(id)
		index[k] = len(ids)
		ids = append(ids, k)
		final = append(final, put)
	}
	for _, raw := range raws {
		b, err := splitBatch(raw)
		if err != nil {
			return err
		}
		// One record's puts, then its deletes, as they were submitted.
		for _, enc := range b.puts {
			set(txnID(enc), enc)
		}
		for _, id := range b.deletes {
			set(id, nil)
		}
		if b.epoch > 0 {
			merged.epoch = b.epoch
		}
		merged.highWater = max(merged.highWater, b.highWater)
	}
	txns, err := storage.Ensure(r, bucketTxns)
	if err != nil {
		return err
	}
	meta, err := storage.Ensure(r, bucketMeta)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if enc := final[i]; enc != nil {
			err = txns.Put([]byte(id), enc)
		} else {
			err = txns.Delete([]byte(id))
		}
		if err != nil {
			return err
		}
	}
	if merged.epoch > 0 {
		if err := meta.Put(keyEpoch, encodeMeta(int64(merged.epoch))); err != nil {
			return err
		}
	}
	if merged.highWater > 0 {
		cur := int64(0)
		if raw := meta.Get(keyPIDHW); raw != nil {
			v, err := decodeMeta(raw)
			if err != nil {
				return err
			}
			cur = v
		}
		if merged.highWater > cur {
			if err := meta.Put(keyPIDHW, encodeMeta(merged.highWater)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawBatch is a Batch record split into its parts, the puts still encoded
// (EncodeTxn).
type rawBatch struct {
	puts, deletes [][]byte
	epoch         int32
	highWater     int64
}

// splitBatch splits a batch record as decodeBatch reads it, checking each
// put's record version and transactional id (txnID) but not decoding the
// rest: Load decodes what the applier wrote.
func splitBatch(raw []byte) (rawBatch, error) {
	var b rawBatch
	if len(raw) == 0 {
		return b, ErrCorrupt
	}
	if raw[0] != batchRecordVersion {
		return b, fmt.Errorf("%w: batch version %d", ErrUnknownVersion, raw[0])
	}
	rest := raw[1:]
	chunk := func() ([]byte, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return nil, false
		}
		v := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return v, true
	}
	count := func() (int, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)) {
			return 0, false
		}
		rest = rest[k:]
		return int(n), true
	}
	puts, ok := count()
	if !ok {
		return b, ErrCorrupt
	}
	b.puts = make([][]byte, 0, puts) // count bounds it by the bytes left
	for range puts {
		v, ok := chunk()
		if !ok {
			return b, ErrCorrupt
		}
		if len(v) == 0 {
			return b, fmt.Errorf("%w: empty", ErrCorrupt)
		}
		if v[0] != txnRecordVersion && v[0] != txnRecordVersionCompleting {
			return b, fmt.Errorf("%w %d (this binary reads versions %d and %d)", ErrUnknownVersion, v[0], txnRecordVersion, txnRecordVersionCompleting)
		}
		if id := txnID(v); len(id) == 0 {
			return b, fmt.Errorf("%w: transaction without an id", ErrCorrupt)
		}
		b.puts = append(b.puts, v)
	}
	dels, ok := count()
	if !ok {
		return b, ErrCorrupt
	}
	for range dels {
		v, ok := chunk()
		if !ok {
			return b, ErrCorrupt
		}
		b.deletes = append(b.deletes, v)
	}
	if len(rest) != 12 {
		return b, ErrCorrupt
	}
	b.epoch = int32(binary.BigEndian.Uint32(rest))
	b.highWater = int64(binary.BigEndian.Uint64(rest[4:]))
	return b, nil
}

// txnID is the transactional id of an encoded transaction (EncodeTxn: the
// version byte, then the id with its u16 length), nil if the record is too
// short to hold one.
func txnID(enc []byte) []byte {
	if len(enc) < 3 {
		return nil
	}
	n := int(binary.BigEndian.Uint16(enc[1:]))
	if len(enc) < 3+n {
		return nil
	}
	return enc[3 : 3+n]
}
