package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/leaderstub"
)

// twoLeaderPartitions returns two partitions of topic led by different
// leaders, so one transaction spans two leaders.
func twoLeaderPartitions(t testing.TB, f *cluster.File, topic string, partitions int32) []int32 {
	t.Helper()
	first := cluster.LeaderIndex(topic, 0, len(f.Leaders))
	for p := int32(1); p < partitions; p++ {
		if cluster.LeaderIndex(topic, p, len(f.Leaders)) != first {
			return []int32{0, p}
		}
	}
	t.Fatalf("topic %s: all partitions on one leader", topic)
	return nil
}

// producerAt describes the producer pid at a partition through the leader's
// DescribeProducers.
func producerAt(t testing.TB, c *Cluster, topic string, partition int32, pid int64) (kadm.DescribedProducer, bool) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	ctx := testCtx(t, 10*time.Second)
	d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {partition: {}}})
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	p := d[topic].Partitions[partition]
	if p.Err != nil {
		t.Fatalf("describe producers %s-%d: %v", topic, partition, p.Err)
	}
	for _, dp := range p.ActiveProducers {
		if dp.ProducerID == pid {
			return dp, true
		}
	}
	return kadm.DescribedProducer{}, false
}

func (c *Cluster) leader(id int32) *leaderstub.Leader {
	for _, l := range c.Leaders {
		if l.Node.NodeID == id {
			return l.Leader
		}
	}
	c.t.Fatalf("no leader %d", id)
	return nil
}

func TestTV2EpochBumpsPerTransaction(t *testing.T) { runTV2EpochBumpsPerTransaction(t, false) }

func runTV2EpochBumpsPerTransaction(t *testing.T, secure bool) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.2"}, Topics: map[string]int32{"orders": 4}, Secure: secure})
	ctx := testCtx(t, 60*time.Second)
	parts := twoLeaderPartitions(t, c.File, "orders", 4)
	cl := c.txnProducer(t, "tv2-app")
	var pid int64 = -1
	for i := 1; i <= 3; i++ {
		runTxn(ctx, t, cl, "orders", parts, fmt.Sprintf("txn%d", i), true)
		c.waitState(t, "tv2-app", "CompleteCommit")
		id, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pid == -1 {
			pid = id
		}
		if id != pid {
			t.Fatalf("txn %d: producer id changed %d → %d", i, pid, id)
		}
		// TV2: EndTxn bumps the epoch; the client adopts the bumped epoch
		// from the EndTxn v5 response.
		if epoch != int16(i) {
			t.Fatalf("after txn %d the client's epoch is %d, want %d", i, epoch, i)
		}
		for _, p := range parts {
			dp, ok := producerAt(t, c, "orders", p, pid)
			if !ok {
				t.Fatalf("txn %d: leader of orders-%d has no state for pid %d", i, p, pid)
			}
			if dp.ProducerEpoch != int16(i) || dp.CurrentTxnStartOffset != -1 {
				t.Fatalf("txn %d: orders-%d producer epoch %d open-txn offset %d, want epoch %d and no open txn", i, p, dp.ProducerEpoch, dp.CurrentTxnStartOffset, i)
			}
			if dp.CoordinatorEpoch != c.Coordinator.Coordinator.Epoch() {
				t.Fatalf("orders-%d coordinator epoch %d, want %d", p, dp.CoordinatorEpoch, c.Coordinator.Coordinator.Epoch())
			}
		}
	}
	var want []string
	for i := 1; i <= 3; i++ {
		for _, p := range parts {
			want = append(want, fmt.Sprintf("txn%d-p%d", i, p))
		}
	}
	got := c.consumeUntil(ctx, t, "orders", parts, true, want...)
	if len(got) != 6 {
		t.Fatalf("read_committed saw %d values, want 6: %v", len(got), got)
	}
	// Every marker went out as WriteTxnMarkers v2 with TV 2 (4.2 leaders).
	for _, l := range c.Leaders {
		for _, m := range l.Leader.ReceivedMarkers() {
			if m.RequestVersion != 2 || m.TransactionVersion != 2 {
				t.Fatalf("leader %d received marker v%d tv%d, want v2 tv2", l.Node.NodeID, m.RequestVersion, m.TransactionVersion)
			}
		}
	}
}

