package leaderstub

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tsBatch is an uncompressed non-idempotent batch whose records have the
// given timestamps (base = the first; max = the largest), as producers
// that batch records of different times write them.
func tsBatch(timestamps ...int64) []byte {
	base, maxTS := timestamps[0], timestamps[0]
	var recs []byte
	for i, ts := range timestamps {
		maxTS = max(maxTS, ts)
		var rec []byte
		rec = append(rec, 0)
		rec = kbin.AppendVarlong(rec, ts-base)
		rec = kbin.AppendVarint(rec, int32(i))
		rec = kbin.AppendVarint(rec, -1)
		rec = kbin.AppendVarint(rec, 1)
		rec = append(rec, 'v')
		rec = kbin.AppendVarint(rec, 0)
		recs = kbin.AppendVarint(recs, int32(len(rec)))
		recs = append(recs, rec...)
	}
	out := make([]byte, batchHeaderLen, batchHeaderLen+len(recs))
	out = append(out, recs...)
	binary.BigEndian.PutUint32(out[offBatchLength:], uint32(len(out)-12))
	out[offMagic] = 2
	binary.BigEndian.PutUint32(out[offLastOffsetDelta:], uint32(len(timestamps)-1))
	binary.BigEndian.PutUint64(out[offBaseTimestamp:], uint64(base))
	binary.BigEndian.PutUint64(out[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(out[offProducerID:], ^uint64(0))
	binary.BigEndian.PutUint16(out[offProducerEpoch:], 0xFFFF)
	binary.BigEndian.PutUint32(out[offBaseSequence:], 0xFFFFFFFF)
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(len(timestamps)))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crc32c))
	return out
}

func (f *fixture) listOffset(ts int64, committed bool, version int16) kmsg.ListOffsetsResponseTopicPartition {
	f.t.Helper()
	return f.call(f.l.handleListOffsets, listOffsetsReq("t", 0, ts, committed), version).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

func (f *fixture) produce(records []byte) kmsg.ProduceResponseTopicPartition {
	f.t.Helper()
	return f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, records), 9).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// setConfigs gives topic t (one partition) explicit configs, as the
// controller does.
func (f *fixture) setConfigs(configs map[string]string) {
	t, _ := f.view.Topic("t")
	f.view.SetTopic(t, configs)
}

// TestListOffsetsByRecordTimestamp: the first record, not batch, with a
// timestamp at or after t; -3 is the first record holding the largest
// timestamp; answers at or past the last fetchable offset are -1.
func TestListOffsetsByRecordTimestamp(t *testing.T) {
	f := newFixture(t)
	f.produce(tsBatch(100, 300, 200, 300)) // offsets 0-3
	f.produce(tsBatch(150, 250))           // 4-5
	for _, tc := range []struct {
		ts           int64
		offset, want int64 // want: the answered timestamp
	}{
		{50, 0, 100}, {100, 0, 100}, {101, 1, 300}, {201, 1, 300}, {250, 1, 300}, {301, -1, -1},
		{-3, 1, 300}, {-2, 0, -1}, {-4, 0, -1}, {-1, 6, -1}, {-5, -1, -1}, {-6, -1, -1},
	} {
		p := f.listOffset(tc.ts, false, 11)
		if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.want {
			t.Errorf("ts %d: offset %d timestamp %d error %d, want offset %d timestamp %d", tc.ts, p.Offset, p.Timestamp, p.ErrorCode, tc.offset, tc.want)
		}
	}
	// A timestamp only in the second batch's records beyond the first's.
	if p := f.listOffset(301, false, 11); p.Offset != -1 || p.LeaderEpoch != -1 {
		t.Errorf("no record at 301: %+v", p)
	}
	// Special timestamps before the version that defines them.
	for ts, v := range map[int64]int16{-3: 6, -4: 7, -5: 8, -6: 10} {
		if p := f.listOffset(ts, false, v); p.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("ts %d at v%d: error %d, want UNSUPPORTED_VERSION", ts, v, p.ErrorCode)
		}
	}
	// A partition named twice is INVALID_REQUEST.
	req := listOffsetsReq("t", 0, -1, false)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, req.Topics[0].Partitions[0])
	for _, p := range f.call(f.l.handleListOffsets, req, 11).(*kmsg.ListOffsetsResponse).Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("duplicate partition: error %d", p.ErrorCode)
		}
	}
	// After a restart the batches are read back from bbolt.
	f.restart()
	if p := f.listOffset(201, false, 11); p.Offset != 1 || p.Timestamp != 300 {
		t.Errorf("after restart, ts 201: %+v", p)
	}
}

