// Package txnetcd keeps the transaction coordinator's state in etcd, for a
// cluster of several coordinators that share the transactional-id space
// (README: "Several coordinators (etcd)"). Nothing in
// the single-coordinator default uses it.
//
// It owns three things under a cluster prefix (Layout):
//
//   - the TransactionMetadata of every transactional id, one key per id
//     under its __transaction_state partition
//     (<prefix>/txn/ids/<p>/<id>, value = txnlog's record codec, so the
//     coordinator's state is the same whichever store holds it);
//   - fenced writes: Store.Apply is ONE etcd Txn conditioned on the
//     partition's owner key still holding the writer's owner value
//     (Fence); when it does not, nothing is written and the call fails
//     with ErrNotOwner, which the coordinator answers NOT_COORDINATOR. A
//     paused former owner (a zombie) can therefore change nothing;
//   - producer-id blocks, taken by compare-and-swap on <prefix>/pid/next
//     (Store.AllocateProducerIDs, and ProducerIDs, a per-process source
//     that hands ids out of such blocks), so no id is handed out twice
//     across members, restarts or lost data directories.
//
// It does not acquire or renew partition ownership (leases, the epoch key's
// increment): that is the ownership side, which writes the owner and epoch
// keys of the same Layout; this package only reads them (Load) and
// conditions on the owner key (Apply).
//
// PartitionStore adapts one owned partition to txnlog.Store (positions
// in a log of its own, durable as etcd commits them), so a coordinator can
// be opened over it. The
// PartitionStores of one Store (the partitions a coordinator owns, or
// those of every coordinator of one `txncoord up` process) share one
// writer with a group commit: the writes queued while one etcd Txn is
// in flight, of whichever partitions, go in the next, fenced on each of
// their owner keys, so concurrent ids share round trips and Raft
// proposals (etcd's CPU, which bounds the etcd mode, scales with
// proposals). A partition fenced out fails alone; the others' writes go
// in the next Txn (writer.go). Where it differs from the bbolt
// store: the coordinator epoch is the owner's (from etcd, not bumped by a
// write), and producer ids are not a high-water mark in the store but
// come from ProducerIDs (a Batch that raises ProducerIDHighWater is
// refused with ErrProducerIDs).
//
// Main types: Layout, Fence, Owner, Store, PartitionState, PartitionStore,
// StoreStats, ProducerIDs.
package txnetcd