func TestTV1ClientKeepsEpoch(t *testing.T) { runTV1ClientKeepsEpoch(t, false) }

func runTV1ClientKeepsEpoch(t *testing.T, secure bool) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.2"}, Topics: map[string]int32{"orders": 4}, Secure: secure})
	ctx := testCtx(t, 60*time.Second)
	parts := twoLeaderPartitions(t, c.File, "orders", 4)
	cl := c.txnProducer(t, "tv1-app", kgo.MaxVersions(kversion.V3_9_0()))
	for i := 1; i <= 3; i++ {
		runTxn(ctx, t, cl, "orders", parts, fmt.Sprintf("txn%d", i), i != 2)
		if i == 2 {
			c.waitState(t, "tv1-app", "CompleteAbort")
		} else {
			c.waitState(t, "tv1-app", "CompleteCommit")
		}
		_, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if epoch != 0 {
			t.Fatalf("TV1: epoch after txn %d is %d, want 0", i, epoch)
		}
	}
	got := c.consumeUntil(ctx, t, "orders", parts, true, fmt.Sprintf("txn3-p%d", parts[0]), fmt.Sprintf("txn3-p%d", parts[1]))
	for _, v := range got {
		if v[:4] == "txn2" {
			t.Fatalf("read_committed saw aborted value %s", v)
		}
	}
	if len(got) != 4 {
		t.Fatalf("read_committed saw %v, want 4 values", got)
	}
	// TV1 markers carry TV 0 on every leader: at v2 the field is 0.
	for _, l := range c.Leaders {
		ms := l.Leader.ReceivedMarkers()
		if len(ms) == 0 {
			t.Fatalf("leader %d received no markers", l.Node.NodeID)
		}
		for _, m := range ms {
			if m.TransactionVersion != 0 || m.ProducerEpoch != 0 {
				t.Fatalf("leader %d: TV1 marker with tv %d epoch %d", l.Node.NodeID, m.TransactionVersion, m.ProducerEpoch)
			}
		}
	}
}

func TestAbortInvisibleToReadCommitted(t *testing.T) { runAbortInvisibleToReadCommitted(t, false) }

func runAbortInvisibleToReadCommitted(t *testing.T, secure bool) {
	c := StartCluster(t, Options{Topics: map[string]int32{"events": 3}, Secure: secure})
	ctx := testCtx(t, 60*time.Second)
	parts := []int32{0, 1, 2}
	cl := c.txnProducer(t, "abort-app")
	runTxn(ctx, t, cl, "events", parts, "aborted", false)
	runTxn(ctx, t, cl, "events", parts, "committed", true)
	committed := c.consumeUntil(ctx, t, "events", parts, true, "committed-p0", "committed-p1", "committed-p2")
	if want := []string{"committed-p0", "committed-p1", "committed-p2"}; !slices.Equal(committed, want) {
		t.Fatalf("read_committed: %v, want %v", committed, want)
	}
	all := c.consumeUntil(ctx, t, "events", parts, false, "aborted-p0", "aborted-p1", "aborted-p2", "committed-p2")
	if len(all) != 6 {
		t.Fatalf("read_uncommitted: %v, want all 6", all)
	}
}

func TestSecondClientFencesFirst(t *testing.T) { runSecondClientFencesFirst(t, false) }

func runSecondClientFencesFirst(t *testing.T, secure bool) {
	c := StartCluster(t, Options{Topics: map[string]int32{"orders": 3}, Secure: secure})
	ctx := testCtx(t, 60*time.Second)
	first := c.txnProducer(t, "fence-app")
	runTxn(ctx, t, first, "orders", []int32{0}, "first", true)
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := c.txnProducer(t, "fence-app")
	runTxn(ctx, t, second, "orders", []int32{0}, "second", true)
	err := first.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	t.Logf("the fenced producer's commit failed as it must: %v", err)
	got := c.consumeUntil(ctx, t, "orders", []int32{0}, true, "second-p0")
	if slices.Contains(got, "zombie") {
		t.Fatalf("read_committed saw the fenced producer's record: %v", got)
	}
}
