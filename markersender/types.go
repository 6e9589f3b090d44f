package markersender

import (
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/txncore"
)

// Txn is one transaction's markers, handed over by the coordinator when
// it decides the Prepare, with the position of that write in its log
// (At, Pos). Every partition gets a marker with the same fields.
type Txn struct {
	TransactionalID string
	ProducerID      int64
	// ProducerEpoch is the marker epoch: the epoch after Prepare (e+1 for
	// TV2, e for TV0/TV1).
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	// TransactionVersion is the transaction's stored client TV (or the
	// cluster's for coordinator-initiated aborts); sent only at
	// WriteTxnMarkers v2.
	TransactionVersion int8
	Partitions         []txncore.TopicPartition
	// At and Pos are the log and the position of the Prepare the markers
	// rest on (At nil: durable already). Until At is durable up to Pos
	// the markers go only to leaders that append to At themselves
	// (Config.LeaderLog), which write them after the Prepare; a leader
	// elsewhere could apply a marker of a Prepare a crash takes back. If
	// At fails first, the markers are dropped.
	At  durable.Log
	Pos durable.Pos
}

// durable reports whether the transaction's Prepare is durable.
func (t *Txn) durable() bool { return t.At == nil || t.At.Durable() >= t.Pos }

// Completer receives the outcome of a transaction's markers. The coordinator
// implements it; this package must not import the coordinator.
type Completer interface {
	// MarkersWritten reports that every partition acknowledged its marker
	// (or was found to have applied it already): the coordinator may now
	// write Complete*.
	MarkersWritten(txn Txn)
	// MarkersStuck reports that a partition's marker cannot be applied;
	// the transaction stays in Prepare* until an operator acts. It is
	// called once per stuck transaction.
	MarkersStuck(txn Txn, tp txncore.TopicPartition, reason string)
}

// Router finds the leader of a partition; *cluster.View implements it.
type Router interface {
	LeaderOf(topic string, partition int32) (cluster.Node, bool)
}
