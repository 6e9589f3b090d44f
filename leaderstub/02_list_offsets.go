package leaderstub

// ListOffsets (key 2), v1–v11.
//
// Behavior, as Kafka's UnifiedLog.fetchOffsetByTimestamp and
// ReplicaManager.fetchOffset:
//   - -2 (earliest) and -4 (earliest local: no tiered storage, so the
//     same) answer the log start offset, timestamp -1;
//   - -1 (latest) answers the high watermark, or the last stable offset
//     under read_committed (IsolationLevel 1), timestamp -1;
//   - -3 (max timestamp) answers the largest timestamp in the log and the
//     offset of the first record that has it, in the first batch whose
//     max timestamp it is;
//   - a timestamp t ≥ 0 answers the first record, from the log start
//     offset on, whose timestamp is ≥ t, and its timestamp: the record,
//     not its batch (batches whose max timestamp is below t are skipped
//     unread);
//   - for -3 and t ≥ 0, an answer at or past the last fetchable offset
//     (high watermark, or LSO under read_committed) and no answer at all
//     are offset -1, timestamp -1; control records count, as in Kafka;
//   - -5 (latest tiered) and -6 (earliest pending upload) answer offset -1,
//     timestamp -1, leader epoch -1: there is no tiered storage;
//   - -3 below v7, -4 below v8, -5 below v9, -6 below v11 are
//     UNSUPPORTED_VERSION for that partition; a partition named twice is
//     INVALID_REQUEST.
//
// Version notes: v2 IsolationLevel; v4 leader epochs (always 0); v7 -3;
// v8 -4; v9 -5; v6 flexible; v10 TimeoutMillis; v11 -6.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// listOffsetsAPI is ListOffsets v1–v11.
var listOffsetsAPI = wire.API[*Leader]{Key: 2, Min: 1, Max: 11, Handle: (*Leader).handleListOffsets}

// The special timestamps of ListOffsets.
const (
	listLatest         = -1
	listEarliest       = -2
	listMaxTimestamp   = -3
	listEarliestLocal  = -4
	listLatestTiered   = -5
	listEarliestUpload = -6
)

// listOffsetsMinVersionFor is the first version that may ask ts.
func listOffsetsMinVersionFor(ts int64) int16 {
	switch ts {
	case listMaxTimestamp:
		return 7
	case listEarliestLocal:
		return 8
	case listLatestTiered:
		return 9
	case listEarliestUpload:
		return 11
	}
	return 0
}

func (l *Leader) handleListOffsets(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := map[string]map[int32]int{}
	for _, rt := range req.Topics {
		if seen[rt.Topic] == nil {
			seen[rt.Topic] = map[int32]int{}
		}
		for _, rp := range rt.Partitions {
			seen[rt.Topic][rp.Partition]++
		}
	}
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			lp := kmsg.NewListOffsetsResponseTopicPartition()
			lp.Partition, lp.Timestamp, lp.Offset, lp.LeaderEpoch = rp.Partition, -1, -1, -1
			switch {
			case seen[rt.Topic][rp.Partition] > 1:
				lp.ErrorCode = kerr.InvalidRequest.Code
			case r.Version < listOffsetsMinVersionFor(rp.Timestamp):
				lp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				if p, kerrE := l.partitionFor(rt.Topic, rp.Partition); kerrE != nil {
					lp.ErrorCode = kerrE.Code
				} else if err := l.listOffset(p, rp.Timestamp, req.IsolationLevel == 1, &lp); err != nil {
					lp.ErrorCode = kerr.KafkaStorageError.Code
					r.Logger().Warn().Err(err).Str("topic", rt.Topic).Int32("partition", rp.Partition).Msg("list offsets: reading the log")
				}
			}
			t.Partitions = append(t.Partitions, lp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return wire.Now(resp)
}

// listOffset answers one partition (see the header). lp comes in as
// offset -1, timestamp -1, leader epoch -1.
func (l *Leader) listOffset(p *partition, ts int64, readCommitted bool, lp *kmsg.ListOffsetsResponseTopicPartition) error {
	p.mu.RLock()
	upper := p.hw
	if readCommitted {
		upper = p.lso()
	}
	logStart := p.logStart
	var candidates []fetchedBatch // the batches that may hold the answer, in order
	var maxTS int64 = -1
	switch {
	case ts == listEarliest || ts == listEarliestLocal:
		lp.Offset, lp.LeaderEpoch = logStart, 0
	case ts == listLatest:
		lp.Offset, lp.LeaderEpoch = upper, 0
	case ts == listLatestTiered || ts == listEarliestUpload:
	case ts == listMaxTimestamp:
		first := -1
		for i, b := range p.batches {
			if b.MaxTimestamp > maxTS || first < 0 {
				maxTS, first = b.MaxTimestamp, i
			}
		}
		if first >= 0 {
			b := p.batches[first]
			candidates = append(candidates, fetchedBatch{base: b.Base, raw: b.raw})
		}
	default:
		for _, b := range p.batches[p.findBatch(logStart):] {
			if b.Base >= upper {
				break // nothing at or past it may be answered
			}
			if b.MaxTimestamp >= ts {
				candidates = append(candidates, fetchedBatch{base: b.Base, raw: b.raw})
			}
		}
	}
	p.mu.RUnlock()
	if len(candidates) == 0 {
		return nil
	}
	raws, err := l.readBatches(p, candidates)
	if err != nil {
		return err
	}
	offset, found := int64(-1), int64(-1)
	for _, raw := range raws {
		if raw == nil {
			continue // dropped by retention meanwhile
		}
		err := recordTimestamps(raw, func(off, recTS int64) bool {
			if ts == listMaxTimestamp {
				if recTS == maxTS {
					offset, found = off, recTS
					return false
				}
				return true
			}
			if recTS >= ts && off >= logStart {
				offset, found = off, recTS
				return false
			}
			return true
		})
		if err != nil {
			return err
		}
		if offset >= 0 {
			break
		}
	}
	if offset >= 0 && offset < upper {
		lp.Offset, lp.Timestamp, lp.LeaderEpoch = offset, found, 0
	}
	return nil
}
