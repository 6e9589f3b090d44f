package leaderstub

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/wire"
)

// Tests of the produce path's held batches (00_produce.go): a TV2
// transactional batch at a bumped epoch that reaches a partition before the
// marker of its producer's previous transaction there waits for it.

// produceResult is one Produce answer as the tests look at it.
type produceResult struct {
	code int16
	base int64
}

// pendingProduce is a Produce whose Reply resolves in the background.
type pendingProduce struct {
	done chan struct{} // closed once answered
	rs   []produceResult
}

func (pp *pendingProduce) answered() bool {
	select {
	case <-pp.done:
		return true
	default:
		return false
	}
}

// startProduce runs the Produce handler as the wire server does (in the
// caller's goroutine, so handlers keep request order) and resolves its
// Reply in the background, as the connection's writer goroutine does.
func (f *fixture) startProduce(req *kmsg.ProduceRequest, version int16, log zerolog.Logger) *pendingProduce {
	return f.startProduceStopping(req, version, log, nil)
}

// startProduceStopping is startProduce with the server's Stopping channel.
func (f *fixture) startProduceStopping(req *kmsg.ProduceRequest, version int16, log zerolog.Logger, stopping <-chan struct{}) *pendingProduce {
	req.SetVersion(version)
	reply := f.l.handleProduce(context.Background(), &wire.Request{Body: req, Key: 0, Version: version, Log: log, Stopping: stopping})
	pend := &pendingProduce{done: make(chan struct{})}
	go func() {
		defer close(pend.done)
		resp, err := reply()
		if err != nil {
			f.t.Errorf("produce reply: %v", err)
			return
		}
		for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
			for _, rp := range rt.Partitions {
				pend.rs = append(pend.rs, produceResult{rp.ErrorCode, rp.BaseOffset})
			}
		}
	}()
	return pend
}

// awaitProduce waits for a started Produce's answer (20 s is a failure
// bound, not a synchronization).
func awaitProduce(t *testing.T, pend *pendingProduce) []produceResult {
	t.Helper()
	select {
	case <-pend.done:
		return pend.rs
	case <-time.After(20 * time.Second):
		t.Fatal("the produce was never answered")
		return nil
	}
}

// notAnswered fails if a started Produce already has its answer.
func notAnswered(t *testing.T, pend *pendingProduce, what string) {
	t.Helper()
	if pend.answered() {
		t.Fatalf("%s was answered %v before the previous transaction's marker", what, pend.rs)
	}
}

// txnProduce is a one-partition transactional Produce of partition t/0.
func txnProduce(txnID string, b testBatch) *kmsg.ProduceRequest {
	b.txn = true
	return produceReq("t", 0, &txnID, -1, b.bytes())
}

func (f *fixture) mustProduce(t *testing.T, req *kmsg.ProduceRequest) int64 {
	t.Helper()
	rp := f.call(f.l.handleProduce, req, 12).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		t.Fatalf("produce: %s", codeName(rp.ErrorCode))
	}
	return rp.BaseOffset
}

func (f *fixture) marker(pid int64, epoch int16, commit bool) int16 {
	resp := f.call(f.l.handleWriteTxnMarkers, markerReq(pid, epoch, commit, 0, 2, "t", 0), 2).(*kmsg.WriteTxnMarkersResponse)
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// heldCount is how many producers have a held batch on t/0.
func (f *fixture) heldCount() int {
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.held)
}

// waitHeld waits until pend's batch of producer pid is held on t/0 and
// waiting for a marker (not merely queued to run), and fails at once if
// pend is answered instead.
func (f *fixture) waitHeld(t *testing.T, pid int64, pend *pendingProduce) {
	t.Helper()
	p, _ := f.l.partitionFor("t", 0)
	waitFor(t, fmt.Sprintf("a held batch of producer %d", pid), func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return (p.held[pid] != nil && p.markerApplied != nil) || pend.answered()
	})
	notAnswered(t, pend, fmt.Sprintf("producer %d's batch", pid))
}

func (f *fixture) entryOf(pid int64) producerEntry {
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.entry(pid)
}

