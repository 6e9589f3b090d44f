// Package groupcommit is the single writer of one bbolt file.
//
// Every durable write is an op queued on a Log; one goroutine drains the
// queue into one bbolt Update, so the ops that arrive while the previous
// Update is being fsync'd share the next one (hashicorp/raft's group commit,
// without a timer: a lone op is committed at once). Nothing is answered
// before the Update that holds it has returned, fdatasync included, unless
// the log was opened with the explicit NoSync opt-in.
//
// Writers own a Space: either the whole file (a node in its own process
// keeps its layout: OpenSpace) or one top-level bucket of a shared file.
// `txncoord up` runs the coordinator and every leader in one process and
// gives each a Space of one shared Log, so one commit (two fdatasyncs, as
// bbolt writes data pages then the meta page) carries the writes of every
// node instead of one commit per node: fewer fsyncs, less disk contention.
//
// Failures are per op: if a shared Update fails, each op is retried alone,
// so one bad op cannot fail others that happened to share its Update. A
// FailStop space (a partition leader, whose later ops assume the earlier
// ones applied) refuses every op after its first failure.
//
// Writers of one Log can make a write conditional on others (SubmitAfter,
// ticket.go): it is durable only with them, in the same commit or a later
// one, and fails unwritten if one of them fails. A Deferral carries the
// tickets between an in-process caller and callee, so that the callee
// answers once its write is queued and the caller's own write, answered to
// its client only once durable, carries it: two dependent writes share one
// commit instead of waiting for each other's fsync.
package groupcommit
