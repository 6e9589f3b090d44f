package storage

// The kinds of record in a process log, one per component codec. A
// number, once used, keeps its meaning: logs written by an older release
// are replayed by a newer one.
const (
	// KindTxn is a transaction-log batch of the coordinator (txnlog).
	KindTxn Kind = 1
	// KindLeader is a partition leader's change (leaderstub).
	KindLeader Kind = 2
	// KindGroup is a group coordinator's change: group metadata,
	// committed and transactional offsets, markers (groups).
	KindGroup Kind = 3
	// KindTopic is a controller's change to topic metadata: creation,
	// deletion, partition counts, configs (topics).
	KindTopic Kind = 4
	// KindAuthMeta is a controller's change to security metadata: an
	// ACL binding added or removed, a SCRAM credential set or deleted
	// (authmeta).
	KindAuthMeta Kind = 5
)
