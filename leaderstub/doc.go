// Package leaderstub is the embedded partition leader: partition logs,
// producer state, the last stable offset, the aborted-transaction index and
// the KIP-1228 marker validation, in its own bbolt store.
//
// It must not import the coordinator: it talks to the coordinator over the
// Kafka protocol (AddPartitionsToTxn v5, InitProducerId), as a real broker
// does.
package leaderstub
