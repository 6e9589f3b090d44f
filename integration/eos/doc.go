// Package eos checks exactly-once consume-transform-produce chains: an
// input topic of N numbered values, stage 1 (consume in a group, transform,
// produce to a middle topic in a transaction that also commits the consumed
// offsets), stage 2 (the same, middle to output), each stage a set of
// member processes that join, leave, crash and restart while the chain runs.
// A chain may have more stages (Config.Topics: a middle topic between each
// two); the checks below then hold through every middle topic.
//
// It owns three things:
//   - the history model (history.go): every member process appends one JSON
//     line per step to its own file, before the step, with one write(2),
//     so a SIGKILLed member leaves an exact record: a transaction it never
//     asked to commit is Open (never visible), one whose commit was asked
//     for and not answered is Unknown (either way, all or nothing);
//   - the checker (check.go, table.go): every input value exactly once in
//     the final read_committed output, nothing visible from an aborted or
//     never-committed attempt in either topic, each output record's lineage
//     (input|stage-1 txn|stage-2 txn) through a visible middle record, what
//     each transaction consumed is what the log holds at that offset, and
//     each group's committed offsets resume right after its visible output
//     (at the log end, or below only trailing control records); plus the
//     per-stage producer check of integration/checker;
//   - the workload (chain.go, member*.go, eosmember/): the member loop for
//     kgo (GroupTransactSession), sarama (consumer group +
//     AddMessageToTxnWithGroupMetadata) and confluent-kafka-go (subscribe +
//     SendOffsetsToTransaction), run as child processes of a Chain that
//     writes the input, schedules churn and faults by progress, stops
//     members, reads back and checks.
//
// Each stage output record goes to the partition its input record came
// from, so the checker's per-partition order check applies per stage.
//
// It must not start clusters (tests do: kfake, txncoord up, separate
// processes) and judges only what it recorded and read.
package eos
