package markersender_test

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation/testkit"
	"github.com/txncoord/txncoord/txncore"
)

func startLeader(t *testing.T, id int32, version string) (*testkit.FakeLeader, cluster.Node) {
	t.Helper()
	l, err := testkit.StartFakeLeader(version)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, cluster.Node{NodeID: id, Addr: l.Addr(), KafkaVersion: version}
}

func newSender(t *testing.T, cfg markersender.Config) *markersender.Sender {
	t.Helper()
	cfg.Discovery = true
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 20*time.Millisecond
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	s := markersender.New(cfg)
	t.Cleanup(s.Close)
	return s
}

func txn(id string, pid int64, epoch int16, parts []txncore.TopicPartition) markersender.Txn {
	return markersender.Txn{Markers: txncore.Markers{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: true,
		TransactionVersion: 2, Partitions: parts}, CoordinatorEpoch: 1}
}

// Everything queued for a leader goes out as one request: 40 transactions
// of 3 partitions each on two leaders, enqueued before Start, arrive as
// exactly one request per leader, at v2 for the 4.2 leader and v1 for 4.1.
func TestBatchesOneRequestPerLeader(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	l2, n2 := startLeader(t, 2, "4.1")
	rt := newRouter()
	rt.set("a", -1, n1)
	rt.set("b", -1, n2)
	s := newSender(t, markersender.Config{Router: rt})
	for i := range 40 {
		s.Enqueue(txn("t"+string(rune('A'+i)), int64(100+i), 1, append(tps("a", 0, 1), tps("b", 2)...)))
	}
	rec := &recorder{}
	s.Start(rec)
	ev := rec.waitEvents(t, 40)
	for _, e := range ev {
		if e.stuck {
			t.Fatalf("stuck: %+v", e)
		}
	}
	for _, c := range []struct {
		l       *testkit.FakeLeader
		version int16
		parts   int
	}{{l1, 2, 2}, {l2, 1, 1}} {
		got := c.l.Received()
		if len(got) != 1 || got[0].Version != c.version || len(got[0].Markers) != 40 {
			t.Fatalf("leader got %d requests (want 1 at v%d with 40 markers): %+v", len(got), c.version, got)
		}
		for _, m := range got[0].Markers {
			if m.Partitions != c.parts {
				t.Fatalf("marker %+v: want %d partitions", m, c.parts)
			}
		}
	}
}

// NOT_LEADER_OR_FOLLOWER re-routes: the marker goes to the partition's new
// leader once the metadata names it (below StuckAfterRefusals answers).
func TestNotLeaderReroutes(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	l2, n2 := startLeader(t, 2, "4.2")
	rt := newRouter()
	rt.set("orders", 0, n1)
	s := newSender(t, markersender.Config{Router: rt, Leaders: []cluster.Node{n1, n2}, StuckAfterRefusals: 1 << 20})
	rec := &recorder{}
	s.Start(rec)
	for range 1000 { // leader 1 keeps answering NOT_LEADER_OR_FOLLOWER
		l1.Script(testkit.Action{Code: 6})
	}
	s.Enqueue(txn("t1", 7, 3, tps("orders", 0)))
	waitFor(t, 5*time.Second, func() (int, bool) { return len(l1.Received()), len(l1.Received()) >= 1 })
	rt.set("orders", 0, n2)
	ev := rec.waitEvents(t, 1)
	if ev[0].stuck || len(l2.Received()) != 1 {
		t.Fatalf("events %+v, leader 2 got %d requests", ev, len(l2.Received()))
	}
}

// A stuck transaction is reported once, stays visible, and resumes on Retry.
func TestStuckThenRetry(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	rt := newRouter()
	rt.set("orders", -1, n1)
	reg := prometheus.NewRegistry()
	s := newSender(t, markersender.Config{Router: rt, Metrics: reg})
	rec := &recorder{}
	s.Start(rec)
	l1.Script(testkit.Action{Code: 52})
	s.Enqueue(txn("t1", 7, 3, tps("orders", 0, 1)))
	ev := rec.waitEvents(t, 1)
	if !ev[0].stuck || !strings.Contains(ev[0].reason, "TRANSACTION_COORDINATOR_FENCED") {
		t.Fatalf("want stuck (fenced), got %+v", ev[0])
	}
	if got := s.StuckValue(); got != 1 {
		t.Fatalf("stuck gauge %v", got)
	}
	if ls := s.Leaders(); ls[0].StuckTransactions != 1 {
		t.Fatalf("leaders: %+v", ls)
	}
	sent := len(l1.Received())
	if !s.Retry("t1") || s.Retry("nope") {
		t.Fatal("Retry result")
	}
	ev = rec.waitEvents(t, 2)
	if ev[1].stuck || len(l1.Received()) != sent+1 {
		t.Fatalf("after retry: %+v, requests %d", ev, len(l1.Received()))
	}
	if got := s.StuckValue(); got != 0 {
		t.Fatalf("stuck gauge after retry %v", got)
	}
	if len(s.Markers()) != 0 {
		t.Fatalf("pending after completion: %+v", s.Markers())
	}
}

