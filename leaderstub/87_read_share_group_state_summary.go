package leaderstub

// ReadShareGroupStateSummary (key 87), v0–v1: the share coordinator's
// request for a share partition's start offset (Kafka's group
// coordinator sends it for DescribeShareGroupOffsets). The leader is the
// share coordinator of its own partitions (see
// InitializeShareGroupState).
//
// Behavior: per partition, the group's share-partition start offset, or
// -1 when the group has no state there (as Kafka's share coordinator
// answers an uninitialized partition), with state epoch 0 and leader
// epoch 0 (one replica that never changes); an unknown topic id is
// UNKNOWN_TOPIC_ID, a partition led elsewhere NOT_LEADER_OR_FOLLOWER.
// CLUSTER_ACTION on the cluster is required.
//
// Version notes: v1 adds DeliveryCompleteCount (KIP-1226), answered -1
// (not known): the records finished past the start offset are not
// counted here, and the share-group lag txncoord reports is the records
// from the start offset to the high watermark.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// readShareGroupStateSummaryAPI is ReadShareGroupStateSummary v0–v1.
var readShareGroupStateSummaryAPI = wire.API[*Leader]{Key: 87, Min: 0, Max: 1, Handle: (*Leader).handleReadShareGroupStateSummary}

func (l *Leader) handleReadShareGroupStateSummary(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	if !wire.ClusterAction(r) {
		return wire.Now(wire.UnservedResponse(req, kerr.ClusterAuthorizationFailed.Code))
	}
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		name, known := l.topicNameOf(t.TopicID)
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition, rp.StartOffset = p.Partition, -1
			switch _, kerrE := l.partitionFor(name, p.Partition); {
			case !known:
				rp.ErrorCode = kerr.UnknownTopicID.Code
			case kerrE != nil:
				rp.ErrorCode = kerrE.Code
			default:
				l.shares.mu.Lock()
				if sp, ok := l.shares.parts[shareKey{req.GroupID, name, p.Partition}]; ok {
					rp.StartOffset = sp.Start()
				}
				l.shares.mu.Unlock()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return wire.Now(resp)
}
