package groups_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
)

// TestKgoInitialRebalanceDelay: with Kafka's default
// group.initial.rebalance.delay.ms (3 s, the cluster file leaving it out),
// two eager kgo consumers that join a new group a millisecond apart end in
// the group's first generation together, each assigned once with half of
// the partitions; DescribeConfigs reports the delay that was applied.
// Without the delay the first member completes generation 1 alone and the
// second forces generation 2.
func TestKgoInitialRebalanceDelay(t *testing.T) {
	tc := startClusterWith(t, func(f *cluster.File) { f.GroupInitialRebalanceDelayMs = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	adm := kadm.NewClient(tc.client())
	rc, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rc.On("0", nil)
	if err != nil {
		t.Fatal(err)
	}
	delay := "<missing>"
	for _, c := range v.Configs {
		if c.Key == "group.initial.rebalance.delay.ms" {
			delay = c.MaybeValue()
		}
	}
	if delay != "3000" {
		t.Fatalf("group.initial.rebalance.delay.ms = %q, want 3000", delay)
	}

	type assigned struct {
		member     int
		partitions int
	}
	var mu sync.Mutex
	assignments := map[int]int{} // member → number of assignments seen
	got := make(chan assigned, 8)
	members := make([]*kgo.Client, 2)
	for i := range members {
		i := i
		members[i] = tc.client(kgo.ConsumerGroup("initial-delay"), kgo.ConsumeTopics("in"),
			kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				assignments[i]++
				mu.Unlock()
				got <- assigned{i, len(m["in"])}
			}))
		go func() {
			for ctx.Err() == nil {
				if members[i].PollFetches(ctx).IsClientClosed() {
					return
				}
			}
		}()
		time.Sleep(time.Millisecond)
	}
	total := 0
	for range 2 {
		select {
		case a := <-got:
			if a.partitions != 3 {
				t.Errorf("member %d got %d partitions in its first assignment, want 3 of 6", a.member, a.partitions)
			}
			total += a.partitions
		case <-ctx.Done():
			t.Fatal("the members were not both assigned")
		}
	}
	for i, cl := range members {
		if _, gen := cl.GroupMetadata(); gen != 1 {
			t.Errorf("member %d is in generation %d, want 1", i, gen)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range members {
		if assignments[i] != 1 {
			t.Errorf("member %d was assigned %d times, want once", i, assignments[i])
		}
	}
}
