package txncore

import "fmt"

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

// Metadata is one transactional id's durable state (Kafka's
// TransactionMetadata plus the fields Kafka forgets on reload).
type Metadata struct {
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
func (m Metadata) Clone() Metadata { return m.cloneGrow(0) }

// cloneGrow is Clone with room for extra more partitions, so that a step
// adding them allocates the partition list once.
func (m Metadata) cloneGrow(extra int) Metadata {
	if n := len(m.Partitions) + extra; n > 0 {
		m.Partitions = append(make([]TopicPartition, 0, n), m.Partitions...)
	} else {
		m.Partitions = nil
	}
	if m.Completing != nil {
		c := *m.Completing
		c.Partitions = append([]TopicPartition(nil), c.Partitions...)
		m.Completing = &c
	}
	return m
}

// HasPartition reports whether tp is part of the transaction.
func (m *Metadata) HasPartition(tp TopicPartition) bool {
	for _, p := range m.Partitions {
		if p == tp {
			return true
		}
	}
	return false
}

// Markers are one transaction's markers, as the core decides them: every
// partition gets a marker with these fields. The same value goes to the
// marker sender (markersender.Txn), which adds what the core does not
// know: the coordinator epoch and where the Prepare that produced them was
// written.
type Markers struct {
	TransactionalID string
	ProducerID      int64
	// ProducerEpoch is the marker epoch: the epoch after Prepare (e+1 for
	// TV2, e for TV0/TV1).
	ProducerEpoch int16
	Commit        bool
	// TransactionVersion is the transaction's stored client TV (or the
	// cluster's for coordinator-initiated aborts).
	TransactionVersion int8
	Partitions         []TopicPartition
}
