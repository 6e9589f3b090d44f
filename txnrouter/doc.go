// Package txnrouter makes one process serve the transaction-coordinator
// APIs for the __transaction_state partitions it owns through etcd
// (several coordinators).
//
// A Router listens to an ownership.Member's events. When the member acquires
// partition p it opens a coordinator.Coordinator over a
// txnetcd.PartitionStore fenced with the member's fence for p, with a
// producer-id source and a marker sender shared by every partition of the
// process; when the member loses p it closes that coordinator. The Sender's
// completions are routed back to the coordinator of the transactional id's
// partition (a completion for an epoch that is no longer served is dropped:
// the next owner resends the markers at its Open).
//
// The Router registers the coordinator APIs (InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions) on the
// node's wire.Registry and dispatches each request by
// txnetcd.PartitionFor(transactional id, partitions): a partition this process
// does not own (or whose lease may have expired) is answered NOT_COORDINATOR,
// one whose coordinator is still loading COORDINATOR_LOAD_IN_PROGRESS, as
// Kafka's TransactionStateManager does. Batched requests (AddPartitionsToTxn
// v4+, DescribeTransactions) are split by partition and the answers merged;
// ListTransactions merges every owned partition's list. FindCoordinator for
// transactional ids answers the partition's current owner from the member's
// view of etcd, with the address from a node id → address map; other key
// types are answered by the cluster view as on a single coordinator.
package txnrouter
