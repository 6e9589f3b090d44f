package topicsetcd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnetcd"
)

func layout(t testing.TB) txnetcd.Layout {
	return txnetcd.Layout{Prefix: "/txncoord/" + strings.ReplaceAll(t.Name(), "/", "_") + "/controller"}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// acquire makes node the controller's holder with epoch, as an
// ownership.Member's acquisition would (the owner key, without the
// lease), and returns its fence.
func acquire(t testing.TB, cli *clientv3.Client, l txnetcd.Layout, node, epoch int32) txnetcd.Fence {
	t.Helper()
	o := txnetcd.Owner{NodeID: node, Epoch: epoch}
	if _, err := cli.Put(ctxT(t), l.OwnerKey(0), o.Value()); err != nil {
		t.Fatal(err)
	}
	return txnetcd.NewFence(0, o)
}

func testFile(t testing.TB) *cluster.File {
	f := &cluster.File{ClusterID: "topicsetcd-test", DefaultPartitions: 3, Topics: map[string]int32{"orders": 6},
		Coordinator: &cluster.Node{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2"}}
	for i := range 3 {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: int32(i + 1), Addr: fmt.Sprintf("127.0.0.1:%d", 9093+i), KafkaVersion: "4.2"})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

// open opens a controller over etcd as the holder of fence, with a view
// of its own (a node of its own).
func open(t testing.TB, store *txnetcd.Store, fence txnetcd.Fence) (*topics.Controller, *cluster.View) {
	t.Helper()
	v := cluster.NewView(testFile(t))
	ctl, err := topics.Open(topics.Config{View: v, Records: Open(store, fence, Options{}), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	return ctl, v
}

func str(s string) *string { return &s }

// A holder creates topics (one with configs), deletes one and alters a
// group's configs; another node takes the lease over (a higher epoch).
// The former holder, still running (a zombie: paused past its lease),
// has every write refused by the fence and etcd keeps exactly the new
// holder's state; the new holder loads the topics with their ids,
// counts, configs and the tombstone (the name created again gets a new
// id), and its own writes succeed.
func TestZombieHolderFenced(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := layout(t)
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1})

	zombie, zv := open(t, store, acquire(t, cli, l, 0, 1))
	res := zombie.Create(ctxT(t), []topics.Spec{
		{Name: "a", Partitions: 4, ReplicationFactor: -1, Configs: map[string]*string{"retention.ms": str("60000")}},
		{Name: "b", Partitions: 2, ReplicationFactor: -1},
		{Name: "gone", Partitions: 1, ReplicationFactor: -1},
	}, false)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %s: %v %s", r.Name, r.Err, r.Msg)
		}
	}
	goneID, _ := zv.Known("gone")
	if r := zombie.Delete(ctxT(t), []string{"gone"}); r[0].Err != nil {
		t.Fatalf("delete: %v", r[0].Err)
	}
	if err := zombie.AlterGroupConfigs(ctxT(t), "g1", map[string]string{"share.record.lock.duration.ms": "20000"}, false); err != nil {
		t.Fatal(err)
	}
	aID, _ := zv.Known("a")
	before := records(t, cli, l)

	fence2 := acquire(t, cli, l, 1, 2)
	// The zombie's writes: each refused, nothing written.
	res = zombie.Create(ctxT(t), []topics.Spec{{Name: "late", Partitions: 1, ReplicationFactor: -1}}, false)
	if !errors.Is(res[0].Err, kerr.NotController) || !strings.Contains(res[0].Msg, txnetcd.ErrNotOwner.Error()) {
		t.Fatalf("zombie create: %v %q, want NOT_CONTROLLER naming the fence", res[0].Err, res[0].Msg)
	}
	if r := zombie.Delete(ctxT(t), []string{"a"}); r[0].Err == nil {
		t.Fatal("zombie delete accepted")
	}
	if err := zombie.AlterConfigs(ctxT(t), "b", map[string]string{"retention.ms": "1"}, false); !errors.Is(err, txnetcd.ErrNotOwner) || !errors.Is(err, kerr.NotController) {
		t.Fatalf("zombie alter: %v, want NOT_CONTROLLER, ErrNotOwner", err)
	}
	if _, ok := zv.Known("late"); ok {
		t.Fatal("the zombie shows a topic etcd refused")
	}
	unchanged(t, cli, l, before)
	// A zombie's reload is refused too.
	if err := Open(store, txnetcd.NewFence(0, txnetcd.Owner{NodeID: 0, Epoch: 1}), Options{}).Load(func([]byte) error { return nil }); !errors.Is(err, txnetcd.ErrNotOwner) {
		t.Fatalf("zombie load: %v, want ErrNotOwner", err)
	}

	holder, hv := open(t, store, fence2)
	if got, ok := hv.Known("a"); !ok || got.ID != aID.ID || got.Partitions != 4 {
		t.Fatalf("new holder's a: %+v %v, want %+v", got, ok, aID)
	}
	if got, ok := hv.Known("b"); !ok || got.Partitions != 2 {
		t.Fatalf("new holder's b: %+v %v", got, ok)
	}
	if cfg, _ := holder.Configs("a"); cfg["retention.ms"] != "60000" {
		t.Fatalf("new holder's configs of a: %v", cfg)
	}
	if cfg, _ := holder.Configs("b"); cfg["retention.ms"] != "" {
		t.Fatalf("the zombie's alter of b shows: %v", cfg)
	}
	if g := hv.GroupConfigs("g1"); g["share.record.lock.duration.ms"] != "20000" {
		t.Fatalf("new holder's group configs: %v", g)
	}
	for _, name := range []string{"gone", "late"} {
		if _, ok := hv.Known(name); ok {
			t.Fatalf("new holder shows %s", name)
		}
	}
	if _, ok := hv.Known("orders"); !ok {
		t.Fatal("the cluster file's topic is missing")
	}
	res = holder.Create(ctxT(t), []topics.Spec{{Name: "gone", Partitions: 1, ReplicationFactor: -1}, {Name: "late", Partitions: 1, ReplicationFactor: -1}}, false)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("new holder's create %s: %v %s", r.Name, r.Err, r.Msg)
		}
	}
	if again, _ := hv.Known("gone"); again.ID == goneID.ID {
		t.Fatal("a topic created again after its deletion kept its id")
	}
}

