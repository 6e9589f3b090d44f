package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/integration/workload"
)

// Late and duplicate WriteTxnMarkers, delivered through the fault proxy
// (KAFKA-17754, the gap KIP-1228 closes).
//
// A late marker: the proxy captures (and forwards) the commit marker of
// transaction 1, so the transaction completes normally; the producer begins
// transaction 2 and writes to the same partition; the captured copy of
// transaction 1's commit marker is then replayed to the leader. Holding the
// marker instead would not work: the coordinator waits for it (the
// transaction stays PrepareCommit) and the producer's next transaction gets
// CONCURRENT_TRANSACTIONS until it completes.
//
// Expected (reference §2 table):
//   - 4.2 leader, TV2 client: the marker arrives as v2 with TV 2 and the
//     same epoch as the open transaction 2 → INVALID_PRODUCER_EPOCH (47);
//     transaction 2's records stay invisible until their own end.
//   - 4.1 leader, TV2 client: v1, the leader decodes TV 0 and applies the
//     legacy ≥ rule → accepted, as Kafka 4.1 does: the stale commit commits
//     transaction 2's open records. Aborting transaction 2 afterwards cannot
//     take them back: the checker finds an aborted read.
//   - TV1 clients: the epoch never changes, so the legacy rule accepts the
//     stale marker on every leader (4.2 included: the marker carries TV 0).

// lateCase is one row of the demonstration.
type lateCase struct {
	name     string
	leader   int32 // 1 = the 4.2 leader, 2 = the 4.1 leader
	tv1      bool
	wantCode int16 // the replayed marker's error code at the leader
	// commit2 commits transaction 2 instead of aborting it: its record
	// becomes visible then, and only then.
	commit2 bool
}

// lateFigures is what a row measured, for the side-by-side log.
type lateFigures struct {
	replayCode     int16
	staleOffset    int64 // offset of transaction 2's record
	lsoAfterReplay int64
	report         *checker.Report
}

func TestLateMarker(t *testing.T) {
	cases := []lateCase{
		{"leader=4.2/client=tv2", 1, false, kerr.InvalidProducerEpoch.Code, false},
		{"leader=4.1/client=tv2", 2, false, 0, false},
		{"leader=4.2/client=tv1", 1, true, 0, false},
		{"leader=4.1/client=tv1", 2, true, 0, false},
		{"leader=4.2/client=tv2/commit", 1, false, kerr.InvalidProducerEpoch.Code, true},
	}
	topics := map[string]int32{}
	for i := range cases {
		topics[fmt.Sprintf("late-%d", i)] = 2
	}
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.1"}, Topics: topics, Proxied: []int32{1, 2}})
	for _, id := range []int32{1, 2} {
		c.Proxy(id).Capture(int16(kmsg.WriteTxnMarkers))
	}
	figures := make([]*lateFigures, len(cases))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			figures[i] = runLateMarker(t, c, fmt.Sprintf("late-%d", i), tc)
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-31s %-13s %-40s %s\n", "case", "replay", "txn-2 record before its end", "checker after txn-2 ends")
	for i, tc := range cases {
		f := figures[i]
		if f == nil {
			continue
		}
		vis := "invisible (LSO stays at it)"
		if f.lsoAfterReplay > f.staleOffset {
			vis = "VISIBLE (LSO moved past it)"
		}
		code := "accepted (0)"
		if f.replayCode != 0 {
			code = fmt.Sprintf("rejected (%d)", f.replayCode)
		}
		fmt.Fprintf(&b, "%-31s %-13s %-40s %s\n", tc.name, code, fmt.Sprintf("%s off=%d lso=%d", vis, f.staleOffset, f.lsoAfterReplay), f.report.Summary())
	}
	t.Logf("late-marker demonstration:\n%s", b.String())
	if !t.Failed() {
		goldenTable(t, "late_marker.txt", lateHeader, b.String())
	}
}

const lateHeader = `# Late WriteTxnMarkers (TestLateMarker): transaction 1's COMMIT marker,
# captured by the fault proxy, is replayed to the leader while the same
# producer's transaction 2 is open on that partition; transaction 2 then
# aborts (or commits, in /commit) and the checker reads everything back.
# 4.2 leader + TV2 client: v2 TV2, strict epoch rule → 47, nothing leaks.
# 4.1 leader (v1, TV decoded 0) or any TV1 client: legacy rule → accepted,
# the stale commit exposes transaction 2's record (the KIP-1228 gap).
# Refresh: go test ./integration -run TestLateMarker -rewrite
`

