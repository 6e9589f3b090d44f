package txnlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/groupcommit"
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

// BoltStore is the bbolt Store. Its writes go through a groupcommit
// space: every Apply or Submit queued while the previous commit is being
// fsync'd shares the next one (hashicorp raft's group commit, no timer).
// The space is a file of its own (OpenBolt) or, in `txncoord up`, one
// bucket of the file the embedded leaders share (OpenBoltIn), so one fsync
// round carries the coordinator's and the leaders' writes.
type BoltStore struct {
	space *groupcommit.Space

	mu    sync.Mutex
	stats Stats
}

// OpenBolt opens (creating if needed) the store in a file of its own.
func OpenBolt(path string, opts BoltOptions) (*BoltStore, error) {
	s := &BoltStore{}
	space, err := groupcommit.OpenSpace(path, groupcommit.Options{NoSync: opts.UnsafeNoSync, OpenTimeout: opts.OpenTimeout}, s.spaceOptions())
	if err != nil {
		return nil, fmt.Errorf("txnlog: %w", err)
	}
	if opts.UnsafeNoSync {
		opts.Log.Warn().Str("path", path).Msg("txnlog: fsync disabled (UnsafeNoSync): acknowledged transactions can be lost on a crash")
	}
	return s.init(space)
}

// OpenBoltIn opens (creating if needed) the store as the space name of a
// shared log. Closing the store leaves the log open.
func OpenBoltIn(l *groupcommit.Log, name string) (*BoltStore, error) {
	s := &BoltStore{}
	space, err := l.Space(name, s.spaceOptions())
	if err != nil {
		return nil, fmt.Errorf("txnlog: %w", err)
	}
	return s.init(space)
}

func (s *BoltStore) spaceOptions() groupcommit.SpaceOptions {
	return groupcommit.SpaceOptions{Closed: ErrClosed, OnCommit: func(int) {
		s.mu.Lock()
		s.stats.Commits++
		s.mu.Unlock()
	}}
}

func (s *BoltStore) init(space *groupcommit.Space) (*BoltStore, error) {
	s.space = space
	if err := <-space.Submit(func(r groupcommit.Root) error {
		if _, err := r.CreateBucketIfNotExists(bucketTxns); err != nil {
			return err
		}
		_, err := r.CreateBucketIfNotExists(bucketMeta)
		return err
	}, nil); err != nil {
		space.Close()
		return nil, fmt.Errorf("txnlog: init: %w", err)
	}
	return s, nil
}

// Load reads the whole store.
func (s *BoltStore) Load() (LoadedState, error) {
	out := LoadedState{Txns: map[string]TxnMetadata{}}
	err := s.space.View(func(r groupcommit.Root) error {
		meta := r.Bucket(bucketMeta)
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
		return r.Bucket(bucketTxns).ForEach(func(k, v []byte) error {
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
	select {
	case err := <-s.Submit(b):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Submit queues b behind every batch queued before it and returns at once;
// the channel gets nil once b is durable, or its error. Callers that need
// their writes committed in order (one transactional id's pipelined
// transitions) call it in that order, without waiting for the first write
// to be durable before queueing the next: both usually share one Update.
// A batch that fails fails alone (groupcommit retries the others).
func (s *BoltStore) Submit(b Batch) <-chan error {
	return s.SubmitAfter(nil, b).Done()
}

// Space is the groupcommit space the store writes in.
func (s *BoltStore) Space() *groupcommit.Space { return s.space }

// SubmitAfter is Submit for a batch that must never be durable without the
// writes of after (groupcommit.Space.SubmitAfter): it fails, unwritten,
// if one of them fails.
func (s *BoltStore) SubmitAfter(after []groupcommit.Ticket, b Batch) groupcommit.Ticket {
	return s.space.SubmitAfter(after, func(r groupcommit.Root) error { return writeBatch(r, b) }, func() {
		s.mu.Lock()
		s.stats.Batches++
		s.stats.Transitions += uint64(len(b.Puts) + len(b.Deletes))
		s.mu.Unlock()
	})
}

func writeBatch(r groupcommit.Root, b Batch) error {
	txns := r.Bucket(bucketTxns)
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
	meta := r.Bucket(bucketMeta)
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

// Stats returns the store's counters.
func (s *BoltStore) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close commits the batches already queued, then refuses more with
// ErrClosed; a store of its own closes its file.
func (s *BoltStore) Close() error { return s.space.Close() }
