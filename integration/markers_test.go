package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/txncoord/txncoord/leaderstub"
)

// markersOf returns what leader id received for producer pid.
func (c *Cluster) markersOf(id int32, pid int64) []leaderstub.ReceivedMarker {
	var out []leaderstub.ReceivedMarker
	for _, m := range c.leader(id).ReceivedMarkers() {
		if m.ProducerID == pid {
			out = append(out, m)
		}
	}
	return out
}

// partitionOn returns a partition of topic led by leader id.
func partitionOn(t testing.TB, c *Cluster, topic string, partitions int32, id int32) int32 {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		if l, ok := c.View.LeaderOf(topic, p); ok && l.NodeID == id {
			return p
		}
	}
	t.Fatalf("no partition of %s on leader %d", topic, id)
	return -1
}

// TestMixedLeadersNegotiatePerLeader: one 4.2 and one 4.1 leader; the 4.2
// leader receives WriteTxnMarkers v2 with TV 2, the 4.1 leader v1 (the
// leader decodes TV 0) — asserted on the leaders' side. Restarting the 4.1
// leader as 4.2 while the coordinator runs makes it receive v2 from then on.
func TestMixedLeadersNegotiatePerLeader(t *testing.T) { runMixedLeadersNegotiatePerLeader(t, false) }

func runMixedLeadersNegotiatePerLeader(t *testing.T, secure bool) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.1"}, Topics: map[string]int32{"orders": 4}, Secure: secure})
	ctx := testCtx(t, 90*time.Second)
	p1 := partitionOn(t, c, "orders", 4, 1)
	p2 := partitionOn(t, c, "orders", 4, 2)
	cl := c.txnProducer(t, "mixed-app")
	runTxn(ctx, t, cl, "orders", []int32{p1, p2}, "before", true)
	c.waitState(t, "mixed-app", "CompleteCommit")
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(id int32, wantVersion int16, wantTV int8, after int) int {
		t.Helper()
		ms := c.markersOf(id, pid)
		if len(ms) <= after {
			t.Fatalf("leader %d received no new marker for pid %d", id, pid)
		}
		for _, m := range ms[after:] {
			if m.RequestVersion != wantVersion || m.TransactionVersion != wantTV || m.ErrorCode != 0 {
				t.Fatalf("leader %d received %+v, want WriteTxnMarkers v%d TV %d accepted", id, m, wantVersion, wantTV)
			}
		}
		return len(ms)
	}
	seen1 := check(1, 2, 2, 0)
	seen2 := check(2, 1, 0, 0)

	c.RestartLeader(2, "4.2")
	seen2 = 0 // a restarted leader's record of received markers starts empty
	runTxn(ctx, t, cl, "orders", []int32{p1, p2}, "after", true)
	c.waitState(t, "mixed-app", "CompleteCommit")
	check(1, 2, 2, seen1)
	check(2, 2, 2, seen2)

	got := c.consumeUntil(ctx, t, "orders", []int32{p1, p2}, true,
		fmt.Sprintf("before-p%d", p1), fmt.Sprintf("before-p%d", p2), fmt.Sprintf("after-p%d", p1), fmt.Sprintf("after-p%d", p2))
	if len(got) != 4 {
		t.Fatalf("read_committed: %v", got)
	}
	var status2 string
	for _, l := range c.Coordinator.Sender.Leaders() {
		if l.NodeID == 2 {
			status2 = fmt.Sprintf("%+v", l.WriteTxnMarkers)
			if l.WriteTxnMarkers.InUse != 2 || l.WriteTxnMarkers.Max != 2 {
				t.Fatalf("leader 2 status after upgrade: %s", status2)
			}
		}
	}
}

// TestDiscoveryOffReportsStuck reproduces Kafka 4.2.0 (always v2): the 4.1
// leader closes the connection on every v2 request. Kafka's transaction
// hangs silently in PrepareCommit; txncoord reports it as stuck, with the
// reason, in the admin views.
func TestDiscoveryOffReportsStuck(t *testing.T) { runDiscoveryOffReportsStuck(t, false) }

func runDiscoveryOffReportsStuck(t *testing.T, secure bool) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.1"}, Topics: map[string]int32{"orders": 4}, NoDiscovery: true, Secure: secure})
	ctx := testCtx(t, 90*time.Second)
	p1 := partitionOn(t, c, "orders", 4, 1)
	p2 := partitionOn(t, c, "orders", 4, 2)
	cl := c.txnProducer(t, "kafka420-app")
	runTxn(ctx, t, cl, "orders", []int32{p1, p2}, "v", true)

	deadline := time.Now().Add(60 * time.Second)
	for {
		d, ok := c.Coordinator.Coordinator.Describe("kafka420-app")
		if ok && d.StuckReason != "" {
			if d.State != "PrepareCommit" {
				t.Fatalf("stuck transaction in state %s", d.State)
			}
			if !strings.Contains(d.StuckReason, "v2") || !strings.Contains(d.StuckReason, "discovery is off") {
				t.Fatalf("stuck reason does not say why: %q", d.StuckReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction never reported stuck: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pending := c.Coordinator.Sender.Markers()
	if len(pending) != 1 || !pending[0].Stuck || len(pending[0].Partitions) != 1 || pending[0].Partitions[0].Leader != 2 {
		t.Fatalf("markers view: %+v", pending)
	}
	// The 4.2 leader got its marker (v2); the 4.1 leader never accepted one.
	if ms := c.leader(1).ReceivedMarkers(); len(ms) == 0 || ms[0].RequestVersion != 2 {
		t.Fatalf("4.2 leader markers: %+v", ms)
	}
	if ms := c.leader(2).ReceivedMarkers(); len(ms) != 0 {
		t.Fatalf("4.1 leader accepted markers: %+v", ms)
	}
	// Its record stays invisible to read_committed at the 4.1 leader: the
	// last stable offset is held at the open transaction's first offset,
	// while the 4.2 leader's partition is committed past it.
	lso, err := kadm.NewClient(c.Client()).ListCommittedOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("orders", p2); o.Offset != 0 {
		t.Fatalf("stuck partition orders-%d: last stable offset %d, want 0", p2, o.Offset)
	}
	if o, _ := lso.Lookup("orders", p1); o.Offset != 2 {
		t.Fatalf("committed partition orders-%d: last stable offset %d, want 2 (record + marker)", p1, o.Offset)
	}
}
