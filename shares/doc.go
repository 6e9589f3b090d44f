// Package shares is the share-partition state machine of share groups
// (KIP-932), pure: no clock, no I/O, no locks. A Partition is one share
// group's view of one topic partition: the share-partition start offset
// (SPSO), the end of the in-flight window, and the state of every record
// in flight (available for redelivery, or acquired by a member under a
// lock), with its delivery count. Records below the start offset, and
// records inside the window with no entry, are finished (acknowledged or
// archived).
//
// The leader (package leaderstub) owns the partitions, persists their
// snapshots (Partition.Encode) through the process log and serves
// ShareFetch and ShareAcknowledge with them; the group coordinator
// (package groups) serves membership. config.go holds the share-group
// configs with Kafka 4.2's names, defaults and bounds.
//
// Where it simplifies Kafka, and why:
//   - acknowledged and archived records are not told apart once finished
//     (nothing observable depends on it: both are never delivered again,
//     and the start offset moves past both);
//   - an acquisition is not written by itself: a snapshot written for
//     another change (an acknowledgement, a release, an expired lock)
//     carries every record in flight with its delivery count, acquired
//     ones as available, so after a restart a record that was acquired is
//     available again with the count of the last snapshot (Kafka writes
//     the share-group state on acknowledgement and release too);
//     redelivery after a crash is what at-least-once allows;
//   - control batches, and with read_committed the batches of aborted
//     transactions, are archived when the window reaches them instead of
//     being acquired and acknowledged as gaps by the client.
package shares