// Seed copies a single coordinator's records once: into an empty
// layout, and never again (a second seed, or one over records the
// holder wrote, copies nothing).
func TestSeedOnce(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := layout(t)
	st, err := storage.Open(filepath.Join(t.TempDir(), "store.db"), storage.Options{NoSync: true, Log: zerolog.Nop(),
		Kinds: map[storage.Kind]storage.ApplyFunc{storage.KindTopic: topics.ApplyRecord, storage.KindAuthMeta: authmeta.ApplyRecord}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := cluster.NewView(testFile(t))
	local, err := topics.Open(topics.Config{View: v, Store: st, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if r := local.Create(ctxT(t), []topics.Spec{{Name: "kept", Partitions: 5, ReplicationFactor: -1}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	kept, _ := v.Known("kept")
	local.Close()
	recs, err := topics.SpaceRecords(st)
	if err != nil {
		t.Fatal(err)
	}
	var raws [][]byte
	if err := recs.Load(func(raw []byte) error { raws = append(raws, append([]byte(nil), raw...)); return nil }); err != nil {
		t.Fatal(err)
	}
	recs.Close()
	if len(raws) != 2 { // kept and the file's orders
		t.Fatalf("%d records in the store, want 2", len(raws))
	}
	if ok, err := Seed(ctxT(t), cli, l, Topics, raws, 0); err != nil || !ok {
		t.Fatalf("first seed: %v %v", ok, err)
	}
	if ok, err := Seed(ctxT(t), cli, l, Topics, raws[:1], 0); err != nil || ok {
		t.Fatalf("second seed: %v %v, want nothing copied", ok, err)
	}
	_, hv := open(t, txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1}), acquire(t, cli, l, 2, 1))
	if got, ok := hv.Known("kept"); !ok || got.ID != kept.ID || got.Partitions != 5 {
		t.Fatalf("seeded topic: %+v %v, want %+v", got, ok, kept)
	}
	n := 0
	if err := Snapshot(ctxT(t), cli, l, Topics, func([]byte) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("snapshot: %d records, %v", n, err)
	}
}

// The security metadata's records live beside the topics', under the same
// fence: a holder creates an ACL; another node takes the lease over; the
// former holder's ACL write is refused (NOT_CONTROLLER naming the fence)
// and changes nothing in etcd; the new holder loads the first ACL, its
// topics load beside it, and its own ACL write succeeds.
func TestZombieHolderACLFenced(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := layout(t)
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1})
	attach := func(fence txnetcd.Fence) *authmeta.State {
		st := authmeta.New()
		if err := st.Attach(Open(store, fence, Options{Codec: AuthMeta}), zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	acl := func(principal string) authmeta.Binding {
		return authmeta.Binding{ResourceType: kmsg.ACLResourceTypeTopic, Name: "orders", Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Principal: principal, Host: "*", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeDeny}
	}

	fence1 := acquire(t, cli, l, 0, 1)
	zombie := attach(fence1)
	ctl, _ := open(t, store, fence1)
	if res := ctl.Create(ctxT(t), []topics.Spec{{Name: "a", Partitions: 2, ReplicationFactor: -1}}, false); res[0].Err != nil {
		t.Fatalf("create: %v %s", res[0].Err, res[0].Msg)
	}
	if err := zombie.CreateACLs([]authmeta.Binding{acl("User:first")}); err != nil {
		t.Fatal(err)
	}
	before := records(t, cli, l)

	fence2 := acquire(t, cli, l, 1, 2)
	err := zombie.CreateACLs([]authmeta.Binding{acl("User:late")})
	if !errors.Is(err, kerr.NotController) || !errors.Is(err, txnetcd.ErrNotOwner) {
		t.Fatalf("zombie CreateACLs: %v, want NOT_CONTROLLER, ErrNotOwner", err)
	}
	if _, err := zombie.DeleteACLs([]authmeta.Filter{{ResourceType: kmsg.ACLResourceTypeAny, Pattern: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}); !errors.Is(err, txnetcd.ErrNotOwner) {
		t.Fatalf("zombie DeleteACLs: %v, want ErrNotOwner", err)
	}
	unchanged(t, cli, l, before)

	holder := attach(fence2)
	if got := holder.ACLs(); len(got) != 1 || got[0] != acl("User:first") {
		t.Fatalf("the new holder loads ACLs %v, want the first holder's one", got)
	}
	_, v2 := open(t, store, fence2)
	if _, ok := v2.Known("a"); !ok {
		t.Fatal("the new holder's controller does not load topic a beside the ACL records")
	}
	if err := holder.CreateACLs([]authmeta.Binding{acl("User:second")}); err != nil {
		t.Fatalf("the new holder's CreateACLs: %v", err)
	}
	n := 0
	if err := Snapshot(ctxT(t), cli, l, AuthMeta, func([]byte) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("snapshot of the ACL records: %d, %v; want 2", n, err)
	}
}

// records are the keys under l's data prefix, as etcd holds them now.
func records(t *testing.T, cli *clientv3.Client, l txnetcd.Layout) *clientv3.GetResponse {
	t.Helper()
	resp, err := cli.Get(ctxT(t), DataPrefix(l), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// unchanged fails t unless etcd holds the records before held, each
// unmodified (a zombie's writes changed nothing).
func unchanged(t *testing.T, cli *clientv3.Client, l txnetcd.Layout, before *clientv3.GetResponse) {
	t.Helper()
	after := records(t, cli, l)
	if len(after.Kvs) != len(before.Kvs) {
		t.Fatalf("etcd holds %d records after the zombie's writes, %d before", len(after.Kvs), len(before.Kvs))
	}
	for i := range after.Kvs {
		if after.Kvs[i].ModRevision != before.Kvs[i].ModRevision {
			t.Fatalf("%s changed by the zombie", after.Kvs[i].Key)
		}
	}
}
