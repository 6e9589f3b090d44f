package txnetcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/txnlog"
)

// ErrProducerIDs: a Batch raised ProducerIDHighWater on a PartitionStore.
// With several coordinators producer ids come from etcd blocks
// (ProducerIDs), not from a per-store high-water mark: two members'
// stores would otherwise hand out the same ids.
var ErrProducerIDs = errors.New("txnetcd: producer ids come from etcd blocks (ProducerIDs), not a store high-water mark")

// LoadTimeout bounds PartitionStore.Load, which has no context.
const LoadTimeout = 30 * time.Second

// PartitionStore is one owned partition as a txnlog.Store: what the
// coordinator needs to open over it. Every write is fenced by the owner
// value the partition was acquired with.
//
// Writes go through one writer goroutine that commits every write queued
// while the previous etcd Txn was in flight as one Txn (a group commit, as
// txnlog's bbolt store does with fsync): ids' writes are independent, and a
// round trip to etcd costs far more than a few more keys in it. The queue
// keeps submission order, so one id's writes are committed in the order
// they were submitted (txnlog.Submitter's promise).
type PartitionStore struct {
	s      *Store
	fence  Fence
	epoch  int32
	closed atomic.Bool

	ctx    context.Context // ends at Close: cuts an etcd call in flight
	cancel context.CancelFunc
	wake   chan struct{} // buffered 1: the queue is not empty
	done   chan struct{} // closed when the writer has stopped

	mu    sync.Mutex
	queue []queued
	stats txnlog.Stats

	// beforeCommit, when set (tests), runs before each group is sent.
	beforeCommit func()
}

type queued struct {
	ops    []clientv3.Op
	result chan error
}

// Partition returns partition f.Partition as a txnlog.Store whose writes are
// fenced by f.
func (s *Store) Partition(f Fence) (*PartitionStore, error) {
	o, err := f.Owner()
	if err != nil {
		return nil, err
	}
	if o.Epoch <= 0 {
		return nil, fmt.Errorf("txnetcd: fence of partition %d has coordinator epoch %d", f.Partition, o.Epoch)
	}
	ps := &PartitionStore{s: s, fence: f, epoch: o.Epoch, wake: make(chan struct{}, 1), done: make(chan struct{})}
	ps.ctx, ps.cancel = context.WithCancel(context.Background())
	go ps.write()
	return ps, nil
}

var (
	_ txnlog.Store     = (*PartitionStore)(nil)
	_ txnlog.Submitter = (*PartitionStore)(nil)
)

// Fence is the store's fence.
func (ps *PartitionStore) Fence() Fence { return ps.fence }

// Epoch is the owner's coordinator epoch (handed out by etcd at the
// acquisition).
func (ps *PartitionStore) Epoch() int32 { return ps.epoch }

// Load returns the partition's transactions. It fails with ErrNotOwner when
// the fence is no longer the partition's owner: a state loaded by a
// non-owner would be stale at once.
//
// CoordinatorEpoch is reported as the owner's epoch minus one: the
// coordinator bumps what it loads by one and writes it back, and over etcd
// the bump has already happened at the acquisition (Apply accepts exactly
// the owner's epoch). ProducerIDHighWater is 0: ids come from ProducerIDs.
func (ps *PartitionStore) Load() (txnlog.LoadedState, error) {
	if ps.closed.Load() {
		return txnlog.LoadedState{}, txnlog.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), LoadTimeout)
	defer cancel()
	st, err := ps.s.Load(ctx, ps.fence.Partition)
	if err != nil {
		return txnlog.LoadedState{}, err
	}
	if st.OwnerValue != ps.fence.OwnerValue {
		return txnlog.LoadedState{}, fmt.Errorf("%w %d: owner is %q, fence %s", ErrNotOwner, ps.fence.Partition, st.OwnerValue, ps.fence.OwnerValue)
	}
	return txnlog.LoadedState{Txns: st.Txns, CoordinatorEpoch: ps.epoch - 1}, nil
}

