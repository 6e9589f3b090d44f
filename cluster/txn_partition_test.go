package cluster

import (
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
)

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

// The hash is hash/fnv's FNV-1a over the id's bytes, for any id.
func TestTransactionPartitionForIsFNV1a(t *testing.T) {
	for i := range 2000 {
		id := strings.Repeat(string(rune('a'+i%26)), i%7) + strconv.Itoa(i*7919) + "\x00é"[:i%4]
		h := fnv.New32a()
		h.Write([]byte(id))
		if got, want := TransactionPartitionFor(id, 50), int32(h.Sum32()%50); got != want {
			t.Fatalf("TransactionPartitionFor(%q, 50) = %d, fnv32a says %d", id, got, want)
		}
	}
}
