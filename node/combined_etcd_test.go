package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/internal/etcdtest"
)

// With three coordinators on etcd (`up --coordinators 3`) every
// coordinator is a combined node: kadm's CreateTopics with a replication
// factor of every broker Metadata lists succeeds (placed by the rule on
// the leaders), one more is refused; a manual assignment puts partitions
// on coordinators 1 and 2 and a leader. kgo's TV2 transactions over the
// three commit and abort, read_committed reads the committed records,
// coordinator 1 holds its partition's data, and after the up faults' Kill
// of coordinator 1 and its return the records are read again and a new
// transaction writes its partition.
func TestCombinedNodeSeveralCoordinators(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin := combinedClient(t, e.Bootstrap())
	adm := kadm.NewClient(admin)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 5 {
		t.Fatalf("Metadata lists %d brokers, want 5 (three coordinators, two leaders)", len(brokers))
	}
	res, err := adm.CreateTopic(ctx, 4, int16(len(brokers)), nil, "rf-all")
	if err != nil || res.Err != nil {
		t.Fatalf("CreateTopic with replication factor %d: %v %v", len(brokers), err, res.Err)
	}
	for _, p := range placement(ctx, t, admin, "rf-all") {
		if len(p.Replicas) != len(brokers) || p.Replicas[0] != p.Leader || !slices.Equal(p.ISR, []int32{p.Leader}) {
			t.Fatalf("partition %d: leader %d replicas %v isr %v, want %d replicas led by the first, the leader alone in sync", p.Partition, p.Leader, p.Replicas, p.ISR, len(brokers))
		}
		if p.Leader < 3 {
			t.Fatalf("partition %d placed by the rule on coordinator %d: the rule places on the leaders", p.Partition, p.Leader)
		}
	}
	if res, _ := adm.CreateTopic(ctx, 1, int16(len(brokers)+1), nil, "rf-too-many"); !errors.Is(res.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("CreateTopic with replication factor %d: %v, want INVALID_REPLICATION_FACTOR", len(brokers)+1, res.Err)
	}

	assignment := [][]int32{{1, 3}, {2, 0}, {3, 1}}
	if rt := createAssigned(ctx, t, admin, "placed", assignment); rt.ErrorCode != 0 || rt.NumPartitions != 3 || rt.ReplicationFactor != 2 {
		t.Fatalf("CreateTopics with an assignment: error %d (%v), %d partitions, replication factor %d", rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions, rt.ReplicationFactor)
	}
	ps := placement(ctx, t, admin, "placed")
	for p, want := range assignment {
		if len(ps) != len(assignment) || ps[p].Leader != want[0] || !slices.Equal(ps[p].Replicas, want) {
			t.Fatalf("Metadata of placed: %+v, want the assignment %v, each led by its first replica", ps, assignment)
		}
	}

	if tv := e.View.TransactionVersion(); tv != 2 {
		t.Fatalf("transaction.version %d, want 2: kgo would not run TV2 transactions", tv)
	}
	producer := combinedClient(t, e.Bootstrap(), kgo.TransactionalID("several-placed"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30*time.Second))
	var want []string
	write := func(commit bool, tag string, partitions ...int32) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, p := range partitions {
			for i := range 2 {
				v := fmt.Sprintf("%s-p%d-%d", tag, p, i)
				if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "placed", Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatalf("%s, partition %d: %v", tag, p, err)
				}
				if commit {
					want = append(want, v)
				}
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %s: %v", tag, err)
		}
	}
	read := func() {
		t.Helper()
		got := consumeCommitted(t, e.Bootstrap(), "placed", 3, len(want))
		var all []string
		for p := range int32(3) {
			all = append(all, got[p]...)
		}
		if !sameValues(all, want) {
			t.Fatalf("read_committed of placed: %v, want %v", got, want)
		}
	}
	write(true, "committed", 0, 1, 2)
	write(false, "aborted", 0, 1, 2)
	write(true, "again", 0, 1, 2)
	read()
	for _, id := range []int32{1, 2} {
		if _, ok := e.coordinatorByID(id).Partitions.HeldTopics()["placed"]; !ok {
			t.Fatalf("coordinator %d holds no data of placed: its partition was not written there", id)
		}
	}

	addr := e.coordinatorByID(1).Node.Addr
	k, err := e.Faults.Add(faults.Spec{Kind: faults.Kill, Node: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Its partition has no other copy: unavailable until it returns.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("killed coordinator 1 still accepts connections on %s", addr)
	}
	if err := e.Faults.Remove(k.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, 1)
	read()
	write(true, "after", 0, 2)
	write(false, "after-aborted", 0)
	read()
}

