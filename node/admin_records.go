package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// The record browser (admin.RecordsBackend): one Fetch at the partition's
// leader, over the Kafka protocol whether the leader runs in this process
// (`txncoord up`) or in another, at the isolation level asked.

// fetchBytes bounds what one page reads from the leader; the page shows
// at most its limit of records, but every marker in those bytes helps to
// tell a record's transaction's fate.
const fetchBytes = 4 << 20

// maxShown is how much of a key or value a page shows.
const maxShown = 256

// maxBatchBytes bounds what one compressed batch may decompress to here.
const maxBatchBytes = 64 << 20

// Records is admin.RecordsBackend: a topic the controller does not know is
// ErrTopicNotFound, as in the other topic endpoints.
func (b *groupsAdminBackend) Records(ctx context.Context, q admin.RecordsQuery) (admin.RecordPage, error) {
	t, err := b.Topic(ctx, q.Topic)
	if err != nil {
		return admin.RecordPage{}, err
	}
	if q.Partition >= t.Partitions {
		return admin.RecordPage{}, fmt.Errorf("%w: %s has %d partitions", admin.ErrTopicNotFound, q.Topic, t.Partitions)
	}
	return b.records(ctx, q)
}

func fetchRecords(ctx context.Context, view *cluster.View, dial wire.DialConfig, q admin.RecordsQuery) (admin.RecordPage, error) {
	page := admin.RecordPage{Topic: q.Topic, Partition: q.Partition, Isolation: "read_uncommitted", Leader: -1, NextOffset: -1, Records: []admin.Record{}}
	if q.ReadCommitted {
		page.Isolation = "read_committed"
	}
	leader, ok := view.LeaderOf(q.Topic, q.Partition)
	if !ok || leader.Addr == "" {
		return page, fmt.Errorf("%w: %s-%d has no known leader", admin.ErrTopicNotFound, q.Topic, q.Partition)
	}
	page.Leader = leader.NodeID
	cl, err := wire.DialWith(ctx, leader.Addr, "txncoord-admin", dial)
	if err != nil {
		return page, fmt.Errorf("leader %d: %w", leader.NodeID, err)
	}
	defer cl.Close()
	offset := max(q.Offset, 0)
	for attempt := 0; ; attempt++ {
		resp, err := fetchOnce(ctx, cl, q, offset)
		if err != nil {
			return page, fmt.Errorf("leader %d: fetch: %w", leader.NodeID, err)
		}
		page.HighWatermark, page.LastStableOffset, page.LogStartOffset = resp.HighWatermark, resp.LastStableOffset, resp.LogStartOffset
		switch {
		case resp.ErrorCode == kerr.OffsetOutOfRange.Code && attempt == 0 && offset < resp.LogStartOffset:
			// Before the log start (deleted or compacted away): read
			// from there.
			offset = resp.LogStartOffset
			continue
		case resp.ErrorCode == kerr.OffsetOutOfRange.Code:
			return page, nil // past the end: nothing yet
		case resp.ErrorCode == kerr.UnknownTopicOrPartition.Code:
			return page, fmt.Errorf("%w: %s-%d", admin.ErrTopicNotFound, q.Topic, q.Partition)
		case resp.ErrorCode != 0:
			return page, fmt.Errorf("leader %d: fetch: %w", leader.NodeID, kerr.ErrorForCode(resp.ErrorCode))
		}
		recs, err := readBatches(resp.RecordBatches)
		if err != nil {
			return page, fmt.Errorf("leader %d: %w", leader.NodeID, err)
		}
		page.Records, page.NextOffset = classify(recs, resp, offset, q.Limit, q.ReadCommitted)
		return page, nil
	}
}

func fetchOnce(ctx context.Context, cl *wire.Client, q admin.RecordsQuery, offset int64) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 0, fetchBytes, -1
	if q.ReadCommitted {
		req.IsolationLevel = 1
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = q.Partition, offset, fetchBytes, -1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.Partitions = q.Topic, []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	raw, err := cl.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(resp.ErrorCode)
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Partition == q.Partition {
				return &t.Partitions[i], nil
			}
		}
	}
	return nil, errors.New("the partition is missing from the answer")
}

// stored is one record with its batch's facts.
type stored struct {
	offset, timestamp int64
	producerID        int64
	producerEpoch     int16
	transactional     bool
	control           bool
	key, value        []byte
}

