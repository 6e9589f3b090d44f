package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/faults"
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