// fetchCommitted is a read_committed Fetch of t/0 from offset 0.
func (f *fixture) fetchCommitted() kmsg.FetchResponseTopicPartition {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.IsolationLevel = 1<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return f.call(f.l.handleFetch, req, 11).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// batchList prints the batches of a record set: "base:pid/epoch[/COMMIT|ABORT]".
func batchList(t *testing.T, raw []byte) string {
	t.Helper()
	var out []string
	for len(raw) > 0 {
		h, n, err := parseHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%d:%d/%d", int64(binary.BigEndian.Uint64(raw)), h.ProducerID, h.ProducerEpoch)
		if h.control() {
			s += "/ABORT"
			if binary.BigEndian.Uint16(raw[batchHeaderLen+7:]) == 1 { // the control key's type
				s = strings.TrimSuffix(s, "/ABORT") + "/COMMIT"
			}
		}
		out = append(out, s)
		raw = raw[n:]
	}
	return strings.Join(out, " ")
}

func (f *fixture) describe(t *testing.T, pid int64) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	resp := f.call(f.l.handleDescribeProducers, describeReq("t", 0), 0).(*kmsg.DescribeProducersResponse)
	for _, p := range resp.Topics[0].Partitions[0].ActiveProducers {
		if p.ProducerID == pid {
			return p
		}
	}
	t.Fatalf("DescribeProducers: no producer %d", pid)
	return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
}

