package leaderstub

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProducersExpire: ExpireProducers forgets the producers with no open
// transaction whose last write is ProducerIDExpiration old, durably (a
// restart does not bring them back), and a forgotten producer starts over
// (any sequence accepted, as for a producer never seen). A producer with a
// transaction open is kept however old, until its marker closes it.
func TestProducersExpire(t *testing.T) {
	f := newFixture(t)
	hour := time.Hour.Milliseconds()
	now := f.now.UnixMilli()
	produce := func(txnID *string, b testBatch) int16 {
		t.Helper()
		resp := f.call(f.l.handleProduce, produceReq("t", 0, txnID, -1, b.bytes()), 12).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	producers := func() []int64 {
		t.Helper()
		resp := f.call(f.l.handleDescribeProducers, describeReq("t", 0), 0).(*kmsg.DescribeProducersResponse)
		var pids []int64
		for _, s := range resp.Topics[0].Partitions[0].ActiveProducers {
			pids = append(pids, s.ProducerID)
		}
		slices.Sort(pids)
		return pids
	}
	txnID := "old-txn"
	for _, c := range []struct {
		txnID *string
		b     testBatch
	}{
		{nil, testBatch{pid: 10, seq: 0, ts: now - 25*hour, payload: "stale"}},
		{nil, testBatch{pid: 11, seq: 0, ts: now - hour, payload: "recent"}},
		{&txnID, testBatch{pid: 12, seq: 0, txn: true, ts: now - 48*hour, payload: "open"}},
	} {
		if code := produce(c.txnID, c.b); code != 0 {
			t.Fatalf("produce pid %d: %s", c.b.pid, codeName(code))
		}
	}
	if code := produce(nil, testBatch{pid: 10, seq: 5, ts: now, payload: "gap"}); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("pid 10 out of sequence before expiry: %s, want OUT_OF_ORDER_SEQUENCE_NUMBER", codeName(code))
	}

	if n, err := f.l.ExpireProducers(); err != nil || n != 1 {
		t.Fatalf("ExpireProducers: %d, %v; want 1 (pid 10)", n, err)
	}
	if got := producers(); !slices.Equal(got, []int64{11, 12}) {
		t.Fatalf("producers after expiry: %v, want [11 12]", got)
	}
	f.restart()
	if got := producers(); !slices.Equal(got, []int64{11, 12}) {
		t.Fatalf("producers after expiry and a restart: %v, want [11 12]", got)
	}
	if code := produce(nil, testBatch{pid: 10, seq: 5, ts: now, payload: "again"}); code != 0 {
		t.Fatalf("forgotten pid 10 at sequence 5: %s, want accepted as a new producer", codeName(code))
	}

	// A day later pid 11 and the new pid 10 are stale, pid 12's
	// transaction is still open; once its marker closes it, it goes too.
	f.now = f.now.Add(49 * time.Hour)
	if n, err := f.l.ExpireProducers(); err != nil || n != 2 {
		t.Fatalf("ExpireProducers a day later: %d, %v; want 2 (pids 10 and 11)", n, err)
	}
	if got := producers(); !slices.Equal(got, []int64{12}) {
		t.Fatalf("producers a day later: %v, want [12] (transaction open)", got)
	}
	m := f.call(f.l.handleWriteTxnMarkers, markerReq(12, 0, true, 1, 1, "t", 0), 1).(*kmsg.WriteTxnMarkersResponse)
	if code := m.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("marker for pid 12: %s", codeName(code))
	}
	if n, _ := f.l.ExpireProducers(); n != 0 {
		t.Fatalf("a producer whose marker was just written expired (%d)", n)
	}
	f.now = f.now.Add(25 * time.Hour)
	if n, err := f.l.ExpireProducers(); err != nil || n != 1 || len(producers()) != 0 {
		t.Fatalf("ExpireProducers after pid 12's marker and a day: %d, %v, left %v", n, err, producers())
	}
}

// The check runs on its own every ProducerIDExpirationCheck.
func TestProducerExpiryLoop(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) {
		c.ProducerIDExpiration, c.ProducerIDExpirationCheck = time.Hour, 10*time.Millisecond
	})
	resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, -1,
		testBatch{pid: 20, seq: 0, ts: f.now.Add(-2 * time.Hour).UnixMilli()}.bytes()), 12).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatal(codeName(code))
	}
	waitFor(t, "pid 20 to expire", func() bool {
		d := f.call(f.l.handleDescribeProducers, describeReq("t", 0), 0).(*kmsg.DescribeProducersResponse)
		return len(d.Topics[0].Partitions[0].ActiveProducers) == 0
	})
}
