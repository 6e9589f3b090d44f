// Package durable is the one shape every writer of txncoord has: a write
// is appended and gets a position at once; the writer makes positions
// durable in order (a group commit: fdatasync of the process log, an etcd
// Txn); a caller waits for the position its answer rests on. The process
// log (package wal, through package storage), the transaction log's etcd
// partition stores (txnetcd), the group coordinator's logs and the
// in-memory twins of tests all have it.
//
// Positions are per log and ordered: a log is durable up to Durable(), so
// a write is durable only with every write appended to the same log
// before it. That is what lets a component answer a caller in the same
// process "at append": when the caller appends to the same log (Shares),
// whatever it appends next, and waits for, carries this write. Everywhere
// else an answer waits for WaitDurable of its position.
//
// A log that fails stops: the write that failed and every later one fail
// with the same error (fail-stop), and nothing before them is taken back.
//
// Main types: Pos, Log, Waits (the waiters and callbacks for positions'
// outcomes, which every log keeps alike, the WAL too), Tracker (the
// bookkeeping of a Log for writers that are not the WAL: positions and
// Waits).
package durable