func deleteRecordsReq(offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func (f *fixture) deleteRecords(offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	f.t.Helper()
	return f.call(f.l.handleDeleteRecords, deleteRecordsReq(offset), 2).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
}

// TestDeleteRecords: the log start moves into a batch and stays there
// across a restart; beyond the high watermark is OFFSET_OUT_OF_RANGE; -1
// is the high watermark; a topic without the delete policy refuses.
func TestDeleteRecords(t *testing.T) {
	f := newFixture(t)
	f.produce(tsBatch(1, 2, 3)) // 0-2
	f.produce(tsBatch(4, 5))    // 3-4
	if p := f.deleteRecords(6); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LowWatermark != -1 {
		t.Fatalf("beyond the high watermark: %+v", p)
	}
	if p := f.deleteRecords(-2); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("offset -2: %+v", p)
	}
	if p := f.deleteRecords(1); p.ErrorCode != 0 || p.LowWatermark != 1 {
		t.Fatalf("delete to 1: %+v", p)
	}
	if p := f.deleteRecords(0); p.ErrorCode != 0 || p.LowWatermark != 1 {
		t.Fatalf("delete to 0 after 1 (never back): %+v", p)
	}
	check := func(when string, start int64) {
		t.Helper()
		if p := f.listOffset(-2, false, 11); p.Offset != start {
			t.Fatalf("%s: earliest %d, want %d", when, p.Offset, start)
		}
		wantByTS := start
		if start == 5 {
			wantByTS = -1 // no record left
		}
		if p := f.listOffset(0, false, 11); p.Offset != wantByTS {
			t.Fatalf("%s: by timestamp 0: %d, want the first record at or after the start, %d", when, p.Offset, wantByTS)
		}
		req := kmsg.NewPtrFetchRequest()
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = start-1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if got := f.call(f.l.handleFetch, req, 12).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.OffsetOutOfRange.Code {
			t.Fatalf("%s: fetch below the start: %s", when, codeName(got))
		}
	}
	check("after delete", 1)
	f.restart()
	check("after restart", 1)
	if p := f.deleteRecords(-1); p.ErrorCode != 0 || p.LowWatermark != 5 {
		t.Fatalf("delete to the high watermark: %+v", p)
	}
	f.restart()
	check("everything deleted, after restart", 5)
	if p := f.produce(tsBatch(6)); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("produce after deleting everything: %+v", p)
	}
	f.setConfigs(map[string]string{"cleanup.policy": ""})
	if p := f.deleteRecords(6); p.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("without the delete policy: %+v", p)
	}
}

// TestOffsetForLeaderEpoch: epoch 0 ends at the high watermark; later and
// undefined epochs are unknown; current epochs other than 0 are fenced or
// unknown.
func TestOffsetForLeaderEpoch(t *testing.T) {
	f := newFixture(t)
	f.produce(tsBatch(1, 2, 3))
	for _, tc := range []struct {
		current, epoch int32
		code           int16
		wantEpoch      int32
		wantEnd        int64
	}{
		{-1, 0, 0, 0, 3}, {0, 0, 0, 0, 3}, {0, 1, 0, -1, -1}, {0, -1, 0, -1, -1}, {-1, -3, 0, -3, 0},
		{1, 0, kerr.UnknownLeaderEpoch.Code, -1, -1}, {-2, 0, kerr.FencedLeaderEpoch.Code, -1, -1},
	} {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = tc.current, tc.epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := f.call(f.l.handleOffsetForLeaderEpoch, req, 4).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if p.ErrorCode != tc.code || p.LeaderEpoch != tc.wantEpoch || p.EndOffset != tc.wantEnd {
			t.Errorf("current %d epoch %d: %+v", tc.current, tc.epoch, p)
		}
	}
}