// Apply writes b in one fenced etcd Txn, possibly shared with other
// batches queued at the same time (all of them succeed or fail together),
// and returns once etcd has committed it. A batch whose only change is the
// coordinator epoch (the owner's own, as Load arranges) is a fence check:
// it succeeds only while the partition is still owned.
//
// When ctx ends first Apply returns ctx's error, and the batch may still
// be written (as a Txn whose answer was lost may have been).
func (ps *PartitionStore) Apply(ctx context.Context, b txnlog.Batch) error {
	select {
	case err := <-ps.Submit(b):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Submit queues b behind every write submitted before it; the channel
// gets its outcome. A batch that cannot be written (another partition's
// id, a producer-id high-water mark, an epoch other than the owner's, more
// keys than one Txn holds) fails alone at once.
func (ps *PartitionStore) Submit(b txnlog.Batch) <-chan error {
	result := make(chan error, 1)
	ops, err := ps.validate(b)
	if err != nil {
		result <- err
		return result
	}
	ps.mu.Lock()
	if ps.closed.Load() {
		ps.mu.Unlock()
		result <- txnlog.ErrClosed
		return result
	}
	ps.queue = append(ps.queue, queued{ops: ops, result: result})
	ps.mu.Unlock()
	select {
	case ps.wake <- struct{}{}:
	default:
	}
	return result
}

func (ps *PartitionStore) validate(b txnlog.Batch) ([]clientv3.Op, error) {
	if ps.closed.Load() {
		return nil, txnlog.ErrClosed
	}
	if b.ProducerIDHighWater != 0 {
		return nil, ErrProducerIDs
	}
	if b.CoordinatorEpoch != 0 && b.CoordinatorEpoch != ps.epoch {
		return nil, fmt.Errorf("txnetcd: partition %d: coordinator epoch %d written, the owner's is %d (epochs come from the acquisition)", ps.fence.Partition, b.CoordinatorEpoch, ps.epoch)
	}
	b.CoordinatorEpoch = 0
	return ps.s.ops(ps.fence.Partition, b)
}

// write is the writer goroutine: it takes every queued batch that fits in
// one Txn, commits them together and answers each, until Close.
func (ps *PartitionStore) write() {
	defer close(ps.done)
	for {
		select {
		case <-ps.ctx.Done():
			ps.failQueued()
			return
		case <-ps.wake:
		}
		for {
			group, ops := ps.takeGroup()
			if len(group) == 0 {
				break
			}
			if ps.beforeCommit != nil {
				ps.beforeCommit()
			}
			err := ps.s.Commit(ps.ctx, ps.fence, ops)
			ps.mu.Lock()
			if err == nil {
				ps.stats.Commits++
				ps.stats.Batches += uint64(len(group))
				ps.stats.Transitions += uint64(len(ops))
			}
			ps.mu.Unlock()
			for _, q := range group {
				q.result <- err
			}
		}
	}
}

// takeGroup dequeues the longest prefix of the queue whose keys fit in one
// Txn (at least one batch: each fits alone) and merges it into one list of
// operations, one per key, the last write of a key winning: the batches
// are committed together, so only the final value of a key is ever seen.
func (ps *PartitionStore) takeGroup() ([]queued, []clientv3.Op) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	index := map[string]int{}
	var ops []clientv3.Op
	n := 0
	for ; n < len(ps.queue); n++ {
		fresh := 0
		for _, op := range ps.queue[n].ops {
			if _, ok := index[string(op.KeyBytes())]; !ok {
				fresh++
			}
		}
		if n > 0 && len(ops)+fresh > ps.s.opts.MaxTxnOps {
			break
		}
		for _, op := range ps.queue[n].ops {
			if i, ok := index[string(op.KeyBytes())]; ok {
				ops[i] = op
				continue
			}
			index[string(op.KeyBytes())] = len(ops)
			ops = append(ops, op)
		}
	}
	group := ps.queue[:n:n]
	ps.queue = ps.queue[n:]
	return group, ops
}

func (ps *PartitionStore) failQueued() {
	ps.mu.Lock()
	queue := ps.queue
	ps.queue = nil
	ps.mu.Unlock()
	for _, q := range queue {
		q.result <- txnlog.ErrClosed
	}
}

// Stats counts the store's committed work: Commits is etcd Txns, Batches
// the writes they carried.
func (ps *PartitionStore) Stats() txnlog.Stats {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.stats
}

// Close makes later calls fail with txnlog.ErrClosed. The etcd client is
// the caller's.
// Writes still queued fail with it; one in flight is cut short (it may
// still have been committed).
func (ps *PartitionStore) Close() error {
	ps.mu.Lock()
	ps.closed.Store(true)
	ps.mu.Unlock()
	ps.cancel()
	<-ps.done
	return nil
}