// Forget drops a stuck transaction without completing it.
func TestForget(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	rt := newRouter()
	rt.set("orders", -1, n1)
	s := newSender(t, markersender.Config{Router: rt})
	rec := &recorder{}
	s.Start(rec)
	l1.Script(testkit.Action{Code: 52})
	s.Enqueue(txn("t1", 7, 3, tps("orders", 0)))
	rec.waitEvents(t, 1)
	s.Forget("t1")
	if len(s.Markers()) != 0 || s.Retry("t1") {
		t.Fatal("forgotten transaction still pending")
	}
	// A later transaction still completes, and t1 never does.
	s.Enqueue(txn("t2", 8, 3, tps("orders", 0)))
	ev := rec.waitEvents(t, 2)
	if ev[1].txn.TransactionalID != "t2" || ev[1].stuck {
		t.Fatalf("events %+v", ev)
	}
}

// Enqueue replaces the pending entry of the same transactional id.
func TestEnqueueReplaces(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	rt := newRouter()
	rt.set("orders", -1, n1)
	s := newSender(t, markersender.Config{Router: rt})
	s.Enqueue(txn("t1", 7, 3, tps("orders", 0)))
	s.Enqueue(txn("t1", 7, 4, tps("orders", 1)))
	rec := &recorder{}
	s.Start(rec)
	ev := rec.waitEvents(t, 1)
	got := l1.Received()
	if len(got) != 1 || len(got[0].Markers) != 1 || got[0].Markers[0].ProducerEpoch != 4 || ev[0].txn.ProducerEpoch != 4 {
		t.Fatalf("requests %+v events %+v", got, ev)
	}
	s.Enqueue(txn("t9", 9, 1, tps("orders", 0)))
	if ev := rec.waitEvents(t, 2); len(ev) != 2 || ev[1].txn.TransactionalID != "t9" {
		t.Fatalf("the replaced entry completed too: %+v", ev)
	}
}

// A leader restarted as 4.2 (from 4.1) on the same address gets v2 after
// the reconnect, with no operator action; Leaders shows the new range.
func TestLeaderUpgradeRenegotiates(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.1")
	rt := newRouter()
	rt.set("orders", -1, n1)
	s := newSender(t, markersender.Config{Router: rt, Leaders: []cluster.Node{n1}})
	rec := &recorder{}
	s.Start(rec)
	s.Enqueue(txn("t1", 7, 3, tps("orders", 0)))
	rec.waitEvents(t, 1)
	if ls := s.Leaders()[0]; ls.WriteTxnMarkers.InUse != 1 || ls.WriteTxnMarkers.Max != 1 {
		t.Fatalf("before upgrade: %+v", ls)
	}
	if err := l1.Restart("4.2"); err != nil {
		t.Fatal(err)
	}
	s.Enqueue(txn("t2", 8, 3, tps("orders", 0)))
	ev := rec.waitEvents(t, 2)
	if ev[1].stuck {
		t.Fatalf("stuck: %+v", ev[1])
	}
	got := l1.Received()
	if last := got[len(got)-1]; last.Version != 2 || last.Markers[0].TransactionVersion != 2 {
		t.Fatalf("after upgrade the leader got %+v", last)
	}
	if ls := s.Leaders()[0]; ls.WriteTxnMarkers.InUse != 2 || ls.WriteTxnMarkers.Max != 2 || !ls.Connected {
		t.Fatalf("after upgrade: %+v", ls)
	}
}