// TestMaxMessageBytes: a batch over the topic's max.message.bytes is
// MESSAGE_TOO_LARGE and appends nothing.
func TestMaxMessageBytes(t *testing.T) {
	f := newFixture(t)
	small, big := tsBatch(1), tsBatch(make([]int64, 40)...)
	if len(small) > 100 || len(big) <= 200 {
		t.Fatalf("batch sizes %d, %d", len(small), len(big))
	}
	f.setConfigs(map[string]string{"max.message.bytes": "200"})
	if p := f.produce(big); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("over max.message.bytes=200: %+v", p)
	}
	f.setConfigs(map[string]string{"max.message.bytes": "100"})
	if p := f.produce(small); p.ErrorCode != 0 {
		t.Fatalf("under max.message.bytes: %+v", p)
	}
	if p := f.produce(tsBatch(1, 2, 3, 4, 5, 6)); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("over max.message.bytes: %+v", p)
	}
	f.setConfigs(map[string]string{"max.message.bytes": "100000"})
	if p := f.produce(big); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("under max.message.bytes=100000: %+v", p)
	}
}

// TestLogAppendTime: the leader stamps the batch with its clock, the CRC
// still holds, every record reads the stamp, and the answer carries it.
func TestLogAppendTime(t *testing.T) {
	f := newFixture(t)
	f.setConfigs(map[string]string{"message.timestamp.type": "LogAppendTime"})
	p := f.produce(tsBatch(5, 6))
	now := f.now.UnixMilli()
	if p.ErrorCode != 0 || p.LogAppendTime != now {
		t.Fatalf("produce: %+v, want LogAppendTime %d", p, now)
	}
	req := kmsg.NewPtrFetchRequest()
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw := f.call(f.l.handleFetch, req, 12).(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if b.Attributes&attrLogAppendTime == 0 || b.MaxTimestamp != now || b.FirstTimestamp != 5 {
		t.Fatalf("stored batch: attributes %x max %d first %d", b.Attributes, b.MaxTimestamp, b.FirstTimestamp)
	}
	if crc32.Checksum(raw[offAttributes:len(raw)], crc32c) != uint32(b.CRC) {
		t.Fatal("CRC does not match after stamping")
	}
	if lo := f.listOffset(0, false, 11); lo.Offset != 0 || lo.Timestamp != now {
		t.Fatalf("records read the append time: %+v", lo)
	}
	f.setConfigs(nil)
	if p := f.produce(tsBatch(7)); p.LogAppendTime != -1 {
		t.Fatalf("CreateTime topic: LogAppendTime %d, want -1", p.LogAppendTime)
	}
}

// TestRetentionByTimeAndBytes: batches older than retention.ms and beyond
// retention.bytes are dropped from the start at the next append, never the
// last one; the broker's log.retention.ms applies to topics without one.
func TestRetentionByTimeAndBytes(t *testing.T) {
	f := newFixture(t)
	now := f.now.UnixMilli()
	f.produce(tsBatch(now - 10_000))
	f.produce(tsBatch(now - 5_000))
	f.setConfigs(map[string]string{"retention.ms": "7000"})
	f.produce(tsBatch(now)) // drops the first only
	if p := f.listOffset(-2, false, 11); p.Offset != 1 {
		t.Fatalf("after retention.ms=7000: log start %d, want 1", p.Offset)
	}
	f.now = f.now.Add(time.Hour) // everything is old now; the last batch stays
	f.produce(tsBatch(now - 20_000))
	if p := f.listOffset(-2, false, 11); p.Offset != 3 {
		t.Fatalf("an hour later: log start %d, want 3 (the last batch is kept)", p.Offset)
	}
	f.setConfigs(map[string]string{"retention.bytes": "1"})
	f.produce(tsBatch(now))
	f.produce(tsBatch(now))
	if p := f.listOffset(-2, false, 11); p.Offset != 5 {
		t.Fatalf("retention.bytes=1: log start %d, want 5", p.Offset)
	}
	f.setConfigs(map[string]string{"retention.bytes": "1", "cleanup.policy": ""})
	f.produce(tsBatch(now))
	if p := f.listOffset(-2, false, 11); p.Offset != 5 {
		t.Fatalf("an empty cleanup.policy keeps everything: log start %d, want 5", p.Offset)
	}
	f.restart()
	if p := f.listOffset(-2, false, 11); p.Offset != 5 {
		t.Fatalf("after restart: log start %d, want 5", p.Offset)
	}
}
