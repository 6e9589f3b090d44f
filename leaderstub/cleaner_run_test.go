package leaderstub

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyedBatch is b with one record per "key=value" ("key=~": a null value,
// a tombstone) instead of b's payload.
func keyedBatch(b testBatch, kvs ...string) []byte {
	var recs []byte
	for i, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		var rec []byte
		rec = append(rec, 0)
		rec = kbin.AppendVarlong(rec, 0)
		rec = kbin.AppendVarint(rec, int32(i))
		rec = kbin.AppendVarint(rec, int32(len(k)))
		rec = append(rec, k...)
		if v == "~" {
			rec = kbin.AppendVarint(rec, -1)
		} else {
			rec = kbin.AppendVarint(rec, int32(len(v)))
			rec = append(rec, v...)
		}
		rec = kbin.AppendVarint(rec, 0)
		recs = kbin.AppendVarint(recs, int32(len(rec)))
		recs = append(recs, rec...)
	}
	out := make([]byte, batchHeaderLen, batchHeaderLen+len(recs))
	out = append(out, recs...)
	binary.BigEndian.PutUint32(out[offBatchLength:], uint32(len(out)-12))
	out[offMagic] = 2
	var attrs uint16
	if b.txn {
		attrs |= attrTransactional
	}
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offLastOffsetDelta:], uint32(len(kvs)-1))
	binary.BigEndian.PutUint64(out[offBaseTimestamp:], uint64(b.ts))
	binary.BigEndian.PutUint64(out[offMaxTimestamp:], uint64(b.ts))
	binary.BigEndian.PutUint64(out[offProducerID:], uint64(b.pid))
	binary.BigEndian.PutUint16(out[offProducerEpoch:], uint16(b.epoch))
	binary.BigEndian.PutUint32(out[offBaseSequence:], uint32(b.seq))
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(len(kvs)))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crc32c))
	return out
}

// fetchLog reads t/0 from its log start to its end and prints each batch
// ("base-last [offset:key=value ...]", control batches as "base CONTROL"),
// checking every batch's CRC.
func (f *fixture) fetchLog(t *testing.T, committed bool) string {
	t.Helper()
	var out []string
	for off := f.listOffset(-2, false, 11).Offset; ; {
		req := kmsg.NewPtrFetchRequest()
		if committed {
			req.IsolationLevel = 1
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = off, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := f.call(f.l.handleFetch, req, 12).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch at %d: %s", off, codeName(p.ErrorCode))
		}
		batches := decodeBatches(t, p.RecordBatches)
		if len(batches) == 0 {
			break
		}
		for _, b := range batches {
			raw := b.AppendTo(nil)
			if want, got := uint32(b.CRC), crc32.Checksum(raw[offAttributes:], crc32c); want != got {
				t.Fatalf("batch %d: CRC %08x, computed %08x", b.FirstOffset, want, got)
			}
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			if b.Attributes&attrControl != 0 {
				out = append(out, fmt.Sprintf("%d CONTROL", b.FirstOffset))
			} else {
				var recs []string
				if err := eachRecord(raw, func(offset int64, key []byte, null bool, enc []byte) {
					v := "~"
					if !null {
						var r kmsg.Record
						if err := r.ReadFrom(enc); err != nil {
							t.Fatal(err)
						}
						v = string(r.Value)
					}
					recs = append(recs, fmt.Sprintf("%d:%s=%s", offset, key, v))
				}); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d-%d [%s]", b.FirstOffset, last, strings.Join(recs, " ")))
			}
			off = last + 1
		}
	}
	return strings.Join(out, "\n")
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}