// TestAwaitsPreviousMarker: only a transactional batch above the entry's
// epoch while the entry has an open transaction is held back.
func TestAwaitsPreviousMarker(t *testing.T) {
	open := producerEntry{ProducerID: 1, Epoch: 3, CoordinatorEpoch: -1, TxnFirstOffset: 10}
	closed := open
	closed.TxnFirstOffset = -1
	for _, tc := range []struct {
		name  string
		e     producerEntry
		epoch int16
		txn   bool
		want  bool
	}{
		{"bumped epoch, txn open", open, 4, true, true},
		{"two epochs up, txn open", open, 5, true, true},
		{"same epoch, txn open", open, 3, true, false},
		{"lower epoch, txn open", open, 2, true, false},
		{"bumped epoch, no txn open", closed, 4, true, false},
		{"first batch", emptyEntry(1), 0, true, false},
		{"non-transactional, bumped epoch, txn open", open, 4, false, false},
	} {
		h := batchHeader{ProducerID: 1, ProducerEpoch: tc.epoch, BaseSequence: 0}
		if tc.txn {
			h.Attributes = attrTransactional
		}
		if got := awaitsPreviousMarker(tc.e, h); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// heldThenMarker opens a transaction of pid 1 at epoch 0 on t/0 (offset 0),
// sends the next transaction's first batch at epoch 1 (it must be held:
// no answer, nothing appended, the handler returned), then the previous
// transaction's TV2 marker at epoch 1, which must be accepted; it returns
// the held produce's answer.
func heldThenMarker(t *testing.T, f *fixture, commit bool) produceResult {
	t.Helper()
	if off := f.mustProduce(t, txnProduce("held", testBatch{pid: 1, epoch: 0, seq: 0, payload: "first"})); off != 0 {
		t.Fatalf("first transaction at offset %d, want 0", off)
	}
	ch := f.startProduce(txnProduce("held", testBatch{pid: 1, epoch: 1, seq: 0, payload: "second"}), 12, zerolog.Nop())
	f.waitHeld(t, 1, ch)
	if end := f.logEnd(); end != 1 {
		t.Fatalf("log end %d while the batch is held, want 1 (nothing appended)", end)
	}
	if e := f.entryOf(1); e.Epoch != 0 || e.TxnFirstOffset != 0 {
		t.Fatalf("entry while held: %+v, want epoch 0 with the txn open at 0", e)
	}
	if code := f.marker(1, 1, commit); code != 0 {
		t.Fatalf("the previous transaction's marker (epoch 1, TV2): %s, want NONE", codeName(code))
	}
	rs := awaitProduce(t, ch)
	if f.heldCount() != 0 {
		t.Fatal("a held batch is still registered after it was appended")
	}
	return rs[0]
}

// TestHeldBatchWaitsForCommitMarker: the epoch-1 batch waits for the epoch-1
// COMMIT of the epoch-0 transaction, then goes after the marker and opens
// the new transaction there.
func TestHeldBatchWaitsForCommitMarker(t *testing.T) {
	f := newFixture(t)
	res := heldThenMarker(t, f, true)
	if res.code != 0 || res.base != 2 {
		t.Fatalf("held produce answered %s at %d, want NONE at 2 (after the marker at 1)", codeName(res.code), res.base)
	}
	fp := f.fetchCommitted()
	if fp.ErrorCode != 0 || fp.HighWatermark != 3 || fp.LastStableOffset != 2 || len(fp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed: error %d hw %d lso %d aborted %v; want hw 3, lso 2, none aborted",
			fp.ErrorCode, fp.HighWatermark, fp.LastStableOffset, fp.AbortedTransactions)
	}
	if got := batchList(t, fp.RecordBatches); got != "0:1/0 1:1/1/COMMIT" {
		t.Fatalf("read_committed batches %q, want the first txn's record and its COMMIT only", got)
	}
	if !bytes.Contains(fp.RecordBatches, []byte("first-0")) || bytes.Contains(fp.RecordBatches, []byte("second-0")) {
		t.Fatal("read_committed: want first-0 and not second-0")
	}
	p := f.describe(t, 1)
	if p.ProducerEpoch != 1 || p.CurrentTxnStartOffset != 2 || p.LastSequence != 0 || p.CoordinatorEpoch != 0 {
		t.Fatalf("DescribeProducers: %+v, want epoch 1, txn open at 2, last seq 0", p)
	}
}

// TestHeldBatchReleasedByAbortMarker: the same with an ABORT: the first
// transaction is aborted (and listed as such), the new one stays open.
func TestHeldBatchReleasedByAbortMarker(t *testing.T) {
	f := newFixture(t)
	res := heldThenMarker(t, f, false)
	if res.code != 0 || res.base != 2 {
		t.Fatalf("held produce answered %s at %d, want NONE at 2 (after the marker at 1)", codeName(res.code), res.base)
	}
	fp := f.fetchCommitted()
	if fp.ErrorCode != 0 || fp.HighWatermark != 3 || fp.LastStableOffset != 2 {
		t.Fatalf("read_committed: error %d hw %d lso %d; want hw 3, lso 2", fp.ErrorCode, fp.HighWatermark, fp.LastStableOffset)
	}
	if len(fp.AbortedTransactions) != 1 || fp.AbortedTransactions[0].ProducerID != 1 || fp.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v, want pid 1 from 0", fp.AbortedTransactions)
	}
	if got := batchList(t, fp.RecordBatches); got != "0:1/0 1:1/1/ABORT" {
		t.Fatalf("read_committed batches %q", got)
	}
	p := f.describe(t, 1)
	if p.ProducerEpoch != 1 || p.CurrentTxnStartOffset != 2 || p.LastSequence != 0 {
		t.Fatalf("DescribeProducers: %+v, want epoch 1, txn open at 2, last seq 0", p)
	}
}

