package storage

// The kinds of record in a process log, one per component codec. A
// number, once used, keeps its meaning: logs written by an older release
// are replayed by a newer one.
const (
	// KindTxn is a transaction-log batch of the coordinator (txnlog).
	KindTxn Kind = 1
	// KindLeader is a partition leader's change (leaderstub).
	KindLeader Kind = 2
)