// TestCleanLogsLeader: a clean at the leader keeps the last record of each
// key at its offset, removes tombstones past delete.retention.ms, rewrites
// batches with valid CRCs, leaves a fetch at a removed offset the next
// batch, keeps ListOffsets earliest, counts its work in the metrics, and
// survives a restart (nothing more to clean after it).
func TestCleanLogsLeader(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixtureWith(t, func(c *Config) { c.Metrics = reg })
	f.setConfigs(map[string]string{"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0",
		"delete.retention.ms": "60000"})
	now := f.now.UnixMilli()
	for _, b := range [][]string{{"a=1", "b=1"}, {"a=2"}, {"b=~", "c=1"}, {"d=1"}} {
		if p := f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: now - 1000}, b...)); p.ErrorCode != 0 {
			t.Fatal(codeName(p.ErrorCode))
		}
	}
	before := "0-1 [0:a=1 1:b=1]\n2-2 [2:a=2]\n3-4 [3:b=~ 4:c=1]\n5-5 [5:d=1]"
	if got := f.fetchLog(t, false); got != before {
		t.Fatalf("before the clean:\n%s", got)
	}
	res, err := f.l.CleanLogs()
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 1 || res.RecordsRemoved != 2 {
		t.Fatalf("first clean: %+v, want 1 partition, 2 records removed", res)
	}
	after := "2-2 [2:a=2]\n3-4 [3:b=~ 4:c=1]\n5-5 [5:d=1]"
	for _, committed := range []bool{false, true} {
		if got := f.fetchLog(t, committed); got != after {
			t.Fatalf("after the clean (read_committed %t):\n%s", committed, got)
		}
	}
	if p := f.fetchAt(1); len(decodeBatches(t, p.RecordBatches)) == 0 || decodeBatches(t, p.RecordBatches)[0].FirstOffset != 2 {
		t.Fatalf("fetch at removed offset 1: %s", codeName(p.ErrorCode))
	}
	if p := f.listOffset(-2, false, 11); p.Offset != 0 {
		t.Fatalf("earliest after the clean: %d, want 0", p.Offset)
	}
	if got := metricValue(t, reg, "txncoord_leader_cleaner_records_removed_total"); got != 2 {
		t.Fatalf("records removed metric %v", got)
	}

	// The tombstone goes once past delete.retention.ms (the next clean
	// needs dirty data: one more batch closes the segment of d=1).
	f.now = f.now.Add(2 * time.Minute)
	f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: f.now.UnixMilli()}, "e=1"))
	if res, err := f.l.CleanLogs(); err != nil || res.RecordsRemoved != 1 {
		t.Fatalf("second clean: %+v %v, want the tombstone removed", res, err)
	}
	after = "2-2 [2:a=2]\n3-4 [4:c=1]\n5-5 [5:d=1]\n6-6 [6:e=1]"
	if got := f.fetchLog(t, false); got != after {
		t.Fatalf("after the second clean:\n%s", got)
	}
	f.restart()
	if got := f.fetchLog(t, false); got != after {
		t.Fatalf("after a restart:\n%s", got)
	}
	if p := f.listOffset(-2, false, 11); p.Offset != 0 {
		t.Fatalf("earliest after a restart: %d, want 0", p.Offset)
	}
	if p := f.l.partitions[string(partitionKey("t", 0))]; p.firstDirty != 6 {
		t.Fatalf("first dirty offset after a restart: %d, want 6 (stored by the clean)", p.firstDirty)
	}
	// The first clean after a restart looks for tombstones and markers
	// past their horizon; it finds nothing to remove, and the next one
	// has nothing to do.
	if res, err := f.l.CleanLogs(); err != nil || res.RecordsRemoved != 0 {
		t.Fatalf("clean after a restart: %+v %v, want nothing removed", res, err)
	}
	if res, err := f.l.CleanLogs(); err != nil || res.Partitions != 0 {
		t.Fatalf("second clean after a restart: %+v %v, want nothing to do", res, err)
	}
	if p := f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: f.now.UnixMilli()}, "a=3")); p.BaseOffset != 7 {
		t.Fatalf("produce after the cleans: offset %d, want 7", p.BaseOffset)
	}
}

