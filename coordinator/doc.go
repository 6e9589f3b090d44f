// Package coordinator is the transaction coordinator: the request handlers,
// one file per API key, around Kafka's transaction state machine, which is
// package txncore (pure: no I/O, the clock injected, no import of the
// network, storage or marker packages).
//
// Given the stored metadata of a transactional id, a request and now, the
// core (txncore) returns the metadata to persist, the response, and the
// markers to send. The handlers submit the record to the store (txnlog),
// which gives it a position in its log, and the ordering duties are kept
// by positions (idqueue.go states them where they are enforced):
//   - an answer that acknowledges a write is given once the log is durable
//     up to its position (invariant 1), except to a caller that appends to
//     the same log (durable.Shares with wire.Request.CallerLog: a leader
//     of `txncoord up`), whose own next write is durable only with it;
//   - a Prepare's markers are handed to the marker sender when the Prepare
//     is decided, with its position: a leader appending to the same log
//     may have them at once (it writes them after the Prepare), any other
//     leader only once the position is durable; a Prepare whose write
//     fails has no markers;
//   - Complete* is decided once every marker is written and submitted
//     behind the Prepare, in the same log.
//
// Requests for one id are serialized by a per-id lock, under which its
// writes are submitted, so they enter the log in decision order; while an
// id's write is in flight its other requests get CONCURRENT_TRANSACTIONS
// where Kafka does, except the pipelined ones (a leader's registration,
// EndTxn, the markers' completion), decided on the state the last write in
// flight puts; different ids write concurrently and share group commits.
// testdata/idqueue*.txt replays it write by write.
//
// Beyond Kafka: a txncoord leader's registration (AddPartitionsToTxn v4+)
// of a TV2 producer's next transaction is accepted while the previous
// transaction's markers are still being written; the record keeps that
// transaction as Completing until they are, and the id's next EndTxn, abort
// or InitProducerId waits for it (txncore.Completion, txncore/testdata/overlap_tv2.txt).
//
// In `txncoord up` the transaction log and the leaders append to one
// process log: a leader's accepted registration is answered once
// submitted, and its data, appended after it, is durable only with it; the
// Complete record is appended after the leaders' marker writes, so it is
// durable only with them. The order of the log is the whole protocol.
//
// Producer ids come from blocks reserved ahead (ProducerIDPool): a core
// step takes one without I/O; the next block is reserved in the
// background when half of the one in hand is used (a durable high-water
// mark in the store, or etcd blocks with several coordinators). The
// coordinator epoch is bumped and persisted at every Open, before the
// markers of Prepare* transactions are resent; over a
// txnetcd.PartitionStore the bump is the partition's acquisition and its
// write is a fence check.
//
// It must not touch bbolt or sockets directly.
//
// With Config.Timeline each decided write adds to the id's timeline what
// it changes (timeline.go: one place sees every transition, whichever
// handler or background step decided it), under the id's lock and without
// allocating.
//
// Main types: Coordinator (Open, Register, MarkersWritten/MarkersStuck,
// List/Describe/Abort/AbortWith/Stats for the admin API), Config,
// MarkerQueue, ProducerIDPool and ProducerIDBlocks.
//
// Invariant 10: a transaction never contains a partition without a leader
// that applies markers (noLeader: __consumer_offsets needs a group
// coordinator's WriteTxnMarkers on this node's registry), and AbortWith
// ends a transaction whose markers cannot all be delivered.
package coordinator
