package groups

// OffsetCommit (key 8), v0–v9.
//
// Behavior:
//   - a member of the current generation commits (Stable or
//     PreparingRebalance: a member revoking its partitions commits
//     then); CompletingRebalance is REBALANCE_IN_PROGRESS; an unknown
//     member UNKNOWN_MEMBER_ID, another generation ILLEGAL_GENERATION, a
//     fenced static member FENCED_INSTANCE_ID (validateCommit, Kafka's
//     ClassicGroup.validateOffsetCommit);
//   - generation -1 with no member id commits to an Empty (or new) group:
//     simple consumers and the admin client;
//   - per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the
//     cluster does not have, OFFSET_METADATA_TOO_LARGE above 4096 bytes;
//   - answered once the offsets are durable.
//
// Version notes: v1 adds generation and member id (and a commit
// timestamp, ignored); v2–v4 a retention time (ignored: offsets expire by
// the coordinator's retention); v6 the leader epoch; v7
// group.instance.id; v9 is KIP-848's (the member epoch is the
// generation for classic groups).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// offsetCommitAPI is OffsetCommit v0–v9.
var offsetCommitAPI = wire.API[*Coordinator]{Key: 8, Min: 0, Max: 9, Handle: (*Coordinator).handleOffsetCommit}

func (c *Coordinator) handleOffsetCommit(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	cr := CommitRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: str(req.InstanceID), Generation: req.Generation,
		Offsets: map[TP]Offset{}, Version: req.Version}
	if req.Version == 0 {
		cr.Generation = -1
	}
	codes := collectOffsets(c, r, cr.Offsets, req.Topics,
		func(t kmsg.OffsetCommitRequestTopic) (string, []kmsg.OffsetCommitRequestTopicPartition) {
			return t.Topic, t.Partitions
		},
		func(p kmsg.OffsetCommitRequestTopicPartition) (int32, int64, int32, *string) {
			return p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
		}, req.Version >= 6)
	var code int16
	pos, err := c.step(func(now time.Time) { code = c.core.Commit(now, cr) })
	return func() (kmsg.Response, error) {
		if code == 0 {
			code = c.committed(ctx, r, pos, err, "offset", len(cr.Offsets))
		}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes.of(i, j, code)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}
