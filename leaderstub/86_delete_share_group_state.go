package leaderstub

// DeleteShareGroupState (key 86), v0: the share coordinator's request
// that forgets a share partition's state (Kafka's group coordinator sends
// it for DeleteShareGroupOffsets and when a share group is deleted). The
// leader is the share coordinator of its own partitions (see
// InitializeShareGroupState).
//
// Behavior: per partition, the group's share partition is forgotten
// (its next fetch starts again from share.auto.offset.reset), answered
// once durable; a partition with no state is no error; an unknown topic
// id is UNKNOWN_TOPIC_ID, a partition led elsewhere
// NOT_LEADER_OR_FOLLOWER. CLUSTER_ACTION on the cluster is required.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// deleteShareGroupStateAPI is DeleteShareGroupState v0.
var deleteShareGroupStateAPI = wire.API[*Leader]{Key: 86, Min: 0, Max: 0, Handle: (*Leader).handleDeleteShareGroupState}

func (l *Leader) handleDeleteShareGroupState(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteShareGroupStateRequest)
	if !wire.ClusterAction(r) {
		return wire.Now(wire.UnservedResponse(req, kerr.ClusterAuthorizationFailed.Code))
	}
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	return func() (kmsg.Response, error) {
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			name, known := l.topicNameOf(t.TopicID)
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				rp.Partition = p.Partition
				switch {
				case !known:
					rp.ErrorCode = kerr.UnknownTopicID.Code
				default:
					if _, kerrE := l.partitionFor(name, p.Partition); kerrE != nil {
						rp.ErrorCode = kerrE.Code
					} else {
						rp.ErrorCode = shareStateErrCode(l.DeleteShareState(req.GroupID, name, p.Partition))
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}