func runLateMarker(t *testing.T, c *Cluster, topic string, tc lateCase) *lateFigures {
	ctx := testCtx(t, 60*time.Second)
	partition := partitionOn(t, c, topic, 2, tc.leader)
	txnID := "late-" + topic
	opts := []kgo.Opt{}
	if tc.tv1 {
		opts = append(opts, kgo.MaxVersions(kversion.V3_9_0()))
	}
	cl := c.txnProducer(t, txnID, opts...)
	proxy := c.Proxy(tc.leader)

	// Transaction 1 commits normally; its marker is captured on the way.
	runTxn(ctx, t, cl, topic, []int32{partition}, "txn1", true)
	c.waitState(t, txnID, "CompleteCommit")
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := findMarker(t, proxy, pid, topic, partition, true)

	// Transaction 2 is open on the same partition.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("txn2-p%d", partition))}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce txn2: %v", err)
	}

	// The late marker.
	resp, err := proxy.Replay(ctx, stale)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	f := &lateFigures{staleOffset: rec.Offset, replayCode: markerCode(t, resp, pid, topic, partition)}
	if f.replayCode != tc.wantCode {
		t.Errorf("stale marker (v%d): error %d, want %d", stale.Version, f.replayCode, tc.wantCode)
	}
	f.lsoAfterReplay = lastStableOffset(t, c, topic, partition)
	visible := f.lsoAfterReplay > rec.Offset
	if wantVisible := tc.wantCode == 0; visible != wantVisible {
		t.Errorf("after the stale marker the LSO is %d and txn2's record is at %d: visible=%v, want %v", f.lsoAfterReplay, rec.Offset, visible, wantVisible)
	}

	// Transaction 2 ends; the checker judges the final read.
	outcome2, state2 := checker.Aborted, "CompleteAbort"
	if tc.commit2 {
		outcome2, state2 = checker.Committed, "CompleteCommit"
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(tc.commit2)); err != nil {
		t.Fatalf("end txn2 (commit=%v): %v", tc.commit2, err)
	}
	c.waitState(t, txnID, state2)
	p := checker.Partition{Topic: topic, Partition: partition}
	h := checker.History{Txns: []checker.Txn{
		{ID: "txn1", Producer: txnID, Outcome: checker.Committed, Writes: []checker.Write{{Value: fmt.Sprintf("txn1-p%d", partition), Partition: p}}},
		{ID: "txn2", Producer: txnID, Outcome: outcome2, Writes: []checker.Write{{Value: string(rec.Value), Partition: p}}},
	}}
	reads, err := workload.ReadCommitted(ctx, c.Bootstrap(), []checker.Partition{p})
	if err != nil {
		t.Fatal(err)
	}
	f.report, err = checker.Check(h, reads)
	if err != nil {
		t.Fatal(err)
	}
	wantAborted := 0
	if tc.wantCode == 0 && !tc.commit2 {
		wantAborted = 1 // the legacy gap, shown by the checker
	}
	if f.report.ValuesRead != 1+wantAborted+btoi(tc.commit2) {
		t.Errorf("read %d values: %s", f.report.ValuesRead, f.report.Summary())
	}
	if got := f.report.Counts[checker.AbortedRead]; got != wantAborted || f.report.Anomalies() != wantAborted {
		t.Errorf("checker: %s; want exactly %d aborted read(s)\n%s", f.report.Summary(), wantAborted, f.report.Table())
	}
	return f
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// findMarker returns the captured WriteTxnMarkers request that carried
// pid's marker (commit or abort) for topic/partition.
func findMarker(t testing.TB, proxy *faultproxy.Proxy, pid int64, topic string, partition int32, commit bool) faultproxy.Captured {
	t.Helper()
	for _, cp := range proxy.Captured(int16(kmsg.WriteTxnMarkers)) {
		req, ok := cp.Request.(*kmsg.WriteTxnMarkersRequest)
		if !ok {
			continue
		}
		for _, m := range req.Markers {
			if m.ProducerID != pid || m.Committed != commit {
				continue
			}
			for _, mt := range m.Topics {
				if mt.Topic == topic && containsPartition(mt.Partitions, partition) {
					return cp
				}
			}
		}
	}
	t.Fatalf("no captured marker for pid %d %s-%d commit=%v", pid, topic, partition, commit)
	return faultproxy.Captured{}
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// markerCode extracts one partition's error code from a WriteTxnMarkers
// response.
func markerCode(t testing.TB, resp kmsg.Response, pid int64, topic string, partition int32) int16 {
	t.Helper()
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		t.Fatalf("response %T", resp)
	}
	for _, m := range r.Markers {
		if m.ProducerID != pid {
			continue
		}
		for _, rt := range m.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == topic && rp.Partition == partition {
					return rp.ErrorCode
				}
			}
		}
	}
	t.Fatalf("response has no result for pid %d %s-%d", pid, topic, partition)
	return 0
}

// lastStableOffset lists a partition's LSO.
func lastStableOffset(t testing.TB, c *Cluster, topic string, partition int32) int64 {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		t.Fatalf("list committed offsets: %v", err)
	}
	o, ok := lso.Lookup(topic, partition)
	if !ok {
		t.Fatalf("no LSO for %s-%d", topic, partition)
	}
	return o.Offset
}

