package txnetcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

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

// Reserve is AllocateProducerIDs: the Store is the producer-id blocks of
// every coordinator on etcd (coordinator.ProducerIDBlocks); one pool of a
// process hands the ids out (coordinator.ProducerIDPool). Ids left in a
// block when the process stops are never used (as in Kafka).
func (s *Store) Reserve(ctx context.Context, n int64) (int64, error) {
	return s.AllocateProducerIDs(ctx, n)
}
