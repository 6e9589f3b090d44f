package markersender_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation/testkit"
)

// A marker its leader keeps refusing (NOT_LEADER_OR_FOLLOWER, which kerr names NOT_LEADER_FOR_PARTITION: a node that
// does not lead the partition, such as a coordinator node without a group
// coordinator for __consumer_offsets) is reported stuck after
// StuckAfterRefusals answers, with its reason, once (one error line, the
// gauge, Completer.MarkersStuck), and sent no more until Retry; Retry
// starts the count again.
func TestRefusedMarkerIsStuck(t *testing.T) {
	l0, n0 := startLeader(t, 0, "4.2")
	rt := newRouter()
	rt.set(cluster.OffsetsTopic, -1, n0)
	var logs logtest.Buffer
	s := newSender(t, markersender.Config{Router: rt, Metrics: prometheus.NewRegistry(), StuckAfterRefusals: 3, Log: logs.Logger()})
	rec := &recorder{}
	s.Start(rec)
	for range 100 {
		l0.Script(testkit.Action{Code: 6})
	}
	s.Enqueue(txn("wedged", 7, 3, tps(cluster.OffsetsTopic, 12)))
	ev := rec.waitEvents(t, 1)
	if !ev[0].stuck || !strings.Contains(ev[0].reason, "leader 0 answers NOT_LEADER_FOR_PARTITION for __consumer_offsets-12 (3 times in a row)") ||
		!strings.Contains(ev[0].reason, "no group coordinator") {
		t.Fatalf("want stuck with the reason, got %+v", ev[0])
	}
	if n := len(l0.Received()); n != 3 {
		t.Fatalf("leader got %d requests, want 3 (then none: stuck)", n)
	}
	if s.StuckValue() != 1 {
		t.Fatalf("stuck gauge %v", s.StuckValue())
	}
	m := s.Markers()
	if len(m) != 1 || !m[0].Stuck || m[0].Reason != ev[0].reason || m[0].Partitions[0].Leader != 0 {
		t.Fatalf("markers: %+v", m)
	}
	if n := len(logs.Lines(map[string]any{"txn_id": "wedged", "level": "error"})); n != 1 {
		t.Fatalf("%d error lines for the stuck transaction, want 1:\n%s", n, logs.String())
	}
	if !s.Retry("wedged") {
		t.Fatal("Retry: not pending")
	}
	ev = rec.waitEvents(t, 2)
	if !ev[1].stuck || len(l0.Received()) != 6 {
		t.Fatalf("after Retry: %+v, %d requests (want stuck again after 3 more)", ev, len(l0.Received()))
	}
}

// A partition with no leader at all (the Router does not know it and there
// are no leaders to place it on) is reported stuck, never retried forever.
func TestNoLeaderIsStuck(t *testing.T) {
	s := newSender(t, markersender.Config{Router: newRouter(), StuckAfterRefusals: 3})
	rec := &recorder{}
	s.Start(rec)
	s.Enqueue(txn("t1", 7, 3, tps("orders", 0)))
	ev := rec.waitEvents(t, 1)
	if !ev[0].stuck || !strings.Contains(ev[0].reason, "orders-0: no known leader for the partition (3 times in a row)") {
		t.Fatalf("want stuck (no leader), got %+v", ev[0])
	}
	if m := s.Markers(); len(m) != 1 || m[0].Partitions[0].Leader != -1 || !m[0].Stuck {
		t.Fatalf("markers: %+v", m)
	}
}

// A marker to a partition of a deleted topic is resolved, as Kafka does: its
// leader answers UNKNOWN_TOPIC_OR_PARTITION, the metadata no longer knows the
// topic, so the partition is dropped from the markers and the transaction
// completes (one info line), never stuck. A topic the metadata does not know
// but whose leader has it (auto-created elsewhere, as after a coordinator
// restart) still gets its marker, at the leader of the placement rule.
func TestDeletedTopicMarkerResolved(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	l2, n2 := startLeader(t, 2, "4.2")
	rt := newRouter()
	rt.set("orders", -1, n2)
	var logs logtest.Buffer
	// Placement (no Router entry for "gone" or "elsewhere") finds leader 1,
	// the only one.
	s := newSender(t, markersender.Config{Router: rt, Leaders: []cluster.Node{n1}, StuckAfterRefusals: 3, Log: logs.Logger()})
	rec := &recorder{}
	s.Start(rec)
	l1.Script(testkit.Action{Code: 3}) // UNKNOWN_TOPIC_OR_PARTITION
	s.Enqueue(txn("t1", 7, 3, append(tps("gone", 0), tps("orders", 1)...)))
	ev := rec.waitEvents(t, 1)
	if ev[0].stuck {
		t.Fatalf("a deleted topic's marker made the transaction stuck: %+v", ev[0])
	}
	if len(l1.Received()) != 1 || len(l2.Received()) != 1 {
		t.Fatalf("requests: leader 1 %d, leader 2 %d; want 1 each", len(l1.Received()), len(l2.Received()))
	}
	if n := len(logs.Lines(map[string]any{"txn_id": "t1", "topic": "gone", "level": "info"})); n != 1 {
		t.Fatalf("%d info lines for the skipped marker, want 1:\n%s", n, logs.String())
	}

	s.Enqueue(txn("t2", 8, 3, tps("elsewhere", 2)))
	ev = rec.waitEvents(t, 2)
	got := l1.Received()
	if ev[1].stuck || len(got) != 2 || got[1].Markers[0].ProducerID != 8 {
		t.Fatalf("a topic unknown here but led by placement: %+v, leader 1 got %+v", ev[1], got)
	}
	if s.StuckValue() != 0 {
		t.Fatalf("stuck gauge %v", s.StuckValue())
	}
}
