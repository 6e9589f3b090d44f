// Package groupsetcd keeps the group coordinator's records in etcd, for a
// cluster of several coordinators, where the groups of each
// __consumer_offsets partition move between coordinator nodes: one node at
// a time owns a partition through an etcd lease (an ownership.Member over
// the partitions of the Layout <cluster prefix>/groupparts), runs a group
// coordinator for its groups with one Log, and whichever node owns it
// next loads the state this package wrote.
//
// A Log owns the keys <data prefix><bucket>/<hex(key)>, its data prefix
// PartitionDataPrefix (<prefix>/data/<partition>/) of the partition it
// writes for, or DataPrefix (<prefix>/data/) for a Log of a single-lease
// Layout: one etcd key per bbolt key of the single-coordinator
// store (groups' buckets: groups, offsets, txnoffsets, producers,
// partitions), the value as the record put it. Hex keeps etcd's byte order
// of keys equal to the raw keys' (as bbolt's ForEach walks them) and keeps
// '/' out of them.
//
// Log is a groups.RecordLog (groups.Config.Records):
//
//   - Append decodes a record (groups.DecodeRecord) and queues it with the
//     next position; it never waits for etcd;
//   - one writer goroutine takes everything queued, folds the records into
//     as few etcd Txns as etcd's --max-txn-ops allows (the last change of
//     a key wins; etcd refuses a Txn naming a key twice), each holding
//     whole records except a record that alone has more keys than a Txn
//     may hold, commits them in order, every one fenced by the holder's
//     owner value (txnetcd.Store.Commit: a paused former holder, a zombie,
//     writes nothing), and then marks the positions durable;
//   - failure is sticky: the first failed commit (fenced out, an etcd error
//     or timeout) fails every queued and later Append and every
//     WaitDurable with an error wrapping groups.ErrClosed (the coordinator
//     answers NOT_COORDINATOR, clients look for it again) and its cause,
//     and calls Options.OnFail once, so that the node reopens the
//     coordinator, which reloads the truth from etcd (the failed
//     coordinator's memory may be ahead of it);
//   - Load reads every key at one etcd revision, and only while the fence
//     still holds at that revision.
//
// Migrate moves the records of a cluster that ran one group coordinator
// for every group (one Log at DataPrefix of the single lease's layout) to
// the per-partition data prefixes, once, before a node owns any
// partition: one node at a time (a lock key on a lease of its own), each
// key to the partition its group hashes to, the old keys deleted in the
// Txn that copies them (an interrupted migration resumes), the single
// lease's owner key retired (a coordinator still on it is fenced out),
// and a marker key that makes every later start skip it.
//
// It must not: acquire or renew the lease (the node's ownership.Member
// does), decide what a record means (package groups does), or write
// anything outside its data prefix.
//
// Main types: Log, Options, Migration.
package groupsetcd