// Leaders() marshals to exactly the contract's JSON shape.
func TestLeadersJSONShape(t *testing.T) {
	_, n1 := startLeader(t, 1, "4.2")
	s := newSender(t, markersender.Config{Router: newRouter(), Leaders: []cluster.Node{n1}})
	s.Start(&recorder{})
	ls := waitFor(t, 5*time.Second, func() ([]markersender.LeaderStatus, bool) {
		ls := s.Leaders()
		return ls, ls[0].Connected
	})
	raw, err := json.Marshal(ls)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"node_id":1,"addr":"` + n1.Addr + `","kafka_version":"4.2","write_txn_markers":{"min":0,"max":2,"in_use":2},"connected":true,"queued_markers":0,"stuck_transactions":0,"last_error":"","sender":0}]`
	if string(raw) != want { // "sender" added by the admin backend (an addition to the contract)
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
}

// Several requests in flight per leader, one marker per request: every
// transaction completes exactly once.
func TestMaxInFlight(t *testing.T) {
	l1, n1 := startLeader(t, 1, "4.2")
	rt := newRouter()
	rt.set("orders", -1, n1)
	reg := prometheus.NewRegistry()
	s := newSender(t, markersender.Config{Router: rt, MaxInFlight: 3, MaxMarkersPerRequest: 1, Metrics: reg})
	rec := &recorder{}
	s.Start(rec)
	for i := range 30 {
		s.Enqueue(txn(string(rune('a'+i)), int64(i), 1, tps("orders", int32(i%3))))
	}
	ev := rec.waitEvents(t, 30)
	seen := map[string]bool{}
	for _, e := range ev {
		if e.stuck || seen[e.txn.TransactionalID] {
			t.Fatalf("event %+v (dup=%v)", e, seen[e.txn.TransactionalID])
		}
		seen[e.txn.TransactionalID] = true
	}
	if n := len(l1.Received()); n != 30 {
		t.Fatalf("%d requests, want 30", n)
	}
	if got := s.SentValue("1", "2"); got != 30 {
		t.Fatalf("txncoord_markers_sent_total{leader=1,version=2} = %v", got)
	}
}

// Close stops every goroutine the Sender started, even with markers in
// flight to a leader that never answers.
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		l1, err := testkit.StartFakeLeader("4.2")
		if err != nil {
			t.Fatal(err)
		}
		defer l1.Close()
		n1 := cluster.Node{NodeID: 1, Addr: l1.Addr(), KafkaVersion: "4.2"}
		rt := newRouter()
		rt.set("orders", -1, n1)
		rt.set("nowhere", -1, cluster.Node{NodeID: 2, Addr: "127.0.0.1:1", KafkaVersion: "4.1"})
		s := markersender.New(markersender.Config{Router: rt, Leaders: []cluster.Node{n1}, Discovery: true, MaxInFlight: 2})
		l1.Script(testkit.Action{Hang: true})
		rec := &recorder{}
		s.Start(rec)
		s.Enqueue(txn("t1", 1, 1, tps("orders", 0)))
		s.Enqueue(txn("t2", 2, 1, tps("nowhere", 0)))
		s.Enqueue(txn("t3", 3, 1, nil)) // no partitions: written at once
		waitFor(t, 5*time.Second, func() (int, bool) { return len(l1.Received()), len(l1.Received()) == 1 })
		s.Close()
		s.Close() // idempotent
		s.Enqueue(txn("t4", 4, 1, tps("orders", 0)))
		if ev := rec.snapshot(); len(ev) != 1 || ev[0].txn.TransactionalID != "t3" {
			t.Fatalf("events %+v", ev)
		}
	}()
	waitFor(t, 5*time.Second, func() (int, bool) { n := runtime.NumGoroutine(); return n, n <= before })
}

// TestHeldUntilDurable: a transaction handed over with a Prepare not yet
// durable (Txn.At, Pos) goes at once to a leader appending to the same log
// (Config.LeaderLog), and to a leader elsewhere only once At is durable up
// to Pos; a Prepare whose log fails first has no markers at all.
func TestHeldUntilDurable(t *testing.T) {
	same, nSame := startLeader(t, 1, "4.2")
	other, nOther := startLeader(t, 2, "4.2")
	rt := newRouter()
	rt.set("same", -1, nSame)
	rt.set("other", -1, nOther)
	var log durable.Tracker
	s := newSender(t, markersender.Config{Router: rt, LeaderLog: func(addr string) durable.Log {
		if addr == nSame.Addr {
			return &log
		}
		return nil
	}})
	rec := &recorder{}
	s.Start(rec)
	prepare, _ := log.Next(nil)
	t1 := txn("t1", 7, 3, append(tps("same", 0), tps("other", 0)...))
	t1.At, t1.Pos = &log, prepare
	s.Enqueue(t1)
	waitFor(t, 5*time.Second, func() (int, bool) { return len(same.Received()), len(same.Received()) == 1 })
	time.Sleep(50 * time.Millisecond) // what is held stays held: a short look
	if n := len(other.Received()); n != 0 || len(rec.snapshot()) != 0 {
		t.Fatalf("before the Prepare was durable: leader elsewhere got %d requests, %d completions", n, len(rec.snapshot()))
	}
	log.Advance(prepare)
	if ev := rec.waitEvents(t, 1); ev[0].stuck || len(other.Received()) != 1 {
		t.Fatalf("after the Prepare was durable: %+v, leader elsewhere got %d requests", ev, len(other.Received()))
	}

	failed, _ := log.Next(nil)
	t2 := txn("t2", 8, 3, tps("other", 1))
	t2.At, t2.Pos = &log, failed
	s.Enqueue(t2)
	log.Fail(errors.New("disk gone"))
	waitFor(t, 5*time.Second, func() (int, bool) { n := len(s.Undelivered("t2")); return n, n == 0 })
	time.Sleep(50 * time.Millisecond)
	if n := len(other.Received()); n != 1 || len(rec.snapshot()) != 1 {
		t.Fatalf("a Prepare that failed: leader elsewhere got %d requests (want still 1), %d completions", n, len(rec.snapshot()))
	}
}
