package ownership

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/txnetcd"
)

const parts = 50

var layout = txnetcd.Layout{Prefix: "/txncoord/test"}

// tm is a member under test with every event it delivered.
type tm struct {
	*Member
	cli *clientv3.Client

	mu     sync.Mutex
	events []Event
	done   chan struct{}
}

func (m *tm) lost() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	for _, e := range m.events {
		if !e.Acquired {
			out = append(out, e)
		}
	}
	return out
}

// start starts member node on its own client of c.
func start(t *testing.T, c *etcdtest.Cluster, node int32, ttl time.Duration) *tm {
	t.Helper()
	cli, err := clientv3.New(c.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := Start(Config{Client: cli, Layout: layout, NodeID: node, Partitions: parts,
		LeaseTTL: ttl, Settle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := &tm{Member: mem, cli: cli, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for e := range mem.Events() {
			m.mu.Lock()
			m.events = append(m.events, e)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mem.Close()
		<-m.done
		cli.Close()
	})
	return m
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < timeout {
		if err = cond(); err == nil {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not after %v: %v", what, timeout, err)
	return 0
}

// balanced checks that ms together own every partition exactly once, each
// between floor and ceil of partitions/len(ms), and that every member's
// watch view agrees.
func balanced(ms ...*tm) error {
	owner := map[int32]int32{}
	for _, m := range ms {
		owned := m.Owned()
		lo, hi := parts/len(ms), (parts+len(ms)-1)/len(ms)
		if len(owned) < lo || len(owned) > hi {
			return fmt.Errorf("node %d owns %d, want %d..%d", m.NodeID(), len(owned), lo, hi)
		}
		for p := range owned {
			if prev, dup := owner[p]; dup {
				return fmt.Errorf("partition %d owned by %d and %d", p, prev, m.NodeID())
			}
			owner[p] = m.NodeID()
		}
	}
	if len(owner) != parts {
		return fmt.Errorf("%d partitions owned", len(owner))
	}
	for _, m := range ms {
		for p, n := range owner {
			if got, _, ok := m.Owner(p); !ok || got != n {
				return fmt.Errorf("node %d sees %d owned by %d (ok %v), owner is %d", m.NodeID(), p, got, ok, n)
			}
		}
	}
	return nil
}

func epochs(ms ...*tm) map[int32]int32 {
	out := map[int32]int32{}
	for _, m := range ms {
		for p, e := range m.Owned() {
			out[p] = e
		}
	}
	return out
}

// fenceHolds reports whether a write conditioned on f would be applied.
func fenceHolds(t *testing.T, cli *clientv3.Client, f txnetcd.Fence) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(layout.OwnerKey(f.Partition)), "=", f.OwnerValue)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	return resp.Succeeded
}

func TestThreeMembersShareAndCloseMovesPartitions(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b, d := start(t, c, 0, time.Second), start(t, c, 1, time.Second), start(t, c, 2, time.Second)
	took := waitFor(t, 10*time.Second, "3 members balanced", func() error { return balanced(a, b, d) })
	t.Logf("3 members own 50 partitions %d/%d/%d after %v", len(a.Owned()), len(b.Owned()), len(d.Owned()), took)
	for _, m := range []*tm{a, b, d} {
		if !m.Ready() {
			t.Fatalf("node %d not ready: %v", m.NodeID(), m.Err())
		}
		if got := m.Members(); len(got) != 3 {
			t.Fatalf("node %d sees members %v", m.NodeID(), got)
		}
	}
	before := epochs(a, b, d)
	dOwned := d.Owned()

	closed := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(d.Owned()) != 0 {
		t.Fatalf("closed member still owns %v", d.Owned())
	}
	waitFor(t, 10*time.Second, "2 members balanced", func() error { return balanced(a, b) })
	t.Logf("closed member's %d partitions re-owned after %v", len(dOwned), time.Since(closed))
	after := epochs(a, b)
	for p := range dOwned {
		if after[p] <= before[p] {
			t.Fatalf("partition %d: epoch %d after the move, %d before", p, after[p], before[p])
		}
	}
	// The closed member reported every partition it had lost.
	<-d.done
	lost := map[int32]bool{}
	for _, e := range d.lost() {
		lost[e.Partition] = true
	}
	for p := range dOwned {
		if !lost[p] {
			t.Fatalf("closed member never reported %d lost", p)
		}
	}
}

// A paused member (its keepalives and loop stopped, as SIGSTOP would)
// stops believing it owns anything once its TTL passed, the others take
// its partitions with higher epochs after its lease expires, and its
// fences no longer match; resumed, it reports them lost and rejoins.
func TestPausedMemberLosesPartitions(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b, z := start(t, c, 0, time.Second), start(t, c, 1, time.Second), start(t, c, 2, time.Second)
	waitFor(t, 10*time.Second, "3 members balanced", func() error { return balanced(a, b, z) })
	zOwned := z.Owned()
	var fences []txnetcd.Fence
	for p := range zOwned {
		f, ok := z.Fence(p)
		if !ok {
			t.Fatalf("no fence for owned partition %d", p)
		}
		if !fenceHolds(t, a.cli, f) {
			t.Fatalf("fence of owned partition %d does not hold", p)
		}
		fences = append(fences, f)
	}

	z.paused.Store(true)
	took := waitFor(t, 10*time.Second, "paused member's partitions taken", func() error {
		now := epochs(a, b)
		for p, e := range zOwned {
			if now[p] <= e {
				return fmt.Errorf("partition %d at epoch %d (was %d)", p, now[p], e)
			}
		}
		return nil
	})
	t.Logf("TTL %v: partitions of a paused member re-owned after %v", z.LeaseTTL(), took)
	if got := z.Owned(); len(got) != 0 {
		t.Fatalf("paused member still believes it owns %v (TTL %v)", got, z.LeaseTTL())
	}
	for _, f := range fences {
		if _, ok := z.Fence(f.Partition); ok {
			t.Fatalf("paused member still hands out a fence for %d", f.Partition)
		}
		if fenceHolds(t, a.cli, f) {
			t.Fatalf("stale fence %v still matches", f)
		}
	}

	z.paused.Store(false)
	z.wake()
	waitFor(t, 10*time.Second, "resumed member reports its partitions lost", func() error {
		lost := map[int32]bool{}
		for _, e := range z.lost() {
			lost[e.Partition] = true
		}
		for p := range zOwned {
			if !lost[p] {
				return fmt.Errorf("%d not reported lost", p)
			}
		}
		return nil
	})
	waitFor(t, 10*time.Second, "balanced after the member rejoins", func() error { return balanced(a, b, z) })
	for _, f := range fences {
		if fenceHolds(t, a.cli, f) {
			t.Fatalf("stale fence %v matches after the member rejoined", f)
		}
	}
}

// Takeover time: a member dies (no revoke, its client closed), and its
// partitions are re-owned once its lease expires.
func TestTakeoverAfterDeath(t *testing.T) {
	ttls := []time.Duration{time.Second, 2 * time.Second}
	if testing.Verbose() && os.Getenv("OWNERSHIP_TAKEOVER_5S") != "" {
		ttls = append(ttls, 5*time.Second) // the default TTL, for the report
	}
	for _, ttl := range ttls {
		t.Run(ttl.String(), func(t *testing.T) {
			c := etcdtest.Start(t, 1)
			a, b, d := start(t, c, 0, ttl), start(t, c, 1, ttl), start(t, c, 2, ttl)
			waitFor(t, 10*time.Second, "3 members balanced", func() error { return balanced(a, b, d) })
			dOwned := d.Owned()
			d.kill()
			d.cli.Close()
			took := waitFor(t, 5*ttl+5*time.Second, "dead member's partitions re-owned", func() error {
				now := epochs(a, b)
				for p, e := range dOwned {
					if now[p] <= e {
						return fmt.Errorf("partition %d at epoch %d (was %d)", p, now[p], e)
					}
				}
				return nil
			})
			t.Logf("TTL %v: takeover of %d partitions %v after the member died", ttl, len(dOwned), took)
			waitFor(t, 10*time.Second, "2 members balanced", func() error { return balanced(a, b) })
		})
	}
}

// One of three etcd members killed changes nothing; two killed and the
// members report not ready and stop believing they own anything; etcd
// back, and they are ready and own everything again with higher epochs.
func TestEtcdQuorumLoss(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ttl := 2 * time.Second
	a, b, d := start(t, c, 0, ttl), start(t, c, 1, ttl), start(t, c, 2, ttl)
	waitFor(t, 15*time.Second, "3 members balanced", func() error { return balanced(a, b, d) })
	before := epochs(a, b, d)

	c.Kill(0)
	time.Sleep(2 * ttl)
	if err := balanced(a, b, d); err != nil {
		t.Fatalf("after killing 1 of 3 etcd members: %v", err)
	}
	for _, m := range []*tm{a, b, d} {
		if l := m.lost(); len(l) != 0 {
			t.Fatalf("node %d lost %v with 2 of 3 etcd members up", m.NodeID(), l)
		}
		if !m.Ready() {
			t.Fatalf("node %d not ready with 2 of 3 etcd members up: %v", m.NodeID(), m.Err())
		}
	}
	for p, e := range epochs(a, b, d) {
		if e != before[p] {
			t.Fatalf("partition %d moved (epoch %d, was %d) with 2 of 3 etcd members up", p, e, before[p])
		}
	}

	killed := time.Now()
	c.Kill(1)
	waitFor(t, 3*ttl+5*time.Second, "members not ready without quorum", func() error {
		for _, m := range []*tm{a, b, d} {
			if m.Ready() {
				return fmt.Errorf("node %d still ready", m.NodeID())
			}
			if n := len(m.Owned()); n != 0 {
				return fmt.Errorf("node %d still owns %d", m.NodeID(), n)
			}
		}
		return nil
	})
	t.Logf("quorum lost: every member not ready and owning nothing %v after the second kill (TTL %v); a reason: %v", time.Since(killed), ttl, a.Err())

	c.Restart(0)
	c.Restart(1)
	took := waitFor(t, 30*time.Second, "members back after quorum returns", func() error {
		for _, m := range []*tm{a, b, d} {
			if !m.Ready() {
				return m.Err()
			}
		}
		return balanced(a, b, d)
	})
	t.Logf("quorum back: members ready and balanced after %v", took)
	for p, e := range epochs(a, b, d) {
		if e <= before[p] {
			t.Fatalf("partition %d at epoch %d after the outage, %d before", p, e, before[p])
		}
	}
}
