package groups_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/node"
)

// cluster is an embedded cluster (`txncoord up`: a coordinator, whose node
// runs the group coordinator, and two 4.2 leaders) on fixed loopback
// addresses, so that it can be stopped and started again on its data dir.
type testCluster struct {
	t     *testing.T
	file  *cluster.File
	dir   string
	addrs map[int32]string
	e     *node.Embedded
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	return startClusterWith(t, nil)
}

// startClusterAt starts the cluster with every node at one Kafka version.
func startClusterAt(t *testing.T, kafkaVersion string) *testCluster {
	t.Helper()
	return startClusterWith(t, func(f *cluster.File) {
		f.Coordinator.KafkaVersion = kafkaVersion
		for i := range f.Leaders {
			f.Leaders[i].KafkaVersion = kafkaVersion
		}
	})
}

// startClusterWith is startCluster with the cluster file changed by edit
// before the cluster starts.
func startClusterWith(t *testing.T, edit func(*cluster.File)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, dir: t.TempDir(), addrs: map[int32]string{}}
	lns := map[int32]net.Listener{}
	for id := int32(0); id <= 2; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], tc.addrs[id] = ln, ln.Addr().String()
	}
	tc.file = &cluster.File{ClusterID: "groups-test", DefaultPartitions: 3, OffsetsPartitions: 5,
		Coordinator: &cluster.Node{NodeID: 0, Addr: tc.addrs[0], KafkaVersion: "4.2"},
		Topics:      map[string]int32{"in": 6, "out": 3}, GroupInitialRebalanceDelayMs: new(int32(0))}
	for id := int32(1); id <= 2; id++ {
		tc.file.Leaders = append(tc.file.Leaders, cluster.Node{NodeID: id, Addr: tc.addrs[id], KafkaVersion: "4.2"})
	}
	if edit != nil {
		edit(tc.file)
	}
	if err := tc.file.Validate(); err != nil {
		t.Fatal(err)
	}
	tc.start(lns)
	t.Cleanup(func() { tc.stop() })
	return tc
}

func (tc *testCluster) start(lns map[int32]net.Listener) {
	tc.t.Helper()
	if lns == nil {
		lns = map[int32]net.Listener{}
		for id, addr := range tc.addrs {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				tc.t.Fatal(err)
			}
			lns[id] = ln
		}
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: tc.file, DataDir: tc.dir, Listeners: lns, MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		tc.t.Fatal(err)
	}
	tc.e = e
}

func (tc *testCluster) stop() {
	if tc.e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := tc.e.Stop(ctx); err != nil {
		tc.t.Errorf("Stop: %v", err)
	}
	tc.e = nil
}

func (tc *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	tc.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.addrs[0])}, opts...)...)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(cl.Close)
	return cl
}

func produceNumbered(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestKgoGroupOfThree: three kgo members join one by one (each join is a
// rebalance), commit after every poll with rebalances blocked meanwhile,
// and together consume every record exactly once; the committed offsets
// reach the end of every partition and survive a restart.
func TestKgoGroupOfThree(t *testing.T) {
	tc := startCluster(t)
	const n = 600
	produceNumbered(t, tc.client(), "in", n)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	pollCtx, allSeen := context.WithCancel(ctx)
	defer allSeen()
	consume := func(cl *kgo.Client) {
		defer wg.Done()
		for {
			fs := cl.PollRecords(pollCtx, 20) // few at a time, so the later members get work
			if pollCtx.Err() != nil {
				cl.AllowRebalance()
				return
			}
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
			done := total >= n
			mu.Unlock()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("commit: %v", err)
			}
			cl.AllowRebalance()
			if done {
				allSeen()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	start := time.Now()
	for i := range 3 {
		cl := tc.client(kgo.ConsumerGroup("g3"), kgo.ConsumeTopics("in"), kgo.BlockRebalanceOnPoll(),
			kgo.DisableAutoCommit(), kgo.ClientID(fmt.Sprintf("member-%d", i)))
		wg.Add(1)
		go consume(cl)
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	if total < n {
		t.Fatalf("consumed %d of %d records before the deadline", total, n)
	}
	t.Logf("3 members consumed %d records in %v", n, time.Since(start))
	for i := range n {
		if c := seen[fmt.Sprint(i)]; c != 1 {
			t.Errorf("record %d consumed %d times", i, c)
		}
	}
	adm := kadm.NewClient(tc.client())
	want := endOffsets(t, adm, "in")
	checkCommitted(ctx, t, adm, "g3", "in", want, "before the restart")
	tc.stop()
	tc.start(nil)
	adm = kadm.NewClient(tc.client())
	checkCommitted(ctx, t, adm, "g3", "in", want, "after the restart")
	groups, err := adm.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups["g3"].Group != "g3" {
		t.Fatalf("ListGroups after the restart: %v %v", groups, err)
	}
}

// checkCommitted asserts that group's committed offsets of topic are
// want (by partition); when names the moment in failures. It waits up to
// 5 s for them: a transactional commit returns before its marker reaches
// the group's coordinator, and until then its offsets are pending (a
// stable fetch of every partition answers UNSTABLE_OFFSET_COMMIT for a
// partition committed before, and lists one never committed not at all).
func checkCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, want map[int32]int64, when string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err != nil {
			t.Fatalf("%s: fetch offsets: %v", when, err)
		}
		var wrong []string
		for p, end := range want {
			if o, ok := got.Lookup(topic, p); !ok || o.At != end {
				wrong = append(wrong, fmt.Sprintf("partition %d committed %+v, want %d", p, o, end))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %s", when, strings.Join(wrong, "; "))
			return
		}
	}
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}
