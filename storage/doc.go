// Package storage is the durable store of one process: a write-ahead log
// (package wal) in front of one bbolt file, the way etcd pairs its WAL
// with a bbolt backend.
//
// Every component of the process (the transaction coordinator, each
// embedded partition leader) owns a Space: a top-level bucket of the bbolt
// file, or the whole file for a process with a single component. A
// component changes its state by appending a record to its Space. The
// record goes to the process log at once, in the order of the calls, and
// is durable after the log's next group commit: one fdatasync for every
// record of every component appended meanwhile. The component keeps its
// state in memory; bbolt is where that state lives between runs.
//
// A background applier writes durable records into bbolt in large
// batches, with the position it applied up to in the same bbolt
// transaction, and truncates the log behind it. Opening a store replays
// the records past that position into bbolt before any component loads,
// so a component reads its state from bbolt exactly as it wrote it. A
// kind with a BatchApplyFunc gets a space's records of one apply at once,
// in log order, and may write only what the last of them leaves (a
// transaction written four times between two applies is written once);
// replay applies record by record, to the same result.
//
// Because the log is ordered, "B is durable only if A is" needs no
// bookkeeping: if A was appended before B, B's group commit is A's or a
// later one. A component in the same process may therefore answer a
// caller appending to the same store as soon as its record is appended
// (durable.Shares of the caller's log, wire.Request.CallerLog, and the
// store): whatever the caller appends next, and waits for, carries it.
//
// Failures stop the process's writes (fail-stop): the first failed log
// write or fdatasync, or a failed bbolt apply, fails every waiter and every
// later append; nothing is retried. A restart replays the log.
//
// Records carry a Kind, which names the codec that applies them
// (Options.Kinds): the store never interprets a component's bytes.
package storage
