// Package ownership decides which coordinator owns which
// __transaction_state partition when several coordinators share the
// transactional-id space through etcd (README: "Several
// coordinators (etcd)"). Nothing in the single-coordinator default uses it.
//
// A Member is one coordinator's side of it. It holds an etcd lease, kept
// alive by its own keepalive loop, lists itself under
// <prefix>/members/<node> with that lease, and claims partitions with a
// balanced rule: with L live members each takes free partitions up to
// ceil(partitions/L) and releases the extras when more members join, so
// ownership spreads evenly and moves off a dead member once its lease
// expires (its owner keys go with the lease).
//
// Keys are txnetcd's Layout. An acquisition is one etcd Txn:
// If(owner key missing, epoch key unchanged since read) Then(put epoch+1,
// put owner {node_id, epoch} with the lease), so a partition's coordinator
// epoch strictly increases at every takeover. The owner value is the Fence
// a write is conditioned on (txnetcd.Store.Apply); a member that lost the
// partition, or took it back with a higher epoch, cannot write with an old
// fence.
//
// Safety does not rest on etcd alone: a Member stops believing it owns
// anything once its lease may have expired, that is when the lease TTL
// has passed since the send time of its last successful keepalive (the
// server's expiry is at least that late). Owned and Fence check that
// deadline on every call; the member's loop also wakes at it, reports
// each partition lost, and then starts over with a new lease. Ready and
// Err say whether it holds a valid lease and an up-to-date view (for
// /readyz), and why not.
//
// Acquisitions and losses are delivered in order on Events (never
// blocking the member). Owner(p) and Owners answer from a watch of the
// owner keys; Members lists the live members.
package ownership
