package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/groupsetcd"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wire"
)

// singleLeaseOffsets runs a group coordinator of every group on the
// single-lease layout of f's cluster (<prefix>/groups, one partition,
// records at groupsetcd.DataPrefix), as a cluster ran it before the
// groups spread over the __consumer_offsets partitions, and commits
// offsets[group][partition of "orders"] through the Kafka API. It returns
// once the coordinator is closed (every commit durable in etcd).
func singleLeaseOffsets(t *testing.T, cli *clientv3.Client, f *cluster.File, offsets map[string][]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	view := cluster.NewView(f)
	layout := txnetcd.Layout{Prefix: view.Etcd().Prefix + "/groups"}
	owner := txnetcd.Owner{NodeID: 0, Epoch: 1}
	if _, err := cli.Put(ctx, layout.OwnerKey(0), owner.Value()); err != nil {
		t.Fatal(err)
	}
	log := groupsetcd.Open(txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: 1}), txnetcd.NewFence(0, owner), groupsetcd.Options{})
	coord, err := groups.Open(groups.Config{NodeID: 0, View: view, Records: log, TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	reg := wire.NewRegistry()
	coord.Register(reg)
	srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	wc, err := wire.Dial(ctx, srv.Addr().String(), "migration-test")
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	for group, offs := range offsets {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		for p, o := range offs {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(p), o
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := wc.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("single-lease commit of %s %d: error %d", group, rp.Partition, rp.ErrorCode)
				}
			}
		}
	}
}

// relistened is f with fresh loopback listeners for every node (a
// restart of the whole cluster on the same etcd).
func relistened(t *testing.T, f *cluster.File) (*cluster.File, map[int32]net.Listener) {
	t.Helper()
	g := *f
	g.Coordinators, g.Leaders = nil, nil
	listeners := map[int32]net.Listener{}
	relisten := func(n cluster.Node) cluster.Node {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[n.NodeID] = ln
		n.Addr = ln.Addr().String()
		return n
	}
	for _, n := range f.Coordinators {
		g.Coordinators = append(g.Coordinators, relisten(n))
	}
	for _, n := range f.Leaders {
		g.Leaders = append(g.Leaders, relisten(n))
	}
	return &g, listeners
}

