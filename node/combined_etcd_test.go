package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
	replicateEverywhere(ctx, t, admin, 5, 3)

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
	txns := &txnWriter{producer: producer, topic: "placed"}
	write := func(commit bool, tag string, partitions ...int32) {
		t.Helper()
		txns.write(ctx, t, commit, tag, partitions...)
	}
	read := func() { t.Helper(); txns.readCommitted(t, e.Bootstrap(), 3) }
	write(true, "committed", 0, 1, 2)
	write(false, "aborted", 0, 1, 2)
	write(true, "again", 0, 1, 2)
	read()
	// The coordinators' shared etcd writer counts what it put: at least a
	// registration, an end and a completion of each of the three
	// transactions, in Txns that carry one write or more (a write may put
	// nothing) and put the id's key once however many writes of it they
	// carried, and at least once per transaction.
	etcdTxns, batches, keys := gatherSum(t, e, "txncoord_etcd_writer_txns_total", nil),
		gatherSum(t, e, "txncoord_etcd_writer_batches_total", nil), gatherSum(t, e, "txncoord_etcd_writer_keys_total", nil)
	if etcdTxns < 1 || batches < 9 || batches < etcdTxns || keys < 3 || keys > batches {
		t.Errorf("etcd writer: %v Txns, %v writes, %v keys", etcdTxns, batches, keys)
	}
	for _, id := range []int32{1, 2} {
		if _, ok := e.coordinatorByID(id).Partitions.HeldTopics()["placed"]; !ok {
			t.Fatalf("coordinator %d holds no data of placed: its partition was not written there", id)
		}
	}

	// Its partition has no other copy: unavailable until it returns.
	k := killCoordinator(t, e, 1)
	if err := e.Faults.Remove(k.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, 1)
	read()
	write(true, "after", 0, 2)
	write(false, "after-aborted", 0)
	read()
}

// txnWriter runs a transactional producer's transactions over topic's
// partitions and keeps the values of those committed.
type txnWriter struct {
	producer  *kgo.Client
	topic     string
	committed []string
}

// write runs one transaction writing two values to each of partitions,
// committed or aborted.
func (w *txnWriter) write(ctx context.Context, t *testing.T, commit bool, tag string, partitions ...int32) {
	t.Helper()
	if err := w.producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, p := range partitions {
		for i := range 2 {
			v := fmt.Sprintf("%s-p%d-%d", tag, p, i)
			if err := w.producer.ProduceSync(ctx, &kgo.Record{Topic: w.topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("%s, partition %d: %v", tag, p, err)
			}
			values = append(values, v)
		}
	}
	if err := w.producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end %s: %v", tag, err)
	}
	if commit {
		w.committed = append(w.committed, values...)
	}
}

// readCommitted reads the topic's partitions read_committed and checks
// that they hold the committed values, no more.
func (w *txnWriter) readCommitted(t *testing.T, bootstrap string, partitions int32) {
	t.Helper()
	got := consumeCommitted(t, bootstrap, w.topic, partitions, len(w.committed))
	var all []string
	for p := range partitions {
		all = append(all, got[p]...)
	}
	if !sameValues(all, w.committed) {
		t.Fatalf("read_committed of %s: %v, want %v", w.topic, got, w.committed)
	}
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
	f, lns := severalCoordinatorsFile(t)
	coords, startCoordinator := startSeparateCoordinators(t, f, lns, nil)
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
	txns := &txnWriter{producer: producer, topic: "apart"}
	txns.write(ctx, t, true, "committed", 0, 1, 2)
	txns.write(ctx, t, false, "aborted", 0, 1, 2)
	txns.write(ctx, t, true, "again", 0, 1, 2)
	producer.Close()
	check := func() { t.Helper(); txns.readCommitted(t, bootstrap, 3) }
	check()
	stopWithin(t, coords[1].Stop)
	coords[1] = startCoordinator(1, listenAgain(t, f.Coordinators[1].Addr))
	if _, ok := coords[1].Partitions.HeldTopics()["apart"]; !ok {
		t.Fatal("the restarted coordinator 1 holds no data of apart")
	}
	showsApart()
	check()
}
