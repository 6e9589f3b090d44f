package txnlog

import (
	"context"
	"fmt"
)

// State is a transaction's state, with Kafka's ids (TransactionState.java),
// so records and admin views use the numbers operators know.
type State uint8

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions, ListTransactions).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ParseState maps a Kafka state name to its State.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// NoProducerID is the "none" value of producer ids, as in Kafka.
const NoProducerID int64 = -1

// TxnMetadata is one transactional id's durable state (Kafka's
// TransactionMetadata plus the fields Kafka forgets on reload).
type TxnMetadata struct {
	TransactionalID string
	ProducerID      int64
	// PrevProducerID is the pid before the last rotation (epoch
	// exhaustion), so a retry of the rotating EndTxn or InitProducerId is
	// recognised. Kafka persists it only from 4.3 (KAFKA-20310).
	PrevProducerID int64
	// NextProducerID is the pid Complete* rotates to; set by a Prepare at
	// epoch exhaustion, -1 otherwise.
	NextProducerID int64
	ProducerEpoch  int16
	// LastProducerEpoch is the epoch before the last bump (-1: none).
	// Kafka does not persist it; txncoord does, so an InitProducerId
	// retry after a restart is still recognised.
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	Partitions        []TopicPartition
	// StartTimestamp and LastUpdateTimestamp are milliseconds since the epoch.
	StartTimestamp      int64
	LastUpdateTimestamp int64
	// ClientTransactionVersion is the TV the client used (2 for EndTxn v5+
	// or AddPartitionsToTxn v4+, else 0); markers carry it.
	ClientTransactionVersion int16
	// Completing is the previous transaction of this id while its
	// markers are still being written and the next one is already
	// Ongoing (TV2 only: the epoch bump tells the two apart). nil when
	// there is none. See Completion.
	Completing *Completion
}

// Completion is a finished transaction whose markers are not all written
// yet. txncoord lets a TV2 id's next transaction register partitions
// while the previous one's markers are in flight, instead of answering
// CONCURRENT_TRANSACTIONS until Complete* as Kafka does: the record then
// holds the next transaction (Ongoing) and this one, and Complete clears
// it. Leaders keep the order per partition (a batch at the bumped epoch
// waits for the marker there), and the id's next EndTxn, abort or
// InitProducerId waits until Completing is cleared, so markers of two
// transactions of one id are never in flight together.
type Completion struct {
	Commit bool `json:"commit"`
	// ProducerID and ProducerEpoch are the markers' (the epoch after the
	// Prepare's bump, which the next transaction also uses).
	ProducerID         int64            `json:"producer_id"`
	ProducerEpoch      int16            `json:"producer_epoch"`
	TransactionVersion int16            `json:"transaction_version"`
	Partitions         []TopicPartition `json:"partitions"`
}

// Clone returns a deep copy.
func (m TxnMetadata) Clone() TxnMetadata {
	m.Partitions = append([]TopicPartition(nil), m.Partitions...)
	if m.Completing != nil {
		c := *m.Completing
		c.Partitions = append([]TopicPartition(nil), c.Partitions...)
		m.Completing = &c
	}
	return m
}

// HasPartition reports whether tp is part of the transaction.
func (m *TxnMetadata) HasPartition(tp TopicPartition) bool {
	for _, p := range m.Partitions {
		if p == tp {
			return true
		}
	}
	return false
}

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
