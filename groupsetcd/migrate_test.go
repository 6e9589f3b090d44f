package groupsetcd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/txnetcd"
)

// TestMigrateOnceAcrossPartitions: a single-lease Log's records (60
// groups and a partition's next position, more keys than one Txn of
// MaxTxnOps 8 holds) are moved by two Migrates started at once: each
// key lands, with its value, under the data prefix of the partition
// groups.RecordPartition names, exactly one Migrate moves keys (the other
// waits and finds the marker), and a key the partition already held is
// kept. The old keys are gone, the old owner key is retired (the
// single-lease Log is fenced out), and a later Migrate reads the marker
// and moves nothing, even with an old key put back.
func TestMigrateOnceAcrossPartitions(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	from := groupsLayout(t)
	to := txnetcd.Layout{Prefix: from.Prefix + "parts"}
	const partitions = 7
	fence := acquire(t, cli, from, 0, 1)
	log := Open(txnetcd.NewStore(cli, txnetcd.Options{Layout: from, Partitions: 1}), fence, Options{})
	want := map[string]string{} // new key → value
	for i := range 60 {
		g := fmt.Sprintf("g-%d", i)
		if _, err := log.Append(rec(t, "groups", g, "v-"+g)); err != nil {
			t.Fatal(err)
		}
		p := cluster.OffsetsPartitionFor(g, partitions)
		want[PartitionDataPrefix(to, p)+"groups/"+fmt.Sprintf("%x", g)] = "v-" + g
	}
	pos, err := log.Append(rec(t, "partitions", "\x00\x00\x00\x05", "next-of-5"))
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Log().WaitDurable(ctxT(t), pos); err != nil {
		t.Fatal(err)
	}
	log.Close()
	want[PartitionDataPrefix(to, 5)+"partitions/00000005"] = "next-of-5"
	// A key an owner of the partitions wrote already wins.
	newer := PartitionDataPrefix(to, cluster.OffsetsPartitionFor("g-3", partitions)) + "groups/" + fmt.Sprintf("%x", "g-3")
	if _, err := cli.Put(ctxT(t), newer, "newer"); err != nil {
		t.Fatal(err)
	}
	want[newer] = "newer"

	m := Migration{Client: cli, From: from, To: to, Partitions: partitions, LeaseTTL: 2 * time.Second, MaxTxnOps: 8}
	var wg sync.WaitGroup
	results := make([]MigrationResult, 2)
	for i := range results {
		wg.Go(func() {
			mi := m
			mi.NodeID = int32(i)
			r, err := Migrate(ctxT(t), mi)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	movers := 0
	for _, r := range results {
		if r.Keys > 0 {
			movers++
			if r.Keys != 61 || r.Groups != 60 || r.Kept != 1 {
				t.Errorf("the migration moved %d keys of %d groups, kept %d; want 61 of 60, 1 kept", r.Keys, r.Groups, r.Kept)
			}
		} else if !r.Done {
			t.Errorf("a Migrate that moved nothing did not see the marker: %+v", r)
		}
	}
	if movers != 1 {
		t.Fatalf("%d Migrates moved keys, want 1: %+v", movers, results)
	}
	got, err := cli.Get(ctxT(t), DataPrefix(to), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != len(want) {
		t.Errorf("%d keys under %s, want %d", len(got.Kvs), DataPrefix(to), len(want))
	}
	for _, kv := range got.Kvs {
		if w, ok := want[string(kv.Key)]; !ok || w != string(kv.Value) {
			t.Errorf("%s = %q, want %q (present: %v)", kv.Key, kv.Value, w, ok)
		}
	}
	if old := stored(t, cli, from); len(old) != 0 {
		t.Errorf("%d old keys left", len(old))
	}

	// The single-lease holder is fenced out.
	zombie := Open(txnetcd.NewStore(cli, txnetcd.Options{Layout: from, Partitions: 1}), fence, Options{})
	pos, err = zombie.Append(rec(t, "groups", "g-0", "stale"))
	if err == nil {
		err = zombie.Log().WaitDurable(ctxT(t), pos)
	}
	zombie.Close()
	if err == nil {
		t.Error("the single-lease holder wrote after the migration")
	}

	// Once done, never again.
	oldKey := DataPrefix(from) + "groups/" + fmt.Sprintf("%x", "g-0")
	if _, err := cli.Put(ctxT(t), oldKey, "stale"); err != nil {
		t.Fatal(err)
	}
	r, err := Migrate(context.Background(), m)
	if err != nil || !r.Done || r.Keys != 0 {
		t.Errorf("a second Migrate: %+v, %v; want the marker's done", r, err)
	}
	if kv, err := cli.Get(ctxT(t), PartitionDataPrefix(to, cluster.OffsetsPartitionFor("g-0", partitions))+"groups/"+fmt.Sprintf("%x", "g-0")); err != nil || len(kv.Kvs) != 1 || string(kv.Kvs[0].Value) != "v-g-0" {
		t.Errorf("g-0 after a second Migrate: %v %v", kv, err)
	}
}

// TestMigrateLargeRecords: group records too large for one etcd request
// together (six of 300 KiB, etcd's default limit 1.5 MiB) all move.
func TestMigrateLargeRecords(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	from := groupsLayout(t)
	to := txnetcd.Layout{Prefix: from.Prefix + "parts"}
	big := strings.Repeat("m", 300<<10)
	for i := range 6 {
		if _, err := cli.Put(ctxT(t), DataPrefix(from)+"groups/"+fmt.Sprintf("%x", fmt.Sprint("big-", i)), big); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Migrate(ctxT(t), Migration{Client: cli, From: from, To: to, Partitions: 3, LeaseTTL: 2 * time.Second})
	if err != nil || r.Keys != 6 || r.Groups != 6 {
		t.Fatalf("Migrate: %+v, %v; want 6 keys of 6 groups", r, err)
	}
	got, err := cli.Get(ctxT(t), DataPrefix(to), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || got.Count != 6 {
		t.Fatalf("%v keys under %s (%v), want 6", got.Count, DataPrefix(to), err)
	}
}
