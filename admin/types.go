package admin

import (
	"context"
	"errors"
	"time"

	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
)

// Txn is one transaction as the admin API shows it.
type Txn struct {
	TransactionalID  string `json:"transactional_id"`
	CoordinatorID    int32  `json:"coordinator_id"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	State            string `json:"state"`
	TimeoutMs        int32  `json:"timeout_ms"`
	StartTimeMs      int64  `json:"start_time_ms"`
	LastUpdateTimeMs int64  `json:"last_update_time_ms"`
	// DurationMs is how long it has been open (-1: Empty); for a
	// finished one, from its start to its end.
	DurationMs         int64                    `json:"duration_ms"`
	TransactionVersion int16                    `json:"transaction_version"`
	Partitions         []txncore.TopicPartition `json:"partitions"`
	StuckReason        string                   `json:"stuck_reason,omitempty"`
	// GaveUp, in the answer of an abort that ended a transaction stuck in
	// Prepare*, are the partitions whose markers were given up: their
	// leaders keep the transaction open (txn find-hanging).
	GaveUp []txncore.TopicPartition `json:"gave_up_partitions,omitempty"`
	// PendingOffsets are the group offsets committed in this transaction,
	// waiting for its marker (TxnOffsetCommit).
	PendingOffsets []PendingOffset `json:"pending_offsets,omitempty"`
	// Completing is the previous transaction of the id while its markers
	// are still being written and this one is already Ongoing (TV2).
	Completing *Completing `json:"completing,omitempty"`
	// Timeline, in GET /v1/transactions/{id} only, is what recently
	// happened to the id's transactions, oldest first: InitProducerId,
	// each partition added, Prepare, each marker sent (with its
	// WriteTxnMarkers version) and answered per partition, Complete. It
	// is kept in memory for the last few thousand ids of the process
	// that coordinates them (empty after a restart).
	Timeline []TimelineEvent `json:"timeline,omitempty"`
}

// TimelineEvent is one step of a transaction's timeline. Fields an event
// does not use are left out.
type TimelineEvent struct {
	AtMs int64 `json:"at_ms"`
	// Event is InitProducerId, PartitionAdded, Prepare, MarkerSent,
	// MarkerAnswered or Complete.
	Event         string `json:"event"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	// Result is "commit" or "abort" (Prepare, Complete, markers).
	Result    string `json:"result,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	// Leader and WriteTxnMarkersVersion are where and how a marker went
	// (version -1: the request got no answer before its version was
	// known).
	Leader                 *int32 `json:"leader,omitempty"`
	WriteTxnMarkersVersion *int16 `json:"write_txn_markers_version,omitempty"`
	// Error is a marker's answer: "NONE" when written, a Kafka error
	// name, or "NO_ANSWER" (the connection closed or timed out).
	Error string `json:"error,omitempty"`
}

// Completing is a finished transaction whose markers are still being
// written.
type Completing struct {
	Result        string                   `json:"result"` // "commit" or "abort"
	ProducerEpoch int16                    `json:"producer_epoch"`
	Partitions    []txncore.TopicPartition `json:"partitions"`
}

// ListFilter selects transactions: State "" matches all; MinDuration 0
// matches all (kafka-transactions.sh list --duration-filter).
type ListFilter struct {
	State       string
	MinDuration time.Duration
}

// ErrNotFound is returned by Backend for an unknown transactional id.
var ErrNotFound = errors.New("transactional id not found")

// ErrConflict is returned by Backend when the transaction's state does not
// allow the action (HTTP 409).
var ErrConflict = errors.New("conflict")

// Backend is what the admin API reads and asks. The node assembly adapts
// the coordinator and the marker sender to it.
type Backend interface {
	Transactions(ListFilter) []Txn
	Transaction(id string) (Txn, error)
	// Abort ends a transaction: an Ongoing one is aborted; one in
	// PrepareAbort whose markers are stuck is completed as aborted; with
	// force, any Prepare* is completed as it was decided (a PrepareCommit
	// as committed) for the partitions that acknowledged, giving up on
	// the others.
	Abort(ctx context.Context, id string, force bool) (Txn, error)
	// RetryMarkers resends a stuck transaction's markers.
	RetryMarkers(id string) (Txn, error)
	Leaders() []markersender.LeaderStatus
	Markers() []markersender.PendingTxn
	Ready() error
}
