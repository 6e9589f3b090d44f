package groupsetcd

import (
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/txnetcd"
)

// acquirePartition makes node the owner of partition p with epoch (its
// owner key, as an ownership.Member's acquisition writes it) and returns
// its fence.
func acquirePartition(t testing.TB, cli *clientv3.Client, l txnetcd.Layout, p, node, epoch int32) txnetcd.Fence {
	t.Helper()
	o := txnetcd.Owner{NodeID: node, Epoch: epoch}
	if _, err := cli.Put(ctxT(t), l.OwnerKey(p), o.Value()); err != nil {
		t.Fatal(err)
	}
	return txnetcd.NewFence(p, o)
}

// TestPartitionsFencedApart: the groups of two __consumer_offsets
// partitions, both owned by node 0, each in a log of its own
// (PartitionDataPrefix). Node 1 takes partition 1 over. Node 0's next
// offset commit to partition 1 (a zombie's) is refused by the fence and
// is not in etcd, while its log of partition 2 keeps writing; the new
// owner of partition 1 loads that partition's offsets as they were before
// the takeover, and none of partition 2's.
func TestPartitionsFencedApart(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := txnetcd.Layout{Prefix: groupsLayout(t).Prefix + "parts"}
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 3})
	open := func(f txnetcd.Fence) *Log {
		log := Open(store, f, Options{DataPrefix: PartitionDataPrefix(l, f.Partition)})
		t.Cleanup(func() { log.Close() })
		return log
	}
	commit := func(log *Log, ops ...string) error {
		pos, err := log.Append(rec(t, ops...))
		if err != nil {
			return err
		}
		return log.Log().WaitDurable(ctxT(t), pos)
	}
	zombie1 := open(acquirePartition(t, cli, l, 1, 0, 1))
	owner2 := open(acquirePartition(t, cli, l, 2, 0, 1))
	if err := commit(zombie1, "offsets", "g1/orders/0", "10"); err != nil {
		t.Fatal(err)
	}
	if err := commit(owner2, "offsets", "g2/orders/0", "20"); err != nil {
		t.Fatal(err)
	}

	newFence := acquirePartition(t, cli, l, 1, 1, 2)
	err := commit(zombie1, "offsets", "g1/orders/0", "11")
	if !errors.Is(err, txnetcd.ErrNotOwner) || !errors.Is(err, groups.ErrClosed) {
		t.Fatalf("the former owner's offset commit after the takeover: %v, want txnetcd.ErrNotOwner and groups.ErrClosed", err)
	}
	if err := commit(owner2, "offsets", "g2/orders/0", "21"); err != nil {
		t.Fatalf("partition 2's commit after partition 1 moved: %v", err)
	}

	if got := fmt.Sprint(loaded(t, open(newFence), "offsets")); got != "map[offsets:[[g1/orders/0 10]]]" {
		t.Errorf("partition 1's new owner loads %s, want the offset committed before the takeover alone", got)
	}
	if got := fmt.Sprint(loaded(t, owner2, "offsets")); got != "map[offsets:[[g2/orders/0 21]]]" {
		t.Errorf("partition 2's owner loads %s", got)
	}
}