// TestHeldBatchRefusedWithoutMarker: no marker within the bound (the
// configured cap, or the request's timeout when lower): the partition is
// answered NOT_ENOUGH_REPLICAS, nothing is appended, one Info line is
// logged; the marker is still accepted afterwards and the client's retry
// goes in.
func TestHeldBatchRefusedWithoutMarker(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cap           time.Duration
		timeoutMillis int32
		want          time.Duration
	}{
		{"config cap", 200 * time.Millisecond, 5000, 200 * time.Millisecond},
		{"request timeout", 0, 150, 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, func(c *Config) { c.PrevTxnMarkerWait = tc.cap })
			f.mustProduce(t, txnProduce("held", testBatch{pid: 1, epoch: 0, seq: 0, payload: "first"}))
			logs := &logtest.Buffer{}
			req := txnProduce("held", testBatch{pid: 1, epoch: 1, seq: 0, payload: "second"})
			req.TimeoutMillis = tc.timeoutMillis
			start := time.Now()
			rs := awaitProduce(t, f.startProduce(req, 12, zerolog.New(logs).Level(zerolog.InfoLevel)))
			waited := time.Since(start)
			if rs[0].code != kerr.NotEnoughReplicas.Code || rs[0].base != -1 {
				t.Fatalf("answered %s at %d, want NOT_ENOUGH_REPLICAS at -1", codeName(rs[0].code), rs[0].base)
			}
			if waited < tc.want {
				t.Fatalf("answered after %v, before the %v bound", waited, tc.want)
			}
			if end := f.logEnd(); end != 1 {
				t.Fatalf("log end %d after the refusal, want 1", end)
			}
			if e := f.entryOf(1); e.Epoch != 0 || e.TxnFirstOffset != 0 || f.heldCount() != 0 {
				t.Fatalf("after the refusal: entry %+v, %d held; want epoch 0, txn open at 0, none held", e, f.heldCount())
			}
			lines := logs.Lines(map[string]any{"message": "produce: batch held for the previous transaction's marker refused"})
			if len(lines) != 1 {
				t.Fatalf("%d refusal log lines, want 1", len(lines))
			}
			l := lines[0]
			if l["level"] != "info" || l["pid"] != 1.0 || l["epoch"] != 1.0 || l["current_epoch"] != 0.0 ||
				l["topic"] != "t" || l["partition"] != 0.0 || l["error_code"] != float64(kerr.NotEnoughReplicas.Code) {
				t.Fatalf("refusal log line %v", l)
			}
			if code := f.marker(1, 1, true); code != 0 {
				t.Fatalf("the marker after the refusal: %s", codeName(code))
			}
			if off := f.mustProduce(t, txnProduce("held", testBatch{pid: 1, epoch: 1, seq: 0, payload: "second"})); off != 2 {
				t.Fatalf("the retry went in at %d, want 2", off)
			}
		})
	}
}

// TestHeldBatchReleasedOnClose: closing the leader answers the held batch
// at once (NOT_LEADER_OR_FOLLOWER), and nothing was appended.
func TestHeldBatchReleasedOnClose(t *testing.T) {
	f := newFixture(t) // default bound: 10 s (the request's 5 s timeout here)
	f.mustProduce(t, txnProduce("held", testBatch{pid: 1, epoch: 0, seq: 0, payload: "first"}))
	ch := f.startProduce(txnProduce("held", testBatch{pid: 1, epoch: 1, seq: 0, payload: "second"}), 12, zerolog.Nop())
	f.waitHeld(t, 1, ch)
	start := time.Now()
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	rs := awaitProduce(t, ch)
	if rs[0].code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("answered %s, want NOT_LEADER_OR_FOLLOWER", codeName(rs[0].code))
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Fatalf("answered %v after Close: the wait bound, not the close, released it", waited)
	}
	f.open()
	if end := f.logEnd(); end != 1 {
		t.Fatalf("log end %d after reopening, want 1", end)
	}
	if e := f.entryOf(1); e.Epoch != 0 || e.TxnFirstOffset != 0 {
		t.Fatalf("entry after reopening: %+v", e)
	}
}

// TestHeldBatchReleasedOnServerStop: the server beginning to drain
// (Request.Stopping) answers the held batch too.
func TestHeldBatchReleasedOnServerStop(t *testing.T) {
	f := newFixture(t) // the request's 5 s timeout bounds the wait
	f.mustProduce(t, txnProduce("held", testBatch{pid: 1, epoch: 0, seq: 0, payload: "first"}))
	stopping := make(chan struct{})
	ch := f.startProduceStopping(txnProduce("held", testBatch{pid: 1, epoch: 1, seq: 0, payload: "second"}), 12, zerolog.Nop(), stopping)
	f.waitHeld(t, 1, ch)
	start := time.Now()
	close(stopping)
	rs := awaitProduce(t, ch)
	if rs[0].code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("answered %s, want NOT_LEADER_OR_FOLLOWER", codeName(rs[0].code))
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Fatalf("answered %v after the server began stopping: the wait bound, not the stop, released it", waited)
	}
	if end := f.logEnd(); end != 1 {
		t.Fatalf("log end %d, want 1", end)
	}
}

