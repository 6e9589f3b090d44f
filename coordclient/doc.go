// Package coordclient is the client of the transaction coordinator that the
// other nodes share: a partition leader registering the partitions of a
// transaction (AddPartitionsToTxn v4+, the broker-to-coordinator form) and
// forwarding idempotent InitProducerId, the group coordinator adding
// __consumer_offsets to a transaction (TxnOffsetCommit), and a leader
// answering its clients' FindCoordinator. It is a package of its own
// because none of those is the coordinator's business or the leader's:
// each talks to the coordinator over the Kafka protocol, as a real broker
// does, and they want the same transports, routing and batching.
//
// It owns:
//   - Client, the one interface (AddPartitionsToTxn, InitProducerID,
//     FindCoordinator, Local, Close), with three implementations: Dial
//     (TCP, a small connection pool, ApiVersions on each connect and each
//     request at min(kmsg max, the coordinator's max)), InProcess (a
//     coordinator's handlers in the same process through
//     wire.LocalClient.Do: typed requests, the same version checks and
//     authorization, no encoding) and Routed (several coordinators on
//     etcd: each transactional id's AddPartitionsToTxn goes to the owner
//     of its __transaction_state partition, learned with a batched
//     FindCoordinator and followed as it moves; see routed.go);
//   - Registrar, a leader's registrations batched into AddPartitionsToTxn
//     requests per owning coordinator (several in flight to each, so one
//     that stops answering holds only its own ids; one transaction a
//     request when the Client is Local);
//   - the FindCoordinator forward a leader of several coordinators serves
//     (find_coordinator.go).
//
// It must not import the coordinator or the leader: it knows them only by
// the Kafka protocol. Mapping a coordinator's answer to a Produce error is
// the leader's (leaderstub), retrying CONCURRENT_TRANSACTIONS too; the
// coordinator's own wait for a previous transaction's markers is the
// coordinator's.
//
// Retries here: the Registrar sends each registration once (a transport
// error is NOT_ENOUGH_REPLICAS, retriable for the producer); Routed, with
// several coordinators, sends a transaction at most routedAttempts times
// while its owner is unknown, moving or loading. Dial and InProcess never
// retry: a failed request is the caller's, and the next one renegotiates
// the versions.
package coordclient