// readBatches reads v2 record batches (decompressing them); a partial last
// batch (cut by the byte limit) is left out, as consumers do.
func readBatches(raw []byte) ([]stored, error) {
	var out []stored
	for len(raw) >= 61 {
		length := int(int32(binary.BigEndian.Uint32(raw[8:12])))
		if length < 49 || len(raw) < 12+length {
			break
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:12+length]); err != nil {
			return nil, fmt.Errorf("record batch at offset %d: %w", int64(binary.BigEndian.Uint64(raw)), err)
		}
		raw = raw[12+length:]
		if b.Magic != 2 {
			continue
		}
		data, err := decompress(b.Attributes&7, b.Records)
		if err != nil {
			return nil, fmt.Errorf("record batch at offset %d: %w", b.FirstOffset, err)
		}
		for i := int32(0); i < b.NumRecords && len(data) > 0; i++ {
			n, size := binary.Varint(data)
			if size <= 0 || int64(len(data)-size) < n {
				return nil, fmt.Errorf("record batch at offset %d: a record is cut", b.FirstOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(data[:size+int(n)]); err != nil {
				return nil, fmt.Errorf("record batch at offset %d: %w", b.FirstOffset, err)
			}
			data = data[size+int(n):]
			out = append(out, stored{offset: b.FirstOffset + int64(r.OffsetDelta), timestamp: b.FirstTimestamp + int64(r.TimestampDelta),
				producerID: b.ProducerID, producerEpoch: b.ProducerEpoch, transactional: b.Attributes&0x10 != 0,
				control: b.Attributes&0x20 != 0, key: r.Key, value: r.Value})
		}
	}
	return out, nil
}

// decompress is a batch's records in the clear (codec: the attributes'
// low three bits), bounded by maxBatchBytes.
func decompress(codec int16, data []byte) ([]byte, error) {
	var r io.Reader
	switch codec {
	case 0:
		return data, nil
	case 1:
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r = gz
	case 2:
		return unsnappy(data)
	case 3:
		r = lz4.NewReader(bytes.NewReader(data))
	case 4:
		zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxBatchBytes+1))
	if err == nil && len(out) > maxBatchBytes {
		err = fmt.Errorf("batch decompresses to more than %d bytes", maxBatchBytes)
	}
	return out, err
}

// xerialMagic opens snappy data in the Java client's framing.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// unsnappy decodes raw snappy (kgo, librdkafka) or xerial-framed blocks
// (the Java client).
func unsnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) || len(data) < 16 {
		if n, err := s2.DecodedLen(data); err != nil || n > maxBatchBytes {
			return nil, fmt.Errorf("snappy: bad or too large block")
		}
		return s2.Decode(nil, data)
	}
	var out []byte
	for data = data[16:]; len(data) >= 4; {
		n := int(binary.BigEndian.Uint32(data))
		if len(data) < 4+n {
			return nil, errors.New("snappy: a xerial block is cut")
		}
		if dn, err := s2.DecodedLen(data[4 : 4+n]); err != nil || len(out)+dn > maxBatchBytes {
			return nil, fmt.Errorf("snappy: bad or too large block")
		}
		block, err := s2.Decode(nil, data[4:4+n])
		if err != nil {
			return nil, err
		}
		out = append(out, block...)
		data = data[4+n:]
	}
	return out, nil
}

// classify turns the records from offset into the page: at most limit, each
// transactional record marked with its transaction's fate. The fate is the
// first marker of its producer after it among the records read; failing
// that, read_committed's list of aborted transactions (what a consumer
// uses), or "open" at or above the last stable offset.
func classify(recs []stored, resp *kmsg.FetchResponseTopicPartition, offset int64, limit int, readCommitted bool) ([]admin.Record, int64) {
	// fate[i] is the marker type (0 ABORT, 1 COMMIT) that ends record i's
	// transaction, -1 when none was read; found scanning back from the end.
	fate := make([]int16, len(recs))
	next := map[int64]int16{} // producer id -> the marker seen after
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		fate[i] = -1
		if !r.transactional {
			continue
		}
		if r.control {
			if len(r.key) >= 4 {
				next[r.producerID] = int16(binary.BigEndian.Uint16(r.key[2:4]))
			}
			continue
		}
		if t, ok := next[r.producerID]; ok {
			fate[i] = t
		}
	}
	aborted := func(r stored) bool {
		for _, a := range resp.AbortedTransactions {
			if a.ProducerID == r.producerID && a.FirstOffset <= r.offset {
				return true
			}
		}
		return false
	}
	out := []admin.Record{}
	nextOffset := int64(-1)
	for i, r := range recs {
		if r.offset < offset {
			continue // the head of a batch that starts before the offset
		}
		if len(out) == limit {
			nextOffset = r.offset
			break
		}
		rec := admin.Record{Offset: r.offset, TimestampMs: r.timestamp, ProducerID: r.producerID, ProducerEpoch: r.producerEpoch,
			Transactional: r.transactional}
		switch {
		case r.control:
			rec.Control = "ABORT"
			if len(r.key) >= 4 && binary.BigEndian.Uint16(r.key[2:4]) == 1 {
				rec.Control = "COMMIT"
			}
		case r.transactional && fate[i] == 1:
			rec.Transaction = "committed"
		case r.transactional && (fate[i] == 0 || (readCommitted && aborted(r))):
			rec.Transaction = "aborted"
		case r.transactional && r.offset >= resp.LastStableOffset:
			rec.Transaction = "open"
		case r.transactional && readCommitted:
			rec.Transaction = "committed" // below the LSO and not in the aborted list
		}
		rec.Key, rec.Value, rec.Truncated = shown(r.key, r.control), shown(r.value, r.control), len(r.key) > maxShown || len(r.value) > maxShown
		out = append(out, rec)
	}
	if nextOffset < 0 && len(recs) > 0 && len(out) > 0 {
		nextOffset = recs[len(recs)-1].offset + 1
	}
	return out, nextOffset
}

// shown is bytes as text when UTF-8 (and not a control record's binary
// key or value), else hex; nil stays nil (a null key).
func shown(b []byte, binaryForm bool) *string {
	if b == nil {
		return nil
	}
	cut := b[:min(len(b), maxShown)]
	s := string(cut)
	if binaryForm || !utf8.Valid(cut) {
		s = "0x" + hex.EncodeToString(cut)
	}
	return &s
}
