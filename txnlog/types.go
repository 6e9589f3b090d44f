package txnlog

import (
	"context"
	"errors"

	"github.com/txncoord/txncoord/txncore"
)

// The transaction's own types belong to the pure core (package txncore);
// these aliases keep txnlog's users unchanged.
type (
	State          = txncore.State
	TopicPartition = txncore.TopicPartition
	TxnMetadata    = txncore.Metadata
	Completion     = txncore.Completion
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
}

// Store is the durable transaction log. Implementations are safe for
// concurrent use.
type Store interface {
	// Load returns every stored transaction, the coordinator epoch and the
	// producer-id high-water mark.
	Load() (LoadedState, error)
	// Apply makes b durable (fsync'd) before it returns. Concurrent calls
	// may be committed together; each call's batch is atomic.
	Apply(ctx context.Context, b Batch) error
	Close() error
}

// ErrNotOwner is returned (possibly wrapped) by a store shared by several
// coordinators when the writer no longer owns the partition it writes to:
// another coordinator took it over, so nothing was written. It says the
// request went to the wrong coordinator, not that the store is down, so
// the coordinator answers NOT_COORDINATOR (the client looks the
// coordinator up again) rather than COORDINATOR_NOT_AVAILABLE. The
// single-process stores never return it.
var ErrNotOwner = errors.New("txnlog: not the owner of the partition")

// Submitter is implemented by stores that can queue a write without
// waiting for it: writes submitted one after another are committed in that
// order (a later one is never durable before an earlier one, unless the
// earlier one failed alone). The coordinator uses it to pipeline one id's
// transitions; without it, it waits for each write before the next.
type Submitter interface {
	Submit(b Batch) <-chan error
}

// Stats counts a store's work, for metrics and benchmarks.
type Stats struct {
	// Commits is the number of group commits (each one fsync round).
	Commits uint64
	// Batches is the number of Apply calls committed.
	Batches uint64
	// Transitions is the number of transaction puts and deletes committed.
	Transitions uint64
}
