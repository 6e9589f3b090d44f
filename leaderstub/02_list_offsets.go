package leaderstub

// ListOffsets (key 2), v1–v11.
//
// Behavior:
//   - -2 (earliest) and -4 (earliest local) answer the log start offset;
//   - -1 (latest) answers the high watermark, or the last stable offset
//     under read_committed (IsolationLevel 1);
//   - -3 (max timestamp) answers the last offset of the data batch with the
//     largest timestamp (Kafka answers the record's offset; batches here are
//     not decoded, a documented simplification);
//   - a timestamp ≥ 0 answers the first data batch whose max timestamp is at
//     least it (its base offset), or offset -1 when none;
//   - other negative timestamps (-5 latest tiered) are UNSUPPORTED_VERSION
//     per partition: there is no tiered storage.
//
// Version notes: v2 IsolationLevel; v4 leader epochs (always 0); v7 -3;
// v8 -4; v9 -5; v6 flexible; v10 TimeoutMillis; v11 -6 (earliest pending
// upload, also unsupported).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

const (
	listOffsetsMinVersion = 1
	listOffsetsMaxVersion = 11
)

func (l *Leader) handleListOffsets(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			lp := kmsg.NewListOffsetsResponseTopicPartition()
			lp.Partition, lp.Timestamp, lp.Offset, lp.LeaderEpoch = rp.Partition, -1, -1, 0
			p, kerrE := l.partitionFor(rt.Topic, rp.Partition)
			if kerrE != nil {
				lp.ErrorCode, lp.LeaderEpoch = kerrE.Code, -1
			} else {
				l.listOffset(p, rp.Timestamp, req.IsolationLevel == 1, &lp)
			}
			t.Partitions = append(t.Partitions, lp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return wire.Now(resp)
}

func (l *Leader) listOffset(p *partition, ts int64, readCommitted bool, lp *kmsg.ListOffsetsResponseTopicPartition) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	upper := p.hw
	if readCommitted {
		upper = p.lso()
	}
	switch {
	case ts == -2 || ts == -4:
		lp.Offset = p.logStart
	case ts == -1:
		lp.Offset = upper
	case ts == -3:
		for _, b := range p.batches {
			if b.Base < upper && !b.Control && b.MaxTimestamp > lp.Timestamp {
				lp.Timestamp, lp.Offset = b.MaxTimestamp, b.Last
			}
		}
	case ts >= 0:
		for _, b := range p.batches {
			if b.Base < upper && !b.Control && b.MaxTimestamp >= ts {
				lp.Timestamp, lp.Offset = b.MaxTimestamp, b.Base
				return
			}
		}
	default:
		lp.ErrorCode = kerr.UnsupportedVersion.Code
	}
}
