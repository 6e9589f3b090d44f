package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
)

// TestGroupsMoveWithTheLease: with three coordinators on etcd the group
// coordinator runs on the holder of its lease. Two kgo
// GroupTransactSessions move every input of "orders" to "out" in
// transactions that commit their offsets (TxnOffsetCommit routed to each
// id's transaction coordinator, markers to the holder); halfway, the
// holder stops, another coordinator takes the lease and loads the groups,
// offsets and pending offsets from etcd, and the sessions go on: every
// input is in the output exactly once, and the group's committed offsets
// are the inputs' ends.
func TestGroupsMoveWithTheLease(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	const n = 400
	var seeds []string // every node: the first coordinator may be the one that stops
	for _, n := range e.View.Brokers() {
		seeds = append(seeds, n.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range n {
		producer.Produce(ctx, &kgo.Record{Value: fmt.Append(nil, i)}, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	firstHolder := holderOf(t, e, "move")

	var mu sync.Mutex
	moved := 0
	done, finish := context.WithCancel(ctx)
	defer finish()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(fmt.Sprintf("move-%d", i)),
				kgo.ConsumerGroup("move"), kgo.ConsumeTopics("orders"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"), kgo.AllowAutoTopicCreation(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Error(err)
				return
			}
			defer sess.Close()
			for {
				fs := sess.PollRecords(done, 25)
				if done.Err() != nil {
					return
				}
				if err := sess.Begin(); err != nil {
					t.Error(err)
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					sess.Produce(ctx, &kgo.Record{Value: r.Value}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				})
				committed, err := sess.End(ctx, kgo.TryCommit)
				if err != nil {
					t.Errorf("end: %v", err)
					return
				}
				mu.Lock()
				if committed {
					moved += fs.NumRecords()
				}
				all := moved >= n
				mu.Unlock()
				if all {
					finish()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	// Halfway, the holder of the group coordinator stops.
	for {
		mu.Lock()
		m := moved
		mu.Unlock()
		if m >= n/2 || done.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	if err := firstHolder.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	stopCancel()
	var rest []*Coordinator
	for _, co := range e.Coordinators {
		if co != firstHolder {
			rest = append(rest, co)
		}
	}
	e.Coordinators = rest
	wg.Wait()
	if moved < n {
		t.Fatalf("moved %d of %d before the deadline", moved, n)
	}
	if h := holderOf(t, e, "move"); h == firstHolder {
		t.Fatal("the stopped coordinator still holds the group coordinator")
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	seen := map[string]int{}
	readCtx, readCancel := context.WithTimeout(ctx, 15*time.Second)
	defer readCancel()
	for readCtx.Err() == nil && len(seen) < n {
		fs := reader.PollFetches(readCtx)
		fs.EachError(func(topic string, p int32, err error) {
			if readCtx.Err() == nil {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	more, moreCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	reader.PollFetches(more).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	moreCancel()
	var wrong []string
	for i := range n {
		if c := seen[fmt.Sprint(i)]; c != 1 {
			wrong = append(wrong, fmt.Sprintf("%d×%d", i, c))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d inputs not in the output exactly once (input×times): %v", len(wrong), n, wrong)
	}
	// The stopped node stays in Metadata (the cluster file names it): a
	// request kadm sends there fails to dial, and is tried again.
	adm := kadm.NewClient(producer)
	var ends kadm.ListedOffsets
	var offsets kadm.OffsetResponses
	// Stable, and tried again while a partition is UNSTABLE_OFFSET_COMMIT
	// (kadm does not retry it): the last transaction's offsets are
	// pending until its marker reaches the group, after its commit
	// returned.
	for attempt := 0; ; attempt++ {
		if ends, err = adm.ListEndOffsets(ctx, "orders"); err == nil {
			if offsets, err = adm.FetchOffsets(kadm.RequireStable(ctx), "move"); err == nil {
				if err = offsets.Error(); err == nil {
					break
				}
			}
		}
		if attempt == 20 {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return // nothing to commit
		}
		got, ok := offsets.Lookup("orders", o.Partition)
		if !ok || got.At != o.Offset {
			t.Errorf("orders/%d: committed %+v (%v), end %d", o.Partition, got, ok, o.Offset)
		}
	})

	// The group series: each holder counted the transactional offset
	// commits it took; the gauges are the current holder's, 0 on the
	// node that stopped.
	second := holderOf(t, e, "move")
	for _, c := range []struct {
		name string
		node int32
		ok   func(float64) bool
		want string
	}{
		{"txncoord_group_offset_commits_total", firstHolder.Node.NodeID, func(v float64) bool { return v > 0 }, "> 0"},
		{"txncoord_group_offset_commits_total", second.Node.NodeID, func(v float64) bool { return v > 0 }, "> 0"},
		{"txncoord_groups", second.Node.NodeID, func(v float64) bool { return v == 1 }, "1"},
		{"txncoord_groups", firstHolder.Node.NodeID, func(v float64) bool { return v == 0 }, "0"},
	} {
		if v := metricOfNode(t, e, c.name, c.node); !c.ok(v) {
			t.Errorf("%s{node=%d} = %v, want %s", c.name, c.node, v, c.want)
		}
	}
}

// metricOfNode sums the samples of the series name with label node in the
// embedded cluster's registry.
func metricOfNode(t *testing.T, e *Embedded, name string, node int32) float64 {
	t.Helper()
	return gatherSum(t, e, name, map[string]string{"node": fmt.Sprint(node)})
}

// holderOf waits until one running coordinator serves the groups of
// group's __consumer_offsets partition and returns it.
func holderOf(t *testing.T, e *Embedded, group string) *Coordinator {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, co := range e.Coordinators {
			if co.groups != nil && co.groups.Of(cluster.OffsetsPartitionFor(group, co.groups.partitions)) != nil {
				return co
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no coordinator serves the group coordinator")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
