package txnetcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/txncoord/txncoord/durable"
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
// Writes go through the Store's one writer, shared by all its
// PartitionStores (the partitions a coordinator owns): it commits every
// write queued while the previous etcd Txn was in flight, of whichever
// partitions, as one Txn fenced on each of their owner keys (a group
// commit, as txnlog's bbolt store does with fsync; see writer.go). Ids'
// writes are independent, and an etcd write costs one Raft proposal
// whatever its size: etcd's CPU, which bounds the etcd mode, scales with
// proposals, not keys. The queue keeps submission order, so one id's
// writes are committed in the order they were submitted
// (txnlog.Store's promise).
type PartitionStore struct {
	s      *Store
	fence  Fence
	epoch  int32
	closed atomic.Bool // set under s.w.mu, so no batch is queued after Close

	stats txnlog.Stats // under s.w.mu

	// beforeCommit, when set (tests), runs before each Txn that carries
	// this store's batches is sent.
	beforeCommit func()

	// unknown is the first write error whose outcome is unknown (sticky);
	// onUnknown is told of it once (OnUnknownOutcome).
	unknown   atomic.Pointer[error]
	onUnknown func(error)
	// log holds the positions of the batches submitted (Submit).
	log durable.Tracker
}

// OnUnknownOutcome sets fn, called once (on its own goroutine) when a
// write of this store fails in a way that does not say whether etcd
// applied it: a timeout, a connection cut, a lost answer. Fenced-out
// (ErrNotOwner) and closed-store errors are definite and do not count. The
// writer's memory may then differ from etcd: every later Submit fails at
// once, and fn's caller reopens the partition from etcd (txnrouter). Set
// it before the first Submit.
func (ps *PartitionStore) OnUnknownOutcome(fn func(error)) { ps.onUnknown = fn }

// outcome records a batch's answer: the first error of unknown outcome
// makes the store fail every later write and calls onUnknown.
func (ps *PartitionStore) outcome(err error) {
	if err == nil || errors.Is(err, ErrNotOwner) || errors.Is(err, txnlog.ErrClosed) {
		return
	}
	if ps.unknown.CompareAndSwap(nil, &err) && ps.onUnknown != nil {
		go ps.onUnknown(err)
	}
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
	return &PartitionStore{s: s, fence: f, epoch: o.Epoch}, nil
}

var _ txnlog.Store = (*PartitionStore)(nil)

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

// Submit queues b behind every write submitted to the Store before it and
// returns its position in the partition's log (Log): b goes in one fenced
// etcd Txn, possibly shared with other batches of this partition and
// others queued at the same time, and is durable once etcd committed that
// Txn. Its failure stops the log (every later batch fails alike): the
// partition fenced out (ErrNotOwner, nothing of it written; another
// partition's fencing only delays it to the next Txn), an etcd error or
// the Store's CommitTimeout (the outcome unknown: OnUnknownOutcome),
// Close. A batch that cannot be written (another partition's id, a
// producer-id high-water mark, an epoch other than the owner's, more keys
// than one Txn holds) is refused alone at once. A batch whose only change
// is the coordinator epoch (the owner's own, as Load arranges) is a fence
// check: it is durable only while the partition is still owned.
func (ps *PartitionStore) Submit(b txnlog.Batch) (durable.Pos, error) {
	if unknown := ps.unknown.Load(); unknown != nil {
		return 0, fmt.Errorf("txnetcd: partition %d: an earlier write's outcome is unknown (%w): its state is being reloaded from etcd", ps.fence.Partition, *unknown)
	}
	ops, keys, err := ps.validate(b)
	if err != nil {
		return 0, err
	}
	q := &queued{ps: ps, ops: ops, keys: keys}
	if err := ps.s.enqueue(q, &ps.log); err != nil {
		return 0, err
	}
	return q.pos, nil
}

// Log is the partition's log: its positions are Submit's, durable in
// order as etcd commits them.
func (ps *PartitionStore) Log() durable.Log { return &ps.log }

// Err is nil: a partition store is never stopped for good. One fenced out,
// or whose write's outcome is unknown, fails its writes (Log) and is
// replaced by the next owner's, or by a reload (txnrouter).
func (ps *PartitionStore) Err() error { return nil }

// settled records the writer's answer for the batch at pos: durable, or
// the log stopped.
func (ps *PartitionStore) settled(pos durable.Pos, err error) {
	ps.outcome(err)
	if err != nil {
		ps.log.Fail(err)
		return
	}
	ps.log.Advance(pos)
}

func (ps *PartitionStore) validate(b txnlog.Batch) ([]*pb.RequestOp, []string, error) {
	if ps.closed.Load() {
		return nil, nil, txnlog.ErrClosed
	}
	if b.ProducerIDHighWater != 0 {
		return nil, nil, ErrProducerIDs
	}
	if b.CoordinatorEpoch != 0 && b.CoordinatorEpoch != ps.epoch {
		return nil, nil, fmt.Errorf("txnetcd: partition %d: coordinator epoch %d written, the owner's is %d (epochs come from the acquisition)", ps.fence.Partition, b.CoordinatorEpoch, ps.epoch)
	}
	b.CoordinatorEpoch = 0
	return ps.s.ops(ps.fence.Partition, b)
}

// Stats counts the store's committed work: Commits is the etcd Txns that
// carried its batches (shared with other partitions: the Store's Stats
// counts each Txn once), Batches its writes they carried, Transitions its
// keys they wrote (a key written by several batches of one Txn once).
func (ps *PartitionStore) Stats() txnlog.Stats {
	ps.s.w.mu.Lock()
	defer ps.s.w.mu.Unlock()
	return ps.stats
}

// Close makes later calls fail with txnlog.ErrClosed. The etcd client is
// the caller's. Writes still queued fail with it at once. A Txn in flight
// that carries some of its writes is not cut short (other partitions'
// writes share it): those get the Txn's outcome when it ends (success,
// ErrNotOwner, an etcd error or the commit timeout), so they may be
// committed after Close returns.
func (ps *PartitionStore) Close() error {
	_, inFlight := ps.s.dropQueued(ps)
	// Never under the writer's lock: the log's callbacks may submit.
	ps.log.FailAfter(inFlight, txnlog.ErrClosed)
	return nil
}