// TestDuplicateMarkers: every WriteTxnMarkers request to both leaders is
// forwarded twice. The second copy is the coordinator's retry after a lost
// response. Under the legacy rule (the 4.1 leader, v1) it is plainly
// accepted. On TV2 it is the KAFKA-19999 path (same epoch, no open
// transaction → accepted) unless the producer's next transaction has
// already started on that partition at the marker's epoch (TV2 overlaps
// it with the markers): then it is exactly the late marker KIP-1228
// refuses, INVALID_PRODUCER_EPOCH. Either way it is harmless: the first
// copy is accepted, a duplicate gets 0 or (TV2 only) 47, and the workload
// shows no anomaly.
func TestDuplicateMarkers(t *testing.T) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.1"}, Topics: map[string]int32{"dup-tv2": 4, "dup-tv1": 4}, Proxied: []int32{1, 2}})
	for _, id := range []int32{1, 2} {
		c.Proxy(id).Duplicate(int16(kmsg.WriteTxnMarkers))
	}
	ctx := testCtx(t, 90*time.Second)
	for _, client := range []string{"kgo-tv2", "kgo-tv1"} {
		t.Run("client="+client, func(t *testing.T) {
			topic := "dup-" + strings.TrimPrefix(client, "kgo-")
			var ps []checker.Partition
			for p := int32(0); p < 4; p++ {
				ps = append(ps, checker.Partition{Topic: topic, Partition: p})
			}
			h, err := workload.Drivers[client](ctx, workload.Config{
				Bootstrap: c.Bootstrap(), TransactionalID: "dup-" + client, Partitions: ps,
				TxnSize: 4, Txns: 6, AbortP: 0.34, Seed: 5,
			})
			if err != nil {
				t.Fatal(err)
			}
			reads, err := workload.ReadCommitted(ctx, c.Bootstrap(), ps)
			if err != nil {
				t.Fatal(err)
			}
			r, err := checker.Check(h, reads)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", r.Summary())
			if r.Anomalies() != 0 || r.TxnsCommitted == 0 || r.TxnsAborted == 0 {
				t.Fatalf("want commits, aborts and no anomaly:\n%s", r.Table())
			}
			// Each leader received every marker of this topic twice,
			// and accepted the first copy.
			for _, l := range c.Leaders {
				copies := map[string]int{}
				for _, m := range l.Leader.ReceivedMarkers() {
					if m.Topic != topic {
						continue
					}
					k := fmt.Sprintf("pid=%d epoch=%d commit=%v p=%d", m.ProducerID, m.ProducerEpoch, m.Commit, m.Partition)
					if m.ErrorCode != 0 && (copies[k] == 0 || !duplicateMayBeRefused(m.TransactionVersion, m.ErrorCode)) {
						t.Fatalf("leader %d answered copy %d of a marker with %d: %+v", l.Node.NodeID, copies[k]+1, m.ErrorCode, m)
					}
					copies[k]++
				}
				if len(copies) == 0 {
					t.Fatalf("leader %d received no marker for %s", l.Node.NodeID, topic)
				}
				for k, n := range copies {
					if n < 2 {
						t.Fatalf("leader %d: marker %s arrived %d time(s), want the duplicate too", l.Node.NodeID, k, n)
					}
				}
			}
		})
	}
	for _, id := range []int32{1, 2} {
		sw := c.Proxy(id).Swallowed(int16(kmsg.WriteTxnMarkers))
		if len(sw) == 0 {
			t.Fatalf("leader %d: no duplicate was answered", id)
		}
		refused := 0
		for _, r := range sw {
			resp, ok := r.Response.(*kmsg.WriteTxnMarkersResponse)
			if !ok {
				t.Fatalf("leader %d: swallowed response %T (%v)", id, r.Response, r.DecodeErr)
			}
			// Which marker had which TV is checked above (the
			// leader's ReceivedMarkers); a response only says its
			// version, and only v2 carries TV2.
			for _, m := range resp.Markers {
				for _, rt := range m.Topics {
					for _, rp := range rt.Partitions {
						if rp.ErrorCode == 0 {
							continue
						}
						if r.Version < 2 || !duplicateMayBeRefused(2, rp.ErrorCode) {
							t.Fatalf("leader %d answered a duplicate marker (v%d) with %d", id, r.Version, rp.ErrorCode)
						}
						refused++
					}
				}
			}
		}
		t.Logf("leader %d: %d duplicate WriteTxnMarkers requests, %d partitions refused as late (next transaction open)", id, len(sw), refused)
	}
}

// duplicateMayBeRefused: a duplicate copy of a TV2 marker may meet the
// producer's next transaction, open at the marker's epoch, and is then
// refused as KIP-1228 requires; under the legacy rule nothing refuses it.
func duplicateMayBeRefused(tv int8, code int16) bool {
	return tv >= 2 && code == kerr.InvalidProducerEpoch.Code
}
