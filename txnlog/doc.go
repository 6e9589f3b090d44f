// Package txnlog is the durable store of transaction metadata (including each
// transaction's client transaction version), the coordinator epoch and the
// producer-id block high-water mark.
//
// It owns the Store contract every transaction store keeps (load, submit,
// log, err, close: a submitted batch gets a position in the store's log,
// durable in order, package durable), the in-memory twin of tests
// (MemoryStore, whose log the test may hold and release), and the store of
// the process log (BoltStore: a batch is one record of the process's
// write-ahead log, durable at its next group commit, applied to bbolt in
// the background by package storage). txnetcd.PartitionStore is the etcd
// one. Records use a versioned codec.
//
// It must not know request formats.
package txnlog
