// Package coordinator is the transaction coordinator: the request handlers,
// one file per API key, around Kafka's transaction state machine, which is
// package txncore (pure: no I/O, the clock injected, no import of the
// network, storage or marker packages).
//
// Given the stored metadata of a transactional id, a request and now, the
// core (txncore) returns the metadata to persist, the response, and the
// markers to send. The handlers wire it to the txnlog store and the marker
// sender, in this order: persist (fsync) → answer → hand the markers over.
// Requests for one id are serialized by a per-id lock; while an id's write
// is in flight its other requests get CONCURRENT_TRANSACTIONS where Kafka
// does; different ids write concurrently and share group commits.
// An id's writes go through its queue (idqueue.go): submitted in decision
// order, ended in that order, pipelined requests decided on the state the
// last one writes; testdata/idqueue*.txt replays it write by write.
//
// Beyond Kafka: a txncoord leader's registration (AddPartitionsToTxn v4+)
// of a TV2 producer's next transaction is accepted while the previous
// transaction's markers are still being written; the record keeps that
// transaction as Completing until they are, and the id's next EndTxn, abort
// or InitProducerId waits for it (txncore.Completion, txncore/testdata/overlap_tv2.txt).
//
// In `txncoord up`, where the transaction log and the leaders append to one
// process log (package storage): an in-process leader's accepted
// registration is answered once appended (wire.Request.InProcess), and its
// data, appended after it, is durable only with it; the Complete record is
// appended after the leaders' marker writes, so it is durable only with
// them. The order of the log is the whole protocol.
//
// Producer ids come from blocks whose end is durable before any id of the
// block is handed out (the store's high-water mark, or Config.ProducerIDs,
// for example etcd blocks with several coordinators). The coordinator epoch
// is bumped and persisted at every Open, before the markers of Prepare*
// transactions are resent; over a txnetcd.PartitionStore the bump is the
// partition's acquisition and its write is a fence check.
//
// It must not touch bbolt or sockets directly.
//
// Main types: Coordinator (Open, Register, MarkersWritten/MarkersStuck,
// List/Describe/Abort/AbortWith/Stats for the admin API), Config, MarkerQueue.
//
// Invariant 10: a transaction never contains a partition without a leader
// that applies markers (noLeader: __consumer_offsets needs a group
// coordinator's WriteTxnMarkers on this node's registry), and AbortWith
// ends a transaction whose markers cannot all be delivered.
package coordinator
