package leaderstub

import (
	"encoding/binary"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// wireReq is body as the wire server hands it to a handler.
func wireReq(body kmsg.Request, version int16) *wire.Request {
	body.SetVersion(version)
	return &wire.Request{Body: body, Key: body.Key(), Version: version, Log: zerolog.Nop()}
}

// decodeBatches splits a Fetch answer's record set into batches.
func decodeBatches(t *testing.T, raw []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(raw) > 0 {
		if len(raw) < 12 {
			t.Fatalf("%d trailing bytes", len(raw))
		}
		n := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:n]); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		raw = raw[n:]
	}
	return out
}

// fetchAt fetches topic t partition 0 from offset (read_uncommitted) and
// returns the partition's answer.
func (f *fixture) fetchAt(offset int64) kmsg.FetchResponseTopicPartition {
	f.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return f.call(f.l.handleFetch, req, 12).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// sweep runs SweepRetention and checks how many batches it deleted.
func (f *fixture) sweep(want int) {
	f.t.Helper()
	if n, err := f.l.SweepRetention(); err != nil || n != want {
		f.t.Fatalf("SweepRetention: %d batches, %v; want %d", n, err, want)
	}
}

// checkStart checks that ListOffsets earliest answers start, that a Fetch
// at start answers data and one below it OFFSET_OUT_OF_RANGE.
func (f *fixture) checkStart(when string, start int64) {
	f.t.Helper()
	if p := f.listOffset(-2, false, 11); p.ErrorCode != 0 || p.Offset != start {
		f.t.Fatalf("%s: earliest %d (%s), want %d", when, p.Offset, codeName(p.ErrorCode), start)
	}
	if p := f.fetchAt(start); p.ErrorCode != 0 || p.LogStartOffset != start || len(p.RecordBatches) == 0 {
		f.t.Fatalf("%s: fetch at the start %d: %s, log start %d, %d bytes", when, start, codeName(p.ErrorCode), p.LogStartOffset, len(p.RecordBatches))
	}
	if start > 0 {
		if p := f.fetchAt(start - 1); p.ErrorCode != kerr.OffsetOutOfRange.Code {
			f.t.Fatalf("%s: fetch below the start (%d): %s, want OFFSET_OUT_OF_RANGE", when, start-1, codeName(p.ErrorCode))
		}
	}
}

func retentionDeleted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "txncoord_leader_retention_deleted_batches_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("txncoord_leader_retention_deleted_batches_total not registered")
	return 0
}

// TestRetentionSweepByTime: an idle partition's batches older than
// retention.ms go at the sweep, not only at the next write: the log start
// moves, ListOffsets earliest follows, a Fetch below it is
// OFFSET_OUT_OF_RANGE, the deletion survives a restart, and the metric
// counts it. The last batch stays, as at a write.
func TestRetentionSweepByTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixtureWith(t, func(c *Config) { c.Metrics = reg })
	now := f.now.UnixMilli()
	for _, ts := range []int64{now - 10_000, now - 5_000, now - 1_000} {
		if p := f.produce(tsBatch(ts)); p.ErrorCode != 0 {
			t.Fatal(codeName(p.ErrorCode))
		}
	}
	f.sweep(0) // no retention.ms: the broker's is a week
	f.checkStart("before retention.ms", 0)

	f.setConfigs(map[string]string{"retention.ms": "7000"}) // no write follows
	f.checkStart("retention.ms set, before the sweep", 0)
	f.sweep(1)
	f.checkStart("after the sweep", 1)
	f.sweep(0)

	f.now = f.now.Add(time.Hour) // both left are expired; the last stays
	f.sweep(1)
	f.checkStart("an hour later", 2)
	if got := retentionDeleted(t, reg); got != 2 {
		t.Fatalf("retention deleted batches metric: %v, want 2", got)
	}
	f.restart()
	f.checkStart("after a restart", 2)
	f.sweep(0)
	if p := f.produce(tsBatch(now)); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("produce after the sweep: %s at %d, want offset 3", codeName(p.ErrorCode), p.BaseOffset)
	}
}

// TestRetentionSweepByBytes: retention.bytes applies at the sweep too; a
// topic whose cleanup.policy lacks delete keeps everything.
func TestRetentionSweepByBytes(t *testing.T) {
	f := newFixture(t)
	now := f.now.UnixMilli()
	for range 5 {
		f.produce(tsBatch(now))
	}
	size := int64(len(tsBatch(now)))
	f.setConfigs(map[string]string{"retention.bytes": "1", "cleanup.policy": "compact"})
	f.sweep(0)
	f.checkStart("compact", 0)
	// Two batches and a half: the log goes down to two.
	f.setConfigs(map[string]string{"retention.bytes": itoa(2*size + size/2)})
	f.sweep(3)
	f.checkStart("retention.bytes", 3)
	f.restart()
	f.checkStart("after a restart", 3)
	f.sweep(0)
}

