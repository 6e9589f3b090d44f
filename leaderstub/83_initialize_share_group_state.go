package leaderstub

// InitializeShareGroupState (key 83), v0: the share coordinator's
// request that sets a share partition's start offset (Kafka's group
// coordinator sends it for AlterShareGroupOffsets). A share partition's
// state lives at its partition leader here, so the leader is the share
// coordinator of its own partitions: the group coordinator of a process
// of its own sends this request to each partition's leader.
//
// Behavior: per partition, the share-partition start offset is set as
// AlterShareGroupOffsets sets it in `txncoord up` (clamped to the log
// start and the high watermark; the records in flight are forgotten;
// created if absent), answered once durable; an unknown topic id is
// UNKNOWN_TOPIC_ID, a partition led elsewhere NOT_LEADER_OR_FOLLOWER.
// CLUSTER_ACTION on the cluster is required (a broker-only request):
// else CLUSTER_AUTHORIZATION_FAILED for every partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// initializeShareGroupStateAPI is InitializeShareGroupState v0.
var initializeShareGroupStateAPI = wire.API[*Leader]{Key: 83, Min: 0, Max: 0, Handle: (*Leader).handleInitializeShareGroupState}

func (l *Leader) handleInitializeShareGroupState(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.InitializeShareGroupStateRequest)
	if !wire.ClusterAction(r) {
		return wire.Now(wire.UnservedResponse(req, kerr.ClusterAuthorizationFailed.Code))
	}
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	return func() (kmsg.Response, error) {
		for _, t := range req.Topics {
			rt := kmsg.NewInitializeShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			name, known := l.topicNameOf(t.TopicID)
			for _, p := range t.Partitions {
				rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				rp.Partition = p.Partition
				if !known {
					rp.ErrorCode = kerr.UnknownTopicID.Code
				} else {
					rp.ErrorCode = shareStateErrCode(l.AlterShareOffset(req.GroupID, name, p.Partition, p.StartOffset))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}
