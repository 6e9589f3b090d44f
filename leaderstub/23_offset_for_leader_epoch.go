package leaderstub

// OffsetForLeaderEpoch (key 23), v0–v4.
//
// Behavior: every partition here has one leader epoch, 0, which starts at
// the log start offset (Kafka's leader-epoch cache, truncated from the
// start as the log start moves), so Kafka's LeaderEpochFileCache.endOffsetFor
// answers:
//   - a current leader epoch (v2+) other than -1 and 0 is refused:
//     above 0 UNKNOWN_LEADER_EPOCH, below FENCED_LEADER_EPOCH;
//   - epoch 0 (the latest): epoch 0 and the end of the log (the high
//     watermark: nothing past it is durable, and clients use the answer
//     to detect truncation);
//   - an epoch above 0, or -1 (undefined): epoch -1, end offset -1;
//   - an epoch below -1 (older than any): that epoch and the log start
//     offset (where the next epoch, 0, starts).
//
// Version notes: v1 the answer's LeaderEpoch; v2 CurrentLeaderEpoch; v3
// ReplicaID; v4 flexible.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// offsetForLeaderEpochAPI is OffsetForLeaderEpoch v0–v4.
var offsetForLeaderEpochAPI = wire.API[*Leader]{Key: 23, Min: 0, Max: 4, Handle: (*Leader).handleOffsetForLeaderEpoch}

func (l *Leader) handleOffsetForLeaderEpoch(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition, op.LeaderEpoch, op.EndOffset = rp.Partition, -1, -1
			p, kerrE := l.partitionFor(rt.Topic, rp.Partition)
			switch {
			case kerrE != nil:
				op.ErrorCode = kerrE.Code
			case rp.CurrentLeaderEpoch > 0:
				op.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.CurrentLeaderEpoch < -1:
				op.ErrorCode = kerr.FencedLeaderEpoch.Code
			default:
				p.mu.RLock()
				end, logStart := p.hw, p.logStart
				p.mu.RUnlock()
				switch {
				case rp.LeaderEpoch == 0:
					op.LeaderEpoch, op.EndOffset = 0, end
				case rp.LeaderEpoch < -1:
					op.LeaderEpoch, op.EndOffset = rp.LeaderEpoch, logStart
				}
			}
			t.Partitions = append(t.Partitions, op)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return wire.Now(resp)
}
