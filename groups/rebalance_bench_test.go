package groups_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/node"
)

// BenchmarkGroupOfThreeRebalance is issue 16's goal measurement: a group
// of 3 kgo members (kgo's defaults: cooperative-sticky, 3 s heartbeats)
// rebalances within 2x the time kfake takes in the same run. Each
// iteration runs a new group against txncoord (`txncoord up` embedded: a
// coordinator and two leaders) and then against kfake (3 brokers), and
// times each until a stable assignment: every member holds 2 of the
// topic's 6 partitions, none twice. Two cases:
//
//   - form: 3 members start at once;
//   - third-joins: a third member joins a stable group of two (the two
//     learn of it at a heartbeat, give up a partition each, and rejoin).
//
// It reports both means and their ratio (never asserted):
//
//	go test ./groups/ -run '^$' -bench GroupOfThreeRebalance -benchtime 5x
func BenchmarkGroupOfThreeRebalance(b *testing.B) {
	const topic, partitions = "in", 6
	tc := startBenchCluster(b, topic, partitions)
	kf, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, topic))
	if err != nil {
		b.Fatal(err)
	}
	defer kf.Close()
	for _, bc := range []struct {
		name  string
		first int // members started (and stable) before the clock starts
	}{{"form", 0}, {"third-joins", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			targets := []struct {
				name  string
				seeds []string
				total time.Duration
			}{{name: "txncoord", seeds: []string{tc}}, {name: "kfake", seeds: kf.ListenAddrs()}}
			for i := 0; i < b.N; i++ {
				for j := range targets {
					d, err := timeStableGroup(targets[j].seeds, fmt.Sprintf("bench-%s-%d", bc.name, i), topic, partitions, bc.first)
					if err != nil {
						b.Fatalf("%s: %v", targets[j].name, err)
					}
					targets[j].total += d
				}
			}
			tx := targets[0].total.Seconds() * 1000 / float64(b.N)
			kms := targets[1].total.Seconds() * 1000 / float64(b.N)
			b.ReportMetric(tx, "txncoord-ms/op")
			b.ReportMetric(kms, "kfake-ms/op")
			b.ReportMetric(tx/kms, "ratio")
		})
	}
}

// timeStableGroup starts first members of group and waits until they
// share the partitions evenly, then starts the rest of 3 members and
// returns the time from then until the 3 hold every partition once,
// evenly.
func timeStableGroup(seeds []string, group, topic string, partitions int32, first int) (time.Duration, error) {
	const members = 3
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	held := make([]map[int32]bool, members)
	started := 0
	reached := make(chan struct{}, members)
	check := func() { // mu held: the started members share every partition evenly
		owner := map[int32]bool{}
		for _, h := range held[:started] {
			if len(h) != int(partitions)/started {
				return
			}
			for p := range h {
				if owner[p] {
					return
				}
				owner[p] = true
			}
		}
		select {
		case reached <- struct{}{}:
		default:
		}
	}
	var clients []*kgo.Client
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	startMember := func(m int) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range a[topic] {
					held[m][p] = true
				}
				check()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range r[topic] {
					delete(held[m], p)
				}
				check()
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range l[topic] {
					delete(held[m], p)
				}
			}))
		if err != nil {
			return err
		}
		clients = append(clients, cl)
		// Polling drives the group (and the callbacks).
		go func() {
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
		return nil
	}
	wait := func() error {
		select {
		case <-reached:
			return nil
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("no stable assignment of %d members in 60 s: %v", started, held)
		}
	}
	// start begins members [from, to) at once.
	start := func(from, to int) error {
		mu.Lock()
		for m := from; m < to; m++ {
			held[m] = map[int32]bool{}
		}
		started = to
		// A stale signal of the smaller group must not end the wait.
		select {
		case <-reached:
		default:
		}
		mu.Unlock()
		for m := from; m < to; m++ {
			if err := startMember(m); err != nil {
				return err
			}
		}
		return nil
	}
	if first > 0 {
		if err := start(0, first); err != nil {
			return 0, err
		}
		if err := wait(); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	if err := start(first, members); err != nil {
		return 0, err
	}
	if err := wait(); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// startBenchCluster starts `txncoord up` embedded (a 4.2 coordinator and
// two 4.2 leaders) and returns its bootstrap address.
func startBenchCluster(b *testing.B, topic string, partitions int32) string {
	b.Helper()
	lns := map[int32]net.Listener{}
	addrs := map[int32]string{}
	for id := int32(0); id <= 2; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
	}
	f := &cluster.File{ClusterID: "groups-bench", DefaultPartitions: 3,
		Coordinator: &cluster.Node{NodeID: 0, Addr: addrs[0], KafkaVersion: "4.2"},
		Topics:      map[string]int32{topic: partitions}, GroupInitialRebalanceDelayMs: new(int32(0))}
	for id := int32(1); id <= 2; id++ {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: addrs[id], KafkaVersion: "4.2"})
	}
	if err := f.Validate(); err != nil {
		b.Fatal(err)
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: f, DataDir: b.TempDir(), Listeners: lns, MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		e.Stop(ctx)
	})
	return e.Bootstrap()
}
