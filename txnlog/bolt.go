package txnlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
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
	// OpenTimeout bounds waiting for the file lock (default 5 s), so a
	// second process on the same directory fails instead of hanging.
	OpenTimeout time.Duration
	Log         zerolog.Logger
}

// BoltStore is the bbolt Store. One writer goroutine owns every write: it
// takes all pending Apply calls, commits them in one Update (one fsync
// round), then answers each caller. There is no timer: a lone Apply is
// committed at once; Applies that arrive during an fsync wait for the next
// Update and share it (hashicorp raft's group commit).
type BoltStore struct {
	db  *bolt.DB
	log zerolog.Logger

	requests chan *applyReq
	stop     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	stats  Stats
	closed bool

	// submitMu orders Submit against Close: every request queued before
	// Close is answered (committed, or ErrClosed by failQueued).
	submitMu       sync.RWMutex
	submitsRefused bool
}

type applyReq struct {
	batch Batch
	done  chan error
}

// OpenBolt opens (creating if needed) the store at path.
func OpenBolt(path string, opts BoltOptions) (*BoltStore, error) {
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = 5 * time.Second
	}
	// NoFreelistSync: the freelist is not written at each commit (one
	// page less to write per group commit) but rebuilt by a scan at open.
	// Committed data is as durable as before: the data pages and the meta
	// page are still fdatasync'd in order. The hashmap freelist keeps
	// allocation cheap as the file grows.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.OpenTimeout, NoSync: opts.UnsafeNoSync,
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("txnlog: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketTxns); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketMeta)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("txnlog: init %s: %w", path, err)
	}
	if opts.UnsafeNoSync {
		opts.Log.Warn().Str("path", path).Msg("txnlog: fsync disabled (UnsafeNoSync): acknowledged transactions can be lost on a crash")
	}
	s := &BoltStore{
		db:       db,
		log:      opts.Log,
		requests: make(chan *applyReq, 1024),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go s.writeLoop()
	return s, nil
}

// Load reads the whole store.
func (s *BoltStore) Load() (LoadedState, error) {
	out := LoadedState{Txns: map[string]TxnMetadata{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
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
		return tx.Bucket(bucketTxns).ForEach(func(k, v []byte) error {
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

// Apply queues b for the writer and waits until it is durable. If ctx ends
// first, Apply returns ctx's error, but the batch may still be committed.
func (s *BoltStore) Apply(ctx context.Context, b Batch) error {
	r := &applyReq{batch: b, done: make(chan error, 1)}
	select {
	case s.requests <- r:
	case <-s.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-s.done:
		// The writer stopped; it may have answered r just before.
		select {
		case err := <-r.done:
			return err
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Submit queues b behind every batch queued before it and returns at once;
// the channel gets nil once b is durable, or its error. Callers that need
// their writes committed in order (one transactional id's pipelined
// transitions) call it in that order, without waiting for the first write
// to be durable before queueing the next: both usually share one Update.
func (s *BoltStore) Submit(b Batch) <-chan error {
	r := &applyReq{batch: b, done: make(chan error, 1)}
	s.submitMu.RLock()
	defer s.submitMu.RUnlock()
	if s.submitsRefused {
		r.done <- ErrClosed
		return r.done
	}
	s.requests <- r
	return r.done
}

func (s *BoltStore) writeLoop() {
	defer close(s.done)
	var pending []*applyReq
	for {
		select {
		case r := <-s.requests:
			pending = append(pending[:0], r)
		case <-s.stop:
			s.failQueued()
			return
		}
		// Drain whatever else is waiting: these arrived while the last
		// Update was being fsync'd and share the next one.
	drain:
		for {
			select {
			case r := <-s.requests:
				pending = append(pending, r)
			default:
				break drain
			}
		}
		s.commit(pending)
	}
}

// commit writes every batch of pending in one Update. If the Update fails
// as a whole, each batch is retried alone, so one bad batch cannot fail the
// others that happened to share its Update.
func (s *BoltStore) commit(pending []*applyReq) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range pending {
			if err := writeBatch(tx, r.batch); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(pending) == 1 {
		s.count(pending, err)
		for _, r := range pending {
			r.done <- err
		}
		return
	}
	s.log.Warn().Err(err).Int("batches", len(pending)).Msg("txnlog: group commit failed, retrying batches one by one")
	for _, r := range pending {
		s.commit([]*applyReq{r})
	}
}

func (s *BoltStore) count(pending []*applyReq, err error) {
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Commits++
	for _, r := range pending {
		s.stats.Batches++
		s.stats.Transitions += uint64(len(r.batch.Puts) + len(r.batch.Deletes))
	}
}

func writeBatch(tx *bolt.Tx, b Batch) error {
	txns := tx.Bucket(bucketTxns)
	for _, m := range b.Puts {
		if m.TransactionalID == "" {
			return errors.New("txnlog: transaction without an id")
		}
		if err := txns.Put([]byte(m.TransactionalID), EncodeTxn(m)); err != nil {
			return err
		}
	}
	for _, id := range b.Deletes {
		if err := txns.Delete([]byte(id)); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if b.CoordinatorEpoch > 0 {
		if err := meta.Put(keyEpoch, encodeMeta(int64(b.CoordinatorEpoch))); err != nil {
			return err
		}
	}
	if b.ProducerIDHighWater > 0 {
		cur := int64(0)
		if raw := meta.Get(keyPIDHW); raw != nil {
			v, err := decodeMeta(raw)
			if err != nil {
				return err
			}
			cur = v
		}
		if b.ProducerIDHighWater > cur {
			if err := meta.Put(keyPIDHW, encodeMeta(b.ProducerIDHighWater)); err != nil {
				return err
			}
		}
	}
	return nil
}

// failQueued answers every queued request with ErrClosed.
func (s *BoltStore) failQueued() {
	for {
		select {
		case r := <-s.requests:
			r.done <- ErrClosed
		default:
			return
		}
	}
}

// Stats returns the store's counters.
func (s *BoltStore) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close stops the writer (after its current Update) and closes the file.
// Applies still queued fail with ErrClosed.
func (s *BoltStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.submitMu.Lock()
	s.submitsRefused = true
	s.submitMu.Unlock()
	close(s.stop)
	<-s.done
	return s.db.Close()
}