// TestRetentionSweepKeepsOpenTransaction: the sweep never deletes a batch
// at or above the LSO: an open transaction's batches and everything after
// stay however old, and go once its marker is written.
func TestRetentionSweepKeepsOpenTransaction(t *testing.T) {
	f := newFixture(t)
	old := f.now.Add(-time.Hour).UnixMilli()
	txnID := "sweep-txn"
	f.produce(tsBatch(old)) // 0
	resp := f.call(f.l.handleProduce, produceReq("t", 0, &txnID, -1,
		testBatch{pid: 30, seq: 0, txn: true, ts: old, payload: "open"}.bytes()), 12).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 { // 1
		t.Fatal(codeName(code))
	}
	f.produce(tsBatch(old)) // 2
	f.produce(tsBatch(old)) // 3
	f.setConfigs(map[string]string{"retention.ms": "1000", "retention.bytes": "1"})
	f.sweep(1)
	f.checkStart("transaction open", 1)
	f.now = f.now.Add(24 * time.Hour)
	f.sweep(0)
	f.checkStart("transaction open a day later", 1)

	m := f.call(f.l.handleWriteTxnMarkers, markerReq(30, 0, true, 1, 1, "t", 0), 1).(*kmsg.WriteTxnMarkersResponse)
	if code := m.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("marker: %s", codeName(code))
	}
	// The marker's own write keeps the transaction (its LSO moves only
	// once the marker is durable); the next sweep deletes it and the
	// batches after it, up to the marker (offset 4), the last batch.
	f.sweep(3)
	f.checkStart("after the marker", 4)
}

// The sweep runs on its own every RetentionCheckInterval.
func TestRetentionSweepLoop(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.RetentionCheckInterval = 10 * time.Millisecond })
	old := f.now.Add(-time.Hour).UnixMilli()
	f.produce(tsBatch(old))
	f.produce(tsBatch(old))
	f.setConfigs(map[string]string{"retention.ms": "60000"})
	waitFor(t, "the sweep to move the log start", func() bool {
		return f.listOffset(-2, false, 11).Offset == 1
	})
}

// TestRetentionSweepWithWrites: sweeps racing produces on the same
// partitions (run with -race) leave the memory and the store agreeing: the
// same log start and end after a restart, and every offset from the start
// to the end readable exactly once.
func TestRetentionSweepWithWrites(t *testing.T) {
	f := newFixture(t)
	now := f.now.UnixMilli()
	size := int64(len(tsBatch(now)))
	f.setConfigs(map[string]string{"retention.bytes": itoa(10 * size)})
	const writers, batches = 4, 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sweepErr := make(chan error, 1)
	go func() {
		defer close(sweepErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.l.SweepRetention(); err != nil {
				sweepErr <- err
				return
			}
		}
	}()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range batches {
				resp, err := f.l.handleProduce(t.Context(), wireReq(produceReq("t", 0, nil, -1, tsBatch(now)), 9))()
				if err != nil || resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode != 0 {
					t.Errorf("produce: %v %+v", err, resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-sweepErr; err != nil {
		t.Fatal(err)
	}
	start, end := f.listOffset(-2, false, 11).Offset, f.listOffset(-1, false, 11).Offset
	if end != writers*batches || start < end-10 || start > end-1 {
		t.Fatalf("log [%d, %d), want end %d and ten batches or fewer", start, end, writers*batches)
	}
	f.restart()
	if s, e := f.listOffset(-2, false, 11).Offset, f.listOffset(-1, false, 11).Offset; s != start || e != end {
		t.Fatalf("after a restart: log [%d, %d), before [%d, %d)", s, e, start, end)
	}
	next := start
	for next < end {
		p := f.fetchAt(next)
		if p.ErrorCode != 0 {
			t.Fatalf("fetch at %d: %s", next, codeName(p.ErrorCode))
		}
		var got int64
		for _, b := range decodeBatches(t, p.RecordBatches) {
			if b.FirstOffset != next {
				t.Fatalf("batch at %d, want %d", b.FirstOffset, next)
			}
			next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
			got++
		}
		if got == 0 {
			t.Fatalf("fetch at %d: no batch", next)
		}
	}
}
