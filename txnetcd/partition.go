package txnetcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

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
type PartitionStore struct {
	s      *Store
	fence  Fence
	epoch  int32
	closed atomic.Bool
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

// Apply writes b in one fenced etcd Txn (Store.Apply). A batch whose only
// change is the coordinator epoch (the owner's own, as Load arranges) is a
// fence check: it succeeds only while the partition is still owned.
func (ps *PartitionStore) Apply(ctx context.Context, b txnlog.Batch) error {
	if ps.closed.Load() {
		return txnlog.ErrClosed
	}
	if b.ProducerIDHighWater != 0 {
		return ErrProducerIDs
	}
	if b.CoordinatorEpoch != 0 && b.CoordinatorEpoch != ps.epoch {
		return fmt.Errorf("txnetcd: partition %d: coordinator epoch %d written, the owner's is %d (epochs come from the acquisition)", ps.fence.Partition, b.CoordinatorEpoch, ps.epoch)
	}
	b.CoordinatorEpoch = 0
	ops, err := ps.s.ops(ps.fence.Partition, b)
	if err != nil {
		return err
	}
	return ps.s.commit(ctx, ps.fence, ops)
}

// Close makes later calls fail with txnlog.ErrClosed. The etcd client is
// the caller's.
func (ps *PartitionStore) Close() error {
	ps.closed.Store(true)
	return nil
}
