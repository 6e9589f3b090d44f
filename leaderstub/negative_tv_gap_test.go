package leaderstub

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNegativeTransactionVersionAsKafka: a WriteTxnMarkers v2 marker with
// TransactionVersion -1 (Kafka's TV_UNKNOWN) is answered
// UNKNOWN_SERVER_ERROR for its partitions, as Kafka 4.2's leader does
// (ProducerAppendInfo.appendEndTxnMarker refuses TV_UNKNOWN for a
// non-replication append), and changes nothing; another marker in the same
// request is unaffected. Any other negative TV is below 2, so the legacy ≥
// rule applies to it (a marker at the open transaction's epoch is
// accepted, which the strict rule would refuse).
func TestNegativeTransactionVersionAsKafka(t *testing.T) {
	f := newFixture(t)
	txnID := "txn-a"
	produce := func(pid int64, epoch int16) int64 {
		t.Helper()
		b := testBatch{pid: pid, epoch: epoch, seq: 0, txn: true, ts: f.now.UnixMilli(), payload: "v"}
		resp := f.call(f.l.handleProduce, produceReq("t", 0, &txnID, -1, b.bytes()), 12).(*kmsg.ProduceResponse)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("produce pid %d: %s", pid, codeName(rp.ErrorCode))
		}
		return rp.BaseOffset
	}
	state := func(pid int64) producerEntry {
		t.Helper()
		p, _ := f.l.partitionFor("t", 0)
		p.mu.RLock()
		defer p.mu.RUnlock()
		e, ok := p.producers[pid]
		if !ok {
			t.Fatalf("no state for pid %d", pid)
		}
		return e
	}

	// One request, two markers: pid 1 with TV -1, pid 2 with TV 2.
	first1 := produce(1, 5)
	produce(2, 5)
	req := markerReq(1, 6, true, 0, -1, "t", 0)
	req.Markers = append(req.Markers, markerReq(2, 6, true, 0, 2, "t", 0).Markers[0])
	before := f.logEnd()
	resp := f.call(f.l.handleWriteTxnMarkers, req, 2).(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 2 {
		t.Fatalf("response has %d markers, want 2", len(resp.Markers))
	}
	if got := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownServerError.Code {
		t.Fatalf("TV -1 marker: %s, want UNKNOWN_SERVER_ERROR(-1) as Kafka 4.2", codeName(got))
	}
	if got := resp.Markers[1].Topics[0].Partitions[0].ErrorCode; got != 0 {
		t.Fatalf("TV 2 marker in the same request: %s, want NONE", codeName(got))
	}
	if after := f.logEnd(); after != before+1 {
		t.Fatalf("log grew by %d batches, want 1 (only the TV 2 marker's)", after-before)
	}
	if e := state(1); e.Epoch != 5 || e.TxnFirstOffset != first1 || e.CoordinatorEpoch != -1 {
		t.Fatalf("the refused TV -1 marker changed pid 1: epoch %d txn_start %d coord %d", e.Epoch, e.TxnFirstOffset, e.CoordinatorEpoch)
	}
	var sawTV1 bool
	for _, m := range f.l.ReceivedMarkers() {
		if m.ProducerID == 1 {
			sawTV1 = true
			if m.TransactionVersion != -1 || m.ErrorCode != kerr.UnknownServerError.Code {
				t.Fatalf("received-marker record for pid 1: %+v", m)
			}
		}
	}
	if !sawTV1 {
		t.Fatal("the TV -1 marker is not in ReceivedMarkers")
	}

	// TV -2 at the open transaction's own epoch: the legacy rule accepts it.
	produce(3, 5)
	before = f.logEnd()
	resp = f.call(f.l.handleWriteTxnMarkers, markerReq(3, 5, false, 0, -2, "t", 0), 2).(*kmsg.WriteTxnMarkersResponse)
	if got := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; got != 0 {
		t.Fatalf("TV -2 marker at the current epoch: %s, want NONE (legacy rule)", codeName(got))
	}
	if f.logEnd() != before+1 {
		t.Fatal("the accepted TV -2 marker wrote no control batch")
	}
	if e := state(3); e.Epoch != 5 || e.txnOpen() {
		t.Fatalf("after the TV -2 abort marker pid 3 has epoch %d, txn open %v", e.Epoch, e.txnOpen())
	}
	// ... and refuses one below the current epoch (47), as for TV 0.
	resp = f.call(f.l.handleWriteTxnMarkers, markerReq(3, 4, true, 0, -2, "t", 0), 2).(*kmsg.WriteTxnMarkersResponse)
	if got := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("TV -2 marker below the current epoch: %s, want INVALID_PRODUCER_EPOCH(47)", codeName(got))
	}
}
