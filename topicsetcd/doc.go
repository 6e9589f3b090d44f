// Package topicsetcd keeps the topic controller's records in etcd, for a
// cluster of several coordinators, where the controller moves between
// coordinator nodes: one node at a time holds it through an etcd lease
// (an ownership.Member over one partition of the Layout <cluster
// prefix>/controller), and whichever node holds it next loads the state
// this package wrote, as a KRaft controller elected next reads the
// metadata log.
//
// It owns the keys <prefix>/data/<kind>/<hex(name)> of a controller
// Layout (DataPrefix): one etcd key per topic (kind "topic": its whole
// state, tombstones included, so a topic created again gets a new id) and
// per group with configs of its own (kind "group"), the value the record
// package topics wrote (topics.RecordKey names the key); beside them,
// under the same lease and fence, the security metadata: one key per ACL
// binding, SCRAM credential, client quota entity and finalized feature
// (kinds "acl", "scram", "quota", "feature", authmeta.RecordKey). A Codec
// names one of the two sets (Topics, AuthMeta); each is read and written
// alone. The key <prefix>/seeded (<prefix>/seeded-authmeta) is put once
// when the records of a single coordinator's store were copied in (Seed).
//
// Records is a topics.Records and an authmeta.Records: Commit writes the records in one etcd Txn
// per --max-txn-ops keys (the last record of a key wins: etcd refuses a
// Txn naming a key twice), every Txn fenced by the holder's owner value
// (txnetcd.Store.Commit), so a former holder, paused past its lease (a
// zombie), writes nothing; Load reads every key at one etcd revision, and
// only while the fence still holds at that revision. Snapshot reads the
// same keys without a fence, for a node that only shows them.
//
// It must not: acquire or renew the lease (the node's ownership.Member
// does), decide what a record means (package topics does), or write
// anything outside its layout.
//
// Main types: Records, Options, Codec, SnapshotRecords.
package topicsetcd
