package txnetcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrProducerIDsExhausted: the next block would pass the largest producer
// id.
var ErrProducerIDsExhausted = errors.New("txnetcd: producer ids exhausted")

// AllocateProducerIDs reserves the block [first, first+n) of producer ids
// for the caller alone: a compare-and-swap of <prefix>/pid/next from the
// value read to first+n, retried (with the value the failed attempt read)
// until it wins or ctx ends. Every failed attempt means another member's
// won, so the loop makes progress cluster-wide. The counter lives only in
// etcd: no member restart or lost data directory can hand an id out twice.
func (s *Store) AllocateProducerIDs(ctx context.Context, n int64) (first int64, err error) {
	if n <= 0 {
		return 0, fmt.Errorf("txnetcd: producer-id block of %d", n)
	}
	key := s.opts.Layout.PIDNextKey()
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("txnetcd: producer ids: %w", err)
	}
	kvs := resp.Kvs
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		var next, modRev int64
		if len(kvs) > 0 {
			next, err = strconv.ParseInt(string(kvs[0].Value), 10, 64)
			if err != nil || next < 0 {
				return 0, fmt.Errorf("txnetcd: %s holds %q: not a producer id", key, kvs[0].Value)
			}
			modRev = kvs[0].ModRevision
		}
		if next > math.MaxInt64-n {
			return 0, fmt.Errorf("%w: next %d, block %d", ErrProducerIDsExhausted, next, n)
		}
		// ModRevision 0 compares "the key does not exist", so the first
		// allocation of a cluster is a compare-and-swap too.
		txn, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, strconv.FormatInt(next+n, 10))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("txnetcd: producer ids: %w", err)
		}
		if txn.Succeeded {
			return next, nil
		}
		kvs = txn.Responses[0].GetResponseRange().Kvs
	}
}

// EnsureProducerIDsFrom raises <prefix>/pid/next to at least floor (never
// lowers it): for a cluster that takes over from a single coordinator whose
// ids below its high-water mark may have been handed out. It returns the
// counter as it first found it (0: never allocated from): between 1 and
// floor, ids below floor were handed out from etcd too.
func (s *Store) EnsureProducerIDsFrom(ctx context.Context, floor int64) (found int64, err error) {
	for first := true; ; first = false {
		resp, err := s.cli.Get(ctx, s.opts.Layout.PIDNextKey())
		if err != nil {
			return found, fmt.Errorf("txnetcd: producer ids: %w", err)
		}
		var next int64
		if len(resp.Kvs) > 0 {
			if next, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return found, fmt.Errorf("txnetcd: producer ids: %q: %w", resp.Kvs[0].Value, err)
			}
		}
		if first {
			found = next
		}
		if next >= floor {
			return found, nil
		}
		if _, err := s.AllocateProducerIDs(ctx, floor-next); err != nil {
			return found, err
		}
	}
}

// ProducerIDs hands out producer ids one at a time from blocks reserved by
// AllocateProducerIDs, as the coordinator's allocator does from its store's
// high-water mark; here the blocks of one process need not be contiguous.
// Ids left in a block when the process stops are never used (as in Kafka).
type ProducerIDs struct {
	store *Store
	block int64

	mu          sync.Mutex
	next, limit int64
}

// ProducerIDs returns a source that reserves blockSize ids at a time
// (default 1000, Kafka's PRODUCER_ID_BLOCK_SIZE).
func (s *Store) ProducerIDs(blockSize int64) *ProducerIDs {
	if blockSize <= 0 {
		blockSize = 1000
	}
	return &ProducerIDs{store: s, block: blockSize}
}

// NextID returns an id no other caller, in this process or another member,
// has had or will have.
func (a *ProducerIDs) NextID(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.limit {
		first, err := a.store.AllocateProducerIDs(ctx, a.block)
		if err != nil {
			return -1, err
		}
		a.next, a.limit = first, first+a.block
	}
	id := a.next
	a.next++
	return id, nil
}
