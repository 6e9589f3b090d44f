package markersender

import (
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/txncore"
)

// Txn is one transaction's markers as the core decided them, with what
// delivery adds: the coordinator epoch, and the position of the Prepare's
// write in its log (At, Pos). Every partition gets a marker with the same
// fields; TransactionVersion goes out only at WriteTxnMarkers v2.
type Txn struct {
	txncore.Markers
	CoordinatorEpoch int32
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
