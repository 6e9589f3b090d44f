package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScaleoutGroupCoordinatorKilledMidRebalance SIGKILLs a group's
// coordinator while the group rebalances. Two kgo members (eager range
// assignor, manual commits) consume the first half of a topic and commit
// it; a third member joins. One of the first two is held in its
// OnPartitionsRevoked callback, so it cannot rejoin and the rebalance stays
// in progress: DescribeGroups must say PreparingRebalance before the
// coordinator owning the group's __consumer_offsets partition is SIGKILLed.
// Then the held member goes on. The three members must end in one
// generation, above the one before the kill, at the group's new owner with
// every partition assigned exactly once, and consumption must resume at the offsets committed before
// the kill: every record at or after them is delivered, none before them
// (those were committed, so even at least once does not deliver them
// again; losing the offsets would start again at the log start).
func TestScaleoutGroupCoordinatorKilledMidRebalance(t *testing.T) {
	const topic, partitions, half = "rebalance-in", int32(6), 50
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions}, LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 4*time.Minute)
	const victim = int32(1)
	group := groupsOn(t, sc.offsetsLeadersAt(ctx, 0), victim, "rebalance", 1)[0]
	t.Logf("group %s on coordinator %d", group, victim)

	produce := func(from int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var recs []*kgo.Record
		for p := range partitions {
			for i := from; i < from+half; i++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d/%d", p, i)})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)

	a := startRebalanceMember(t, sc, group, topic, "a")
	b := startRebalanceMember(t, sc, group, topic, "b")
	members := []*rebalanceMember{a, b}
	before := waitOneGeneration(ctx, t, members, partitions)

	// The first half, consumed and committed by a and b.
	for consumed := 0; consumed < int(partitions)*half; {
		for _, m := range members {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := m.cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(*kgo.Record) { consumed++ })
		}
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of the first %d records", consumed, int(partitions)*half)
		}
	}
	for _, m := range members {
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("member %s: commit: %v", m.name, err)
		}
	}
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if o, ok := committed.Lookup(topic, p); !ok || o.At != half {
			t.Fatalf("committed offset of %s-%d before the rebalance: %+v (found %v), want %d", topic, p, o, ok, half)
		}
	}
	produce(half)
	// From here on every delivery is recorded; none may be below half.
	for _, m := range members {
		m.pollInBackground(ctx)
	}

	held, release := a.holdNextRevoke()
	c := startRebalanceMember(t, sc, group, topic, "c")
	c.pollInBackground(ctx)
	members = append(members, c)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("member a never started revoking: no rebalance began")
	}
	state := waitGroupState(ctx, t, sc, group, "PreparingRebalance")
	t.Logf("group %s %s at coordinator %d with member a held in its revoke", group, state.State, state.Coordinator.NodeID)
	if state.Coordinator.NodeID != victim {
		t.Fatalf("group %s described by coordinator %d, want %d", group, state.Coordinator.NodeID, victim)
	}
	killedAt := sc.KillCoordinator(victim)
	t.Logf("SIGKILL of coordinator %d mid-rebalance", victim)
	by := sc.waitGroupMoved(ctx, group, victim)
	t.Logf("group %s on coordinator %d %v after the kill", group, by, time.Since(killedAt).Round(time.Millisecond))
	release()

	gen := waitOneGeneration(ctx, t, members, partitions)
	final := waitGroupState(ctx, t, sc, group, "Stable")
	if final.Coordinator.NodeID == victim || len(final.Members) != len(members) {
		t.Fatalf("group at the end: coordinator %d, %d members, want a coordinator other than %d and %d members", final.Coordinator.NodeID, len(final.Members), victim, len(members))
	}
	seen := map[int32]int{}
	for _, dm := range final.Members {
		asg, ok := dm.Assigned.AsConsumer()
		if !ok {
			t.Fatalf("member %s's assignment is not a consumer assignment", dm.MemberID)
		}
		for _, at := range asg.Topics {
			for _, p := range at.Partitions {
				seen[p]++
			}
		}
	}
	for p := range partitions {
		if seen[p] != 1 {
			t.Errorf("DescribeGroups at the end: %s-%d assigned %d times, want once (%v)", topic, p, seen[p], seen)
		}
	}
	t.Logf("one generation %d of %d members at coordinator %d (generation %d of 2 members before the kill)", gen, len(members), final.Coordinator.NodeID, before)
	// The new owner goes on from the generations the old one gave out: a
	// generation given again would let a fenced member's commits in.
	if gen <= before {
		t.Errorf("generation %d at the end, not above %d before the kill", gen, before)
	}

	// Every record from the committed offsets on comes through, and none
	// before them.
	for {
		missing := 0
		got := map[int32]map[int]bool{}
		for _, m := range members {
			for p, offs := range m.deliveredSnapshot() {
				if got[p] == nil {
					got[p] = map[int]bool{}
				}
				for _, o := range offs {
					got[p][int(o)] = true
					if o < half {
						t.Fatalf("member %s got %s-%d offset %d after offset %d was committed: the committed offset was not kept", m.name, topic, p, o, half)
					}
				}
			}
		}
		for p := range partitions {
			for o := half; o < 2*half; o++ {
				if !got[p][o] {
					missing++
				}
			}
		}
		if missing == 0 {
			t.Logf("every record from offset %d on delivered, none before it", half)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d records from the committed offsets on never delivered", missing)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rebalanceMember is one kgo member of the rebalance test.
type rebalanceMember struct {
	t    *testing.T
	name string
	cl   *kgo.Client

	mu        sync.Mutex
	assigned  []int32 // the latest assignment
	gen       int32   // its generation
	delivered map[int32][]int64
	hold      chan struct{} // the next revoke closes held and waits for it
	held      chan struct{}
}

// holdNextRevoke makes the member's next revoke wait (it cannot rejoin)
// until release is called; held is closed once it waits.
func (m *rebalanceMember) holdNextRevoke() (held <-chan struct{}, release func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold, m.held = make(chan struct{}), make(chan struct{})
	hold := m.hold
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	m.t.Cleanup(release)
	return m.held, release
}

// startRebalanceMember starts an eager (range) member with manual commits
// that starts at the log start when its group has no offset.
func startRebalanceMember(t *testing.T, sc *scaleCluster, group, topic, name string) *rebalanceMember {
	t.Helper()
	m := &rebalanceMember{t: t, name: name, delivered: map[int32][]int64{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.ClientID("rebalance-"+name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RebalanceTimeout(2*time.Minute), kgo.SessionTimeout(45*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, a map[string][]int32) {
			_, gen := cl.GroupMetadata()
			m.mu.Lock()
			m.assigned, m.gen = slices.Sorted(slices.Values(a[topic])), gen
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, _ map[string][]int32) {
			m.mu.Lock()
			m.assigned = nil
			hold, held := m.hold, m.held
			m.hold, m.held = nil, nil
			m.mu.Unlock()
			if hold == nil {
				return
			}
			close(held)
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	t.Cleanup(cl.Close)
	return m
}

// pollInBackground polls until ctx ends or the test does, recording every
// delivery.
func (m *rebalanceMember) pollInBackground(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := m.cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			m.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { m.delivered[r.Partition] = append(m.delivered[r.Partition], r.Offset) })
			m.mu.Unlock()
		}
	}()
}

func (m *rebalanceMember) deliveredSnapshot() map[int32][]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32][]int64{}
	for p, offs := range m.delivered {
		out[p] = slices.Clone(offs)
	}
	return out
}

// waitOneGeneration waits until every member holds an assignment of the
// same generation and the assignments cover every partition exactly once,
// and returns the generation.
func waitOneGeneration(ctx context.Context, t *testing.T, members []*rebalanceMember, partitions int32) int32 {
	t.Helper()
	var why string
	for {
		why = ""
		count := map[int32]int{}
		var gen int32 = -1
		for _, m := range members {
			m.mu.Lock()
			assigned, g := m.assigned, m.gen
			m.mu.Unlock()
			_, now := m.cl.GroupMetadata()
			switch {
			case assigned == nil:
				why = fmt.Sprintf("member %s holds no assignment", m.name)
			case now != g:
				why = fmt.Sprintf("member %s is at generation %d, its assignment of %d", m.name, now, g)
			case gen >= 0 && g != gen:
				why = fmt.Sprintf("member %s at generation %d, another at %d", m.name, g, gen)
			}
			gen = g
			for _, p := range assigned {
				count[p]++
			}
		}
		if why == "" {
			for p := range partitions {
				if count[p] != 1 {
					why = fmt.Sprintf("partition %d assigned %d times (%v)", p, count[p], slices.Sorted(maps.Keys(count)))
				}
			}
		}
		if why == "" {
			return gen
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the members never shared one generation: %s", why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitGroupState waits until DescribeGroups (through the group's
// coordinator) answers state for group, and returns the description. Each
// attempt is a new client: a kgo client keeps asking the coordinator it
// found last while that one's process is gone.
func waitGroupState(ctx context.Context, t *testing.T, sc *scaleCluster, group, state string) kadm.DescribedGroup {
	t.Helper()
	var last, logged string
	for {
		if d, err := describeGroup(ctx, sc, group); err != nil {
			last = err.Error()
		} else if d.State == state {
			return d
		} else {
			last = fmt.Sprintf("state %q", d.State)
		}
		if last != logged {
			t.Logf("group %s: %s (waiting for %s)", group, last, state)
			logged = last
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never %s: %s", group, state, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func describeGroup(ctx context.Context, sc *scaleCluster, group string) (kadm.DescribedGroup, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
	if err != nil {
		return kadm.DescribedGroup{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	described, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, err
	}
	d := described[group]
	return d, d.Err
}