// sameValues reports whether a and b hold the same values, in any order.
func sameValues(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Three coordinators on etcd and two leaders as separate processes would
// run them (each its own view, data dir and store; TCP between them): a
// manual assignment created at a leader puts partitions on coordinators 1
// and 2 and a leader; every node's Metadata shows them; kgo's TV2
// transactions commit and abort over them and read_committed reads the
// committed records. Coordinator 1, restarted on its data dir, holds its
// partition and serves it again.
func TestCombinedNodeSeparateCoordinatorsOnEtcd(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	f := &cluster.File{ClusterID: "separate-etcd", DefaultPartitions: 2, TransactionStatePartitions: 6,
		Etcd: &cluster.Etcd{Endpoints: etcd.Endpoints()}}
	lns := map[int32]net.Listener{}
	for id := range int32(5) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		n := cluster.Node{NodeID: id, Addr: ln.Addr().String(), KafkaVersion: "4.2"}
		if id < 3 {
			f.Coordinators = append(f.Coordinators, n)
		} else {
			f.Leaders = append(f.Leaders, n)
		}
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	startCoordinator := func(id int32, ln net.Listener) *Coordinator {
		t.Helper()
		co, err := StartCoordinator(CoordinatorConfig{View: cluster.NewView(f), DataDir: filepath.Join(dir, fmt.Sprint("c", id)), NodeID: id,
			Listener: ln, LeaseTTL: time.Second, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return co
	}
	coords := map[int32]*Coordinator{}
	for _, n := range f.Coordinators {
		coords[n.NodeID] = startCoordinator(n.NodeID, lns[n.NodeID])
	}
	t.Cleanup(func() {
		for _, co := range coords {
			stopWithin(t, co.Stop)
		}
	})
	for _, n := range f.Leaders {
		l, err := StartLeader(LeaderConfig{View: cluster.NewView(f), NodeID: n.NodeID, DataDir: dir, Listener: lns[n.NodeID], Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopWithin(t, l.Stop) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	bootstrap := f.Leaders[0].Addr
	admin := combinedClient(t, f.Leaders[1].Addr)
	assignment := [][]int32{{1}, {2}, {3}}
	want := []int32{1, 2, 3}
	for {
		rt := createAssigned(ctx, t, admin, "apart", assignment)
		if rt.ErrorCode == 0 {
			break
		}
		// Until every coordinator holds its lease, the controller's
		// view of the live brokers may lack one.
		if ctx.Err() != nil || rt.ErrorCode != kerr.InvalidReplicaAssignment.Code {
			t.Fatalf("CreateTopics with an assignment at a leader: error %d (%v)", rt.ErrorCode, rt.ErrorMessage)
		}
		time.Sleep(100 * time.Millisecond)
	}
	showsApart := func() {
		t.Helper()
		for _, n := range append(slices.Clone(f.Coordinators), f.Leaders...) {
			for {
				leaders, err := leadersAt(ctx, n.Addr, "apart")
				if err == nil && slices.Equal(leaders, want) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("node %d's Metadata of apart: leaders %v (%v), want %v", n.NodeID, leaders, err, want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	showsApart()
	producer := combinedClient(t, bootstrap, kgo.TransactionalID("apart-etcd"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var committed []string
	for i, commit := range []bool{true, false, true} {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			v := fmt.Sprintf("t%d-p%d", i, p)
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "apart", Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("transaction %d, partition %d: %v", i, p, err)
			}
			if commit {
				committed = append(committed, v)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	producer.Close()
	check := func() {
		t.Helper()
		got := consumeCommitted(t, bootstrap, "apart", 3, len(committed))
		var all []string
		for p := range int32(3) {
			all = append(all, got[p]...)
		}
		if !sameValues(all, committed) {
			t.Fatalf("apart read_committed: %v, want %v", got, committed)
		}
	}
	check()
	stopWithin(t, coords[1].Stop)
	coords[1] = startCoordinator(1, listenAgain(t, f.Coordinators[1].Addr))
	if _, ok := coords[1].Partitions.HeldTopics()["apart"]; !ok {
		t.Fatal("the restarted coordinator 1 holds no data of apart")
	}
	showsApart()
	check()
}
