package coordinator

import (
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
)

// The core's types as the coordinator's handlers name them.
type (
	// Metadata is a transactional id's stored state.
	Metadata = txncore.Metadata
	// Outcome is what one core step decided.
	Outcome = txncore.Outcome
	// PIDSource hands out a new, never used producer id.
	PIDSource = txncore.PIDSource
)

func fail(code int16) Outcome { return txncore.Fail(code) }

// senderTxn is the core's markers as the marker sender takes them; the
// coordinator epoch is set by sendMarkers.
func senderTxn(m txncore.Markers) markersender.Txn {
	tps := make([]txncore.TopicPartition, len(m.Partitions))
	for i, tp := range m.Partitions {
		tps[i] = txncore.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return markersender.Txn{TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Commit: m.Commit, TransactionVersion: m.TransactionVersion, Partitions: tps}
}

// coreMarkers is the marker sender's transaction as the core knows it.
func coreMarkers(t markersender.Txn) txncore.Markers {
	tps := make([]txncore.TopicPartition, len(t.Partitions))
	for i, tp := range t.Partitions {
		tps[i] = txncore.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return txncore.Markers{TransactionalID: t.TransactionalID, ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch,
		Commit: t.Commit, TransactionVersion: t.TransactionVersion, Partitions: tps}
}

func isPrepare(s txncore.State) bool { return s == txncore.PrepareCommit || s == txncore.PrepareAbort }
