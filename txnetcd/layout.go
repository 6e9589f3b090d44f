package txnetcd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/txncoord/txncoord/cluster"
)

// DefaultPartitions is Kafka's default transaction.state.log.num.partitions.
const DefaultPartitions = 50

// PartitionFor is the __transaction_state partition of a transactional id:
// fnv32a(id) mod partitions (every member must agree on it, so it is one
// function here).
func PartitionFor(transactionalID string, partitions int32) int32 {
	return cluster.TransactionPartitionFor(transactionalID, partitions)
}

// Layout names the keys of one cluster under its prefix (for example
// /txncoord/<cluster_id>). Every member of a cluster uses the same layout.
type Layout struct {
	Prefix string
}

func (l Layout) base() string { return strings.TrimRight(l.Prefix, "/") }

func (l Layout) partitionDir(p int32) string {
	return l.base() + "/txn/partitions/" + strconv.Itoa(int(p))
}

// OwnerKey holds the partition's Owner as JSON, put with the owner's lease.
func (l Layout) OwnerKey(p int32) string { return l.partitionDir(p) + "/owner" }

// EpochKey holds the last coordinator epoch handed out for the partition
// (decimal).
func (l Layout) EpochKey(p int32) string { return l.partitionDir(p) + "/epoch" }

// IDsPrefix is the prefix of every transaction record of the partition.
func (l Layout) IDsPrefix(p int32) string {
	return l.base() + "/txn/ids/" + strconv.Itoa(int(p)) + "/"
}

// IDKey holds one transactional id's record (txnlog's codec).
func (l Layout) IDKey(p int32, transactionalID string) string {
	return l.IDsPrefix(p) + transactionalID
}

// PIDNextKey holds the next unallocated producer id (decimal).
func (l Layout) PIDNextKey() string { return l.base() + "/pid/next" }

// Owner is the value of a partition's owner key.
type Owner struct {
	NodeID int32 `json:"node_id"`
	Epoch  int32 `json:"epoch"`
}

// Value is the owner key's value for o: what the acquisition puts and what
// a fenced write compares.
func (o Owner) Value() string {
	b, _ := json.Marshal(o) // two integers: cannot fail
	return string(b)
}

// ParseOwner reads an owner key's value.
func ParseOwner(value []byte) (Owner, error) {
	var o Owner
	if err := json.Unmarshal(value, &o); err != nil {
		return Owner{}, fmt.Errorf("txnetcd: owner value %q: %w", value, err)
	}
	return o, nil
}

// Fence is what a write is conditioned on: the partition, and the owner
// key's value exactly as the writer's acquisition put it. Comparing the
// value, not only the node id, means a member that lost the partition and
// took it back (a higher epoch) cannot write with its old fence either.
type Fence struct {
	Partition  int32
	OwnerValue string
}

// NewFence is the fence of owner o of partition p.
func NewFence(p int32, o Owner) Fence { return Fence{Partition: p, OwnerValue: o.Value()} }

// Owner parses the fence's owner value.
func (f Fence) Owner() (Owner, error) { return ParseOwner([]byte(f.OwnerValue)) }