// TestHeldBatchKeepsProducerOrder: the next request on the connection (the
// next sequence of the new transaction) and a retry of the held batch
// arrive while it is held; they queue behind it, and once the marker is
// applied they go in order: seq 0 at 2, seq 1 at 3, the retry answered 2
// as a duplicate. Without the queue the two later batches would race the
// held one for the partition lock; the scenario runs for 20 producers.
func TestHeldBatchKeepsProducerOrder(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 20; i++ {
		pid := int64(100 + i)
		txn := fmt.Sprintf("order-%d", i)
		first := f.mustProduce(t, txnProduce(txn, testBatch{pid: pid, epoch: 0, seq: 0, payload: "first"}))
		seq0 := f.startProduce(txnProduce(txn, testBatch{pid: pid, epoch: 1, seq: 0, payload: "a"}), 12, zerolog.Nop())
		seq1 := f.startProduce(txnProduce(txn, testBatch{pid: pid, epoch: 1, seq: 1, payload: "b"}), 12, zerolog.Nop())
		retry := f.startProduce(txnProduce(txn, testBatch{pid: pid, epoch: 1, seq: 0, payload: "a"}), 12, zerolog.Nop())
		f.waitHeld(t, pid, seq0)
		notAnswered(t, seq1, "seq 1")
		notAnswered(t, retry, "the retry of seq 0")
		if end := f.logEnd(); end != first+1 {
			t.Fatalf("producer %d: log end %d while held, want %d", pid, end, first+1)
		}
		if code := f.marker(pid, 1, true); code != 0 {
			t.Fatalf("producer %d: marker %s", pid, codeName(code))
		}
		r0, r1, rr := awaitProduce(t, seq0)[0], awaitProduce(t, seq1)[0], awaitProduce(t, retry)[0]
		want := first + 2 // after the marker
		if r0 != (produceResult{0, want}) || r1 != (produceResult{0, want + 1}) || rr != (produceResult{0, want}) {
			t.Fatalf("producer %d: seq 0 %s@%d, seq 1 %s@%d, retry %s@%d; want NONE@%d, NONE@%d, NONE@%d",
				pid, codeName(r0.code), r0.base, codeName(r1.code), r1.base, codeName(rr.code), rr.base, want, want+1, want)
		}
		if end := f.logEnd(); end != want+2 {
			t.Fatalf("producer %d: log end %d, want %d (the retry appended nothing)", pid, end, want+2)
		}
		if code := f.marker(pid, 2, true); code != 0 {
			t.Fatalf("producer %d: closing marker %s", pid, codeName(code))
		}
	}
}

