// Package authmeta is the controller's security metadata, as Kafka keeps
// it in its metadata log: ACL bindings (DescribeAcls 29, CreateAcls 30,
// DeleteAcls 31), client quotas (DescribeClientQuotas 48,
// AlterClientQuotas 49: stored and described, not enforced) and SCRAM
// credentials (DescribeUserScramCredentials 50, AlterUserScramCredentials
// 51), and the finalized feature levels UpdateFeatures (57) sets (the
// cluster view caps transaction.version with them).
//
// The state lives in Records: the space "authmeta" of the coordinator
// node's store (record kind storage.KindAuthMeta), or, with several
// coordinators on etcd, etcd beside the topic controller's records,
// written by the holder of the controller's lease under its fence
// (package topicsetcd; the holder Attaches the State, Detaches it when it
// loses the lease). One record per ACL binding added or removed, per SCRAM
// credential set or deleted, per client quota entity set or removed and
// per feature level finalized; RecordKey names what each is the whole
// state of, so a store that keeps the last record per key keeps the
// state. A change is answered, and used by the listeners, only once its
// record is durable.
//
// Every node of one process shares one State (it hangs off the cluster
// view): the listeners' authorizer consults its ACLs (Authorizer) and
// their SASL SCRAM login its credentials (Credentials), so a change is in
// force on every node of `txncoord up` as soon as it is answered.
//
// Authorization follows Kafka's StandardAuthorizer with
// allow.everyone.if.no.acl.found=true: super users (the cluster principal
// and the security section's super_users) may do anything; on a resource
// that some ACL matches, a matching DENY wins over any ALLOW, and without
// a matching ALLOW the operation is denied; READ, WRITE, DELETE and ALTER
// imply DESCRIBE and ALTER_CONFIGS implies DESCRIBE_CONFIGS (for ALLOW
// only); a resource no ACL matches falls back to the rules of the
// credentials file (package security).
package authmeta
