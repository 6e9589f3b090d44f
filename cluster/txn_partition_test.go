package cluster

import "testing"

// The values were computed by txnetcd.PartitionFor before it became a call
// of this function: a change here moves every stored transaction to
// another partition, so it must fail.
func TestTransactionPartitionFor(t *testing.T) {
	for _, c := range []struct {
		id         string
		partitions int32
		want       int32
	}{
		{"", 50, 11}, // fnv32a offset basis 2166136261 mod 50
		{"a", 50, 20},
		{"txn-1", 50, 35},
		{"orders-producer", 50, 41},
		{"a", 4, 0},
		{"txn-1", 3, 0},
		{"héllo", 7, 4}, // hashed as UTF-8 bytes
		{"x", 0, 45},    // 0: the default of 50
		{"txn-1", -1, 35},
	} {
		if got := TransactionPartitionFor(c.id, c.partitions); got != c.want {
			t.Errorf("TransactionPartitionFor(%q, %d) = %d, want %d", c.id, c.partitions, got, c.want)
		}
	}
}
