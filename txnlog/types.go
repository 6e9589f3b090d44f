package txnlog

import (
	"context"
	"errors"

	"github.com/txncoord/txncoord/durable"

	"github.com/txncoord/txncoord/txncore"
)

// The transaction's own types belong to the pure core (package txncore);
// these aliases keep txnlog's users unchanged.
type (
	State       = txncore.State
	TxnMetadata = txncore.Metadata
	Completion  = txncore.Completion
)

const (
	Empty             = txncore.Empty
	Ongoing           = txncore.Ongoing
	PrepareCommit     = txncore.PrepareCommit
	PrepareAbort      = txncore.PrepareAbort
	CompleteCommit    = txncore.CompleteCommit
	CompleteAbort     = txncore.CompleteAbort
	Dead              = txncore.Dead
	PrepareEpochFence = txncore.PrepareEpochFence
)

// NoProducerID is the "none" value of producer ids, as in Kafka.
const NoProducerID = txncore.NoProducerID

// ParseState maps a Kafka state name to its State.
func ParseState(name string) (State, bool) { return txncore.ParseState(name) }

// LoadedState is everything a Store holds.
type LoadedState struct {
	Txns             map[string]TxnMetadata
	CoordinatorEpoch int32
	// ProducerIDHighWater is the first producer id not yet reserved: every
	// id below it may have been handed out.
	ProducerIDHighWater int64
}

// Batch is one atomic change. Zero-valued optional fields change nothing.
type Batch struct {
	Puts    []TxnMetadata
	Deletes []string
	// CoordinatorEpoch, when > 0, replaces the stored coordinator epoch.
	CoordinatorEpoch int32
	// ProducerIDHighWater, when > 0, replaces the stored high-water mark
	// if it is higher (it never goes down).
	ProducerIDHighWater int64
	// Urgency is how soon a store whose log commits in groups commits b
	// (durable.Urgency): durable.Lazy when nobody waits for it now (its
	// caller appends to the same log and was answered at submit, or it
	// only records an outcome, a Complete); durable.Now when its waiter
	// sends nothing before its answer. Stores without group commits
	// ignore it.
	Urgency durable.Urgency
}

// Store is the durable transaction log: one contract for the process log
// (BoltStore), etcd (txnetcd.PartitionStore) and the in-memory twin of
// tests (MemoryStore), all driven through the same code. Implementations
// are safe for concurrent use.
type Store interface {
	// Load returns every stored transaction, the coordinator epoch and the
	// producer-id high-water mark.
	Load() (LoadedState, error)
	// Submit queues b behind every batch submitted before it and returns
	// its position in Log: b is durable once Log is durable up to it, and
	// never before a batch submitted earlier. An error means b was
	// refused at once (a malformed batch, the store closed, its log
	// stopped): nothing was queued.
	Submit(b Batch) (durable.Pos, error)
	// Log is the log Submit's positions are in: its failure (Err) fails
	// every batch not durable yet, and a caller appending to the same log
	// may be answered as soon as a batch is submitted (durable.Shares).
	Log() durable.Log
	// Err is the failure that stopped the store for good (fail-stop:
	// nothing is written until a restart), nil while it writes. A store
	// that is replaced rather than stopped (an etcd partition fenced out,
	// or whose last write's outcome is unknown) answers nil: its Log
	// still fails its writes.
	Err() error
	Close() error
}

// Apply submits b and waits until it is durable (or failed).
func Apply(ctx context.Context, s Store, b Batch) error {
	pos, err := s.Submit(b)
	if err != nil {
		return err
	}
	return s.Log().WaitDurable(ctx, pos)
}

// ErrNotOwner is returned (possibly wrapped) by a store shared by several
// coordinators when the writer no longer owns the partition it writes to:
// another coordinator took it over, so nothing was written. It says the
// request went to the wrong coordinator, not that the store is down, so
// the coordinator answers NOT_COORDINATOR (the client looks the
// coordinator up again) rather than COORDINATOR_NOT_AVAILABLE. The
// single-process stores never return it.
var ErrNotOwner = errors.New("txnlog: not the owner of the partition")

// Stats counts a store's work, for metrics and benchmarks.
type Stats struct {
	// Commits is the number of group commits (each one fsync round).
	Commits uint64
	// Batches is the number of batches submitted.
	Batches uint64
	// Transitions is the number of transaction puts and deletes submitted.
	Transitions uint64
}