// fetchOrders is group's committed offsets of "orders" partitions 0-3
// through kadm (-1: none).
func fetchOrders(t *testing.T, ctx context.Context, adm *kadm.Client, group string) []int64 {
	t.Helper()
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	out := []int64{-1, -1, -1, -1}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "orders" && o.Partition >= 0 && o.Partition < 4 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// TestGroupsMigratedFromSingleLease: a cluster's offsets committed while
// one group coordinator served every group (its records under
// <prefix>/groups) are, after the coordinators start with the groups
// spread over the __consumer_offsets partitions, each group's offsets on
// its partition's owner: kadm's OffsetFetch (routed by FindCoordinator)
// returns them for every group. The old records are gone, the marker
// says how many groups moved, and a former single-lease coordinator is
// fenced out. A whole-cluster restart does not move anything again: old
// keys put back under <prefix>/groups stay there, and an offset committed
// after the migration is not overwritten by the old one.
func TestGroupsMigratedFromSingleLease(t *testing.T) {
	f, listeners := severalCoordinatorsFile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: f.Etcd.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	// Eight groups whose partitions are six apart: spread over the
	// range, so over the coordinators.
	view := cluster.NewView(f)
	offsets := map[string][]int64{}
	used := map[int32]bool{}
	for i := 0; len(offsets) < 8 && i < 10_000; i++ {
		g := fmt.Sprintf("old-%d", i)
		if p := cluster.OffsetsPartitionFor(g, view.OffsetsPartitions()); p%6 == 0 && !used[p] {
			used[p] = true
			n := int64(100 * len(offsets))
			offsets[g] = []int64{n + 1, n + 2, n + 3, n + 4}
		}
	}
	singleLeaseOffsets(t, cli, f, offsets)
	old := txnetcd.Layout{Prefix: view.Etcd().Prefix + "/groups"}
	before, err := cli.Get(ctx, groupsetcd.DataPrefix(old), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Kvs) < len(offsets)*4 {
		t.Fatalf("the single-lease coordinator left %d keys, want at least %d offsets", len(before.Kvs), len(offsets)*4)
	}
	partitions := map[int32]bool{}
	for g := range offsets {
		partitions[cluster.OffsetsPartitionFor(g, view.OffsetsPartitions())] = true
	}
	t.Logf("%d groups hashed to %d __consumer_offsets partitions, %d keys under %s", len(offsets), len(partitions), len(before.Kvs), groupsetcd.DataPrefix(old))

	e := startEmbeddedFile(t, t.TempDir(), f, listeners)
	waitOwned(t, e, 12)
	// Once the partitions spread over the coordinators, the offsets come
	// from several owners.
	var served map[int32]*Coordinator
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		served = waitGroupPartitionsServed(t, e)
		owners := map[int32]bool{}
		for p := range partitions {
			owners[served[p].Node.NodeID] = true
		}
		if len(owners) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			for _, co := range e.Coordinators {
				t.Logf("coordinator %d runs %d instances", co.Node.NodeID, len(co.groups.All()))
			}
			t.Fatalf("the groups' partitions are on coordinators %v only", owners)
		}
	}
	cctx, cl := seededClient(t, e)
	adm := kadm.NewClient(cl)
	for g, want := range offsets {
		if got := fetchOrders(t, cctx, adm, g); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("group %s on coordinator %d: offsets %v, want the single lease's %v", g,
				served[cluster.OffsetsPartitionFor(g, view.OffsetsPartitions())].Node.NodeID, got, want)
		}
	}
	left, err := cli.Get(ctx, groupsetcd.DataPrefix(old), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if left.Count != 0 {
		t.Errorf("%d keys left under %s after the migration", left.Count, groupsetcd.DataPrefix(old))
	}
	marker, err := cli.Get(ctx, groupsetcd.Migration{From: old}.MarkerKey())
	if err != nil || len(marker.Kvs) != 1 {
		t.Fatalf("marker: %v, %d keys", err, len(marker.Kvs))
	}
	var note struct {
		Groups int `json:"groups"`
	}
	if err := json.Unmarshal(marker.Kvs[0].Value, &note); err != nil || note.Groups != len(offsets) {
		t.Errorf("marker %s: %v, want %d groups", marker.Kvs[0].Value, err, len(offsets))
	}
	// A coordinator still running the single lease writes nothing now.
	zombie := groupsetcd.Open(txnetcd.NewStore(cli, txnetcd.Options{Layout: old, Partitions: 1}),
		txnetcd.NewFence(0, txnetcd.Owner{NodeID: 0, Epoch: 1}), groupsetcd.Options{})
	rec, err := groups.EncodeRecord([]groups.RecordOp{{Bucket: []byte("partitions"), Key: []byte{0, 0, 0, 0}, Value: make([]byte, 8)}})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := zombie.Append(rec)
	if err == nil {
		err = zombie.Log().WaitDurable(ctx, pos)
	}
	zombie.Close()
	if !errors.Is(err, txnetcd.ErrNotOwner) {
		t.Errorf("a single-lease coordinator's write after the migration: %v, want %v", err, txnetcd.ErrNotOwner)
	}

	// After the migration: old-0 commits anew, and the old keys are put
	// back as a coordinator of the old layout had left them.
	var moved string
	for g := range offsets {
		moved = g
		break
	}
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 9_999, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(cctx, moved, commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit after the migration: %v %v", err, resp.Error())
	}
	for _, kv := range before.Kvs {
		if _, err := cli.Put(ctx, string(kv.Key), string(kv.Value)); err != nil {
			t.Fatal(err)
		}
	}
	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	if err := e.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	stopCancel()

	g, listeners := relistened(t, f)
	e = startEmbeddedFile(t, t.TempDir(), g, listeners)
	waitGroupPartitionsServed(t, e)
	cctx, cl = seededClient(t, e)
	adm = kadm.NewClient(cl)
	for grp, want := range offsets {
		if grp == moved {
			want = append([]int64{9_999}, want[1:]...)
		}
		if got := fetchOrders(t, cctx, adm, grp); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after a restart, group %s: offsets %v, want %v", grp, got, want)
		}
	}
	again, err := cli.Get(ctx, groupsetcd.DataPrefix(old), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if again.Count != int64(len(before.Kvs)) {
		t.Errorf("the restart touched the old keys put back: %d left of %d", again.Count, len(before.Kvs))
	}
}
