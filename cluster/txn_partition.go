package cluster

import "hash/fnv"

// TransactionPartitionFor is the __transaction_state partition of a
// transactional id: fnv32a(id) mod partitions (DefaultTransactionStatePartitions
// when partitions <= 0). Coordinators (which own partitions through etcd)
// and leaders (which route a registration to the owner) must agree on it,
// so this is its one definition.
func TransactionPartitionFor(transactionalID string, partitions int32) int32 {
	if partitions <= 0 {
		partitions = DefaultTransactionStatePartitions
	}
	h := fnv.New32a()
	h.Write([]byte(transactionalID))
	return int32(h.Sum32() % uint32(partitions))
}
