package topics

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// ElectLeaders (key 43), v0–v2, served by the controller.
//
// Behavior (Kafka's ReplicationControlManager.electLeaders, for a cluster
// that keeps one replica of every partition): nothing changes.
//   - needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
//   - an election type other than PREFERRED (0) or UNCLEAN (1):
//     INVALID_REQUEST;
//   - a named partition: ELECTION_NOT_NEEDED (its one replica is the
//     preferred one and leads), or UNKNOWN_TOPIC_OR_PARTITION;
//   - null topics (every partition): an empty answer, as Kafka leaves out
//     the partitions that need no election.
//
// Version notes: v1 adds ElectionType and the top-level error; v2 is
// flexible.
var electLeadersAPI = wire.API[*Controller]{Key: 43, Min: 0, Max: 2, Handle: (*Controller).handleElectLeaders}

func (c *Controller) handleElectLeaders(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	switch {
	case !wire.Authorize(r, kmsg.ACLOperationAlter, wire.ClusterResource):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return wire.Now(resp)
	case req.ElectionType != 0 && req.ElectionType != 1:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return wire.Now(resp)
	}
	for _, rt := range req.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		info, known := c.view.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = p
			if known && p >= 0 && p < info.Partitions {
				sp.ErrorCode = kerr.ElectionNotNeeded.Code
				sp.ErrorMessage = kmsg.StringPtr("Leader election not needed for topic partition.")
			} else {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				sp.ErrorMessage = kmsg.StringPtr("The topic or partition does not exist.")
			}
			t.Partitions = append(t.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return wire.Now(resp)
}
