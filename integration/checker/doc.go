// Package checker is a Jepsen-style history checker for transactional
// workloads: given every value a set of transactional producers wrote (with
// the transaction it belonged to and that transaction's outcome as the client
// saw it) and a final read_committed read of every partition, it reports the
// anomalies a correct Kafka cluster never shows.
//
// It owns the history model (History, Txn, Write, Reads) and the Report; it
// must not talk to a cluster (the workload package records histories and reads
// partitions).
//
// Where it differs from Jepsen's kafka checker, and why:
//   - Only a final read is checked, not concurrent polls, so "precommitted
//     read" here means a value read whose transaction the client never ended
//     (it could only be visible if the cluster exposed an open transaction),
//     and poll-order anomalies do not apply.
//   - A lost write is any acknowledged-committed value never read: the final
//     read covers every partition up to its last stable offset, so there is
//     no "later offset" condition.
//   - Unknown-outcome transactions (commit returned an error, the process
//     died) must be all-or-nothing but may resolve either way.
package checker
