package cluster

// TransactionPartitionFor is the __transaction_state partition of a
// transactional id: fnv32a(id) mod partitions (DefaultTransactionStatePartitions
// when partitions <= 0). Coordinators (which own partitions through etcd)
// and leaders (which route a registration to the owner) must agree on it,
// so this is its one definition.
func TransactionPartitionFor(transactionalID string, partitions int32) int32 {
	if partitions <= 0 {
		partitions = DefaultTransactionStatePartitions
	}
	// FNV-1a, 32 bits (hash/fnv's New32a), over the id's bytes in place:
	// every request about an id asks, and hash/fnv would allocate.
	h := uint32(2166136261)
	for i := 0; i < len(transactionalID); i++ {
		h ^= uint32(transactionalID[i])
		h *= 16777619
	}
	return int32(h % uint32(partitions))
}