// TestHeldBatchDoesNotBlockOthers: while a batch is held, the request's
// other partition is appended at once, another producer of the same
// partition and a non-transactional producer are answered, and markers of
// other producers are applied; only the held partition waits.
func TestHeldBatchDoesNotBlockOthers(t *testing.T) {
	f := newFixture(t)
	f.view = cluster.NewView(testFile([]cluster.Node{{NodeID: 1, Addr: "127.0.0.1:2", KafkaVersion: "4.2"}}, map[string]int32{"t": 1, "u": 1}))
	f.restart()
	f.mustProduce(t, txnProduce("held", testBatch{pid: 1, epoch: 0, seq: 0, payload: "first"}))
	f.mustProduce(t, txnProduce("other", testBatch{pid: 2, epoch: 0, seq: 0, payload: "other"}))

	// One request: t/0 (held) and u/0 (first batch of pid 1 there).
	req := txnProduce("held", testBatch{pid: 1, epoch: 1, seq: 0, payload: "second"})
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "u"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testBatch{pid: 1, epoch: 1, seq: 0, txn: true, payload: "u"}.bytes()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ch := f.startProduce(req, 12, zerolog.Nop())
	f.waitHeld(t, 1, ch)
	u, _ := f.l.partitionFor("u", 0)
	u.mu.RLock()
	uEnd := u.nextOffset
	u.mu.RUnlock()
	if uEnd != 1 {
		t.Fatalf("u/0 log end %d while t/0 is held, want 1 (appended at once)", uEnd)
	}
	// The other producer's next batch, a plain batch, and its marker.
	if off := f.mustProduce(t, txnProduce("other", testBatch{pid: 2, epoch: 0, seq: 1, payload: "other"})); off != 2 {
		t.Fatalf("other producer's batch at %d, want 2", off)
	}
	if off := f.mustProduce(t, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1}.bytes())); off != 3 {
		t.Fatalf("plain batch at %d, want 3", off)
	}
	if code := f.marker(2, 1, true); code != 0 {
		t.Fatalf("other producer's marker: %s", codeName(code))
	}
	notAnswered(t, ch, "the held request")
	if code := f.marker(1, 1, true); code != 0 {
		t.Fatalf("marker: %s", codeName(code))
	}
	rs := awaitProduce(t, ch)
	if len(rs) != 2 || rs[0] != (produceResult{0, 6}) || rs[1] != (produceResult{0, 0}) {
		t.Fatalf("held request answered %+v, want t/0 NONE@6 (after the markers at 4 and 5), u/0 NONE@0", rs)
	}
}

// TestHeldBatchPipelinedOverTCP: through the real wire server, two Produce
// requests pipelined on one connection (seq 0 and seq 1 of the new
// transaction at epoch 1, while the epoch-0 transaction is open): the
// first is held without holding up the handling of the second (which
// queues behind it), the marker comes on another connection, and both are
// answered in order, seq 0 right after the marker and seq 1 after it.
func TestHeldBatchPipelinedOverTCP(t *testing.T) {
	tc := startCluster(t, "4.2")
	cl := tc.dialLeader(t)
	const pid = int64(7100)
	txnID := "pipelined"
	first := do[*kmsg.ProduceResponse](t, cl, txnProduce(txnID, testBatch{pid: pid, epoch: 0, seq: 0, payload: "first"}), 12)
	if rp := first.Topics[0].Partitions[0]; rp.ErrorCode != 0 || rp.BaseOffset != 0 {
		t.Fatalf("first transaction: %s at %d", codeName(rp.ErrorCode), rp.BaseOffset)
	}

	nc, err := net.Dial("tcp", tc.leaderAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second)) // a failure bound
	fr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipelined"))
	var frames []byte
	for seq := int32(0); seq < 2; seq++ {
		req := txnProduce(txnID, testBatch{pid: pid, epoch: 1, seq: seq, payload: fmt.Sprintf("second-%d", seq)})
		req.SetVersion(12)
		// AppendRequest writes the length at dst[0]: one frame per call.
		frames = append(frames, fr.AppendRequest(nil, req, seq+1)...)
	}
	if _, err := nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	p, _ := tc.leader.partitionFor("t", 0)
	waitFor(t, "seq 0 held and seq 1 queued behind it", func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		hb := p.held[pid]
		return hb != nil && hb.prev != nil && p.markerApplied != nil
	})
	mr := do[*kmsg.WriteTxnMarkersResponse](t, cl, markerReq(pid, 1, true, 1, 2, "t", 0), 2)
	if code := mr.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("marker: %s", codeName(code))
	}
	for i := int32(1); i <= 2; i++ {
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(12)
		// Produce v12's response header is flexible: an empty tag section.
		if err := resp.ReadFrom(body[5:]); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		rp := resp.Topics[0].Partitions[0]
		if want := int64(i + 1); rp.ErrorCode != 0 || rp.BaseOffset != want {
			t.Fatalf("seq %d answered %s at %d, want NONE at %d (after the marker at 1)", i-1, codeName(rp.ErrorCode), rp.BaseOffset, want)
		}
	}
}
