// Package groups is the group coordinator, served by the coordinator node
// (Kafka co-locates it with the leader of __consumer_offsets, which that
// node leads): the classic consumer-group protocol, the KIP-848 consumer
// protocol (on nodes of Kafka 4.0+), committed offsets, offsets inside
// transactions, and the WriteTxnMarkers and DescribeProducers of
// __consumer_offsets partitions.
//
// It owns: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
// OffsetFetch, TxnOffsetCommit, ListGroups, DescribeGroups,
// DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat and
// ConsumerGroupDescribe (consumerAPIs, registered only when the
// node's profile has ConsumerGroupHeartbeat v1), the share-group keys
// ShareGroupHeartbeat, ShareGroupDescribe, DescribeShareGroupOffsets,
// AlterShareGroupOffsets and DeleteShareGroupOffsets (shareAPIs, on 4.1+
// profiles: share.go, share_state.go; the records are the leaders',
// reached through Config.Shares), and WriteTxnMarkers /
// DescribeProducers
// for __consumer_offsets (one handler file per API key); rebalance and
// session timeouts; offset retention; its records (storage.KindGroup) in
// the space "groups" of the process store, and their codec ApplyRecord.
//
// It must not: import coordinator (it reaches the transaction coordinator
// over the Kafka protocol, AddPartitionsToTxn v4+, as a leader does:
// Config.TxnCoordinator); copy the marker rules (package txnrules is the
// one implementation, shared with leaderstub); mix the protocols in one
// group (a group is "classic" or "consumer", Group.Type; an Empty group
// changes type keeping its offsets).
//
// Layout: core.go, offsets.go, consumer.go (KIP-848 groups: epochs,
// target assignment, reconciliation) and assign.go (the uniform and range
// assignors) are the pure core (Core: every group, member, offset and
// producer state; steps take `now` and plain values and return plain
// values, ops to store and answers for waiting requests; no clock,
// channels or I/O); coordinator.go is the shell (one lock over the core,
// the log, the ticker, waiting JoinGroup/SyncGroup requests); record.go
// the records and loading (consumer_record.go a consumer group's part);
// admin.go the accessors.
//
// Waiting requests: a JoinGroup or SyncGroup that the same member's later
// one replaces while it waits gets no response, as in Kafka (whose
// ClassicGroup replaces the waiting future); pipelined on the same
// connection it gets the later one's answer (Coordinator.supersede).
//
// Markers: the marker sender of the coordinator node's own process
// reaches these handlers in-process (node.StartCoordinator dials its own
// address through its server, in `txncoord up` and in a coordinator
// process of its own), never over TCP; txncoord_group_markers_total
// counts them by result, version and transport.
//
// Durability order: every step's changes are appended to the process log
// under the coordinator's lock, so the log holds them in the order they
// happened. An answer that acknowledges a change (OffsetCommit,
// TxnOffsetCommit, a SyncGroup that stored the leader's assignment, a
// JoinGroup that stored a static member's new id, DeleteGroups,
// WriteTxnMarkers) is given only once its record is durable; a caller
// appending to the same log (the marker sender of the same process, when
// the transaction log is on the process log: durable.Shares) once it is
// appended. OffsetFetch and DescribeProducers answer only durable state.
// A TxnOffsetCommit's pending offsets are appended after the transaction
// coordinator registered the partition (appended first, so never durable
// without it).
//
// Admin API (for GET /v1/groups and the groups CLI), each answer a copy:
//
//	(*Coordinator).ListGroups() []GroupSummary
//	(*Coordinator).DescribeGroup(id string) (GroupDescription, bool)
//	(*Coordinator).DeleteGroup(ctx, id string) error   // kerr.GroupIDNotFound, kerr.NonEmptyGroup
//	(*Coordinator).PendingOffsets(producerID int64) []PendingOffsetInfo
//
// GroupDescription has the summary (state, protocol type, protocol,
// generation, member count, offsets partition), the leader, members
// (ids, client, host, timeouts, assignment decoded for consumer groups),
// committed offsets and pending transactional offsets (with producer id
// and epoch). Lag needs the partitions' end offsets, which the leaders
// have: the caller computes it.
//
// Main types: Coordinator (Open, Register, Close, Tick and the
// accessors), Config, Timeouts, Core.
package groups