// TestCleanLogsTransactions: the data of an aborted transaction goes at the
// first clean, its ABORT marker and aborted-index entry once older than
// delete.retention.ms; a committed transaction's superseded data goes, its
// COMMIT marker stays while the producer has state (its last batch);
// read_committed and read_uncommitted then read the same records.
func TestCleanLogsTransactions(t *testing.T) {
	f := newFixture(t)
	f.setConfigs(map[string]string{"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0",
		"delete.retention.ms": "60000"})
	ts := f.now.UnixMilli() - 1000
	const pid = 1000
	txn := func(epoch int16, seq int32, kvs ...string) {
		t.Helper()
		f.mustProduce(t, produceReq("t", 0, kmsg.StringPtr("tx"), -1,
			keyedBatch(testBatch{pid: pid, epoch: epoch, seq: seq, txn: true, ts: ts}, kvs...)))
	}
	txn(0, 0, "a=aborted", "x=aborted")
	if code := f.marker(pid, 1, false); code != 0 { // TV2: the marker at the bumped epoch
		t.Fatal(codeName(code))
	}
	txn(1, 0, "a=1", "b=1")
	if code := f.marker(pid, 2, true); code != 0 {
		t.Fatal(codeName(code))
	}
	for _, kv := range []string{"a=2", "z=1"} {
		f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: ts}, kv))
	}
	if _, err := f.l.CleanLogs(); err != nil {
		t.Fatal(err)
	}
	want := "2 CONTROL\n3-4 [4:b=1]\n5 CONTROL\n6-6 [6:a=2]\n7-7 [7:z=1]"
	if got := f.fetchLog(t, false); got != want {
		t.Fatalf("read_uncommitted after the clean:\n%s", got)
	}
	if got := f.fetchLog(t, true); got != want {
		t.Fatalf("read_committed after the clean:\n%s", got)
	}
	f.l.partitions[string(partitionKey("t", 0))].mu.RLock()
	aborted := slices.Clone(f.l.partitions[string(partitionKey("t", 0))].aborted)
	f.l.partitions[string(partitionKey("t", 0))].mu.RUnlock()
	if len(aborted) != 1 {
		t.Fatalf("aborted index: %+v, want the entry of the young ABORT marker", aborted)
	}

	f.now = f.now.Add(2 * time.Minute)
	f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: f.now.UnixMilli()}, "y=1"))
	if _, err := f.l.CleanLogs(); err != nil {
		t.Fatal(err)
	}
	want = "3-4 [4:b=1]\n5 CONTROL\n6-6 [6:a=2]\n7-7 [7:z=1]\n8-8 [8:y=1]"
	if got := f.fetchLog(t, true); got != want {
		t.Fatalf("after the ABORT marker's delete.retention.ms:\n%s", got)
	}
	f.restart()
	if got := f.fetchLog(t, false); got != want {
		t.Fatalf("after a restart:\n%s", got)
	}
	p := f.l.partitions[string(partitionKey("t", 0))]
	if len(p.aborted) != 0 {
		t.Fatalf("aborted index after a restart: %+v, want empty", p.aborted)
	}
}

// TestCleanLogsRetention: cleanup.policy=compact,delete applies retention
// (retention.ms) and compaction; compact alone is not bound by the
// leader's own RetentionBytes, which would delete the only value of a key.
func TestCleanLogsRetention(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.RetentionBytes = 200 })
	f.setConfigs(map[string]string{"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0"})
	old := f.now.UnixMilli() - 3_600_000
	for _, kv := range []string{"a=1", "b=1", "c=1", "a=2", "d=1"} {
		if p := f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: old}, kv)); p.ErrorCode != 0 {
			t.Fatal(codeName(p.ErrorCode))
		}
	}
	f.sweep(0)
	if _, err := f.l.CleanLogs(); err != nil {
		t.Fatal(err)
	}
	want := "1-1 [1:b=1]\n2-2 [2:c=1]\n3-3 [3:a=2]\n4-4 [4:d=1]"
	if got := f.fetchLog(t, false); got != want {
		t.Fatalf("compact over the leader's RetentionBytes:\n%s", got)
	}

	f.setConfigs(map[string]string{"cleanup.policy": "compact,delete", "segment.ms": "1", "min.cleanable.dirty.ratio": "0",
		"retention.ms": "60000"})
	f.sweep(3) // every batch older than a minute but the last
	if got := f.fetchLog(t, false); got != "4-4 [4:d=1]" {
		t.Fatalf("compact,delete after the retention sweep:\n%s", got)
	}
}
