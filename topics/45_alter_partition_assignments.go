package topics

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// AlterPartitionReassignments (key 45), v0–v1, served by the controller.
//
// Behavior, for a cluster whose partitions each keep one replica on the
// leader the placement rule names (Kafka's
// ReplicationControlManager.alterPartitionReassignments answers):
//   - needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED at
//     the top;
//   - an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
//   - a cancellation (null replicas): NO_REASSIGNMENT_IN_PROGRESS, as no
//     reassignment ever is;
//   - the partition's current replica list ([its leader]): success, no
//     change, as Kafka completes a reassignment to the current replicas at
//     once;
//   - any other list: INVALID_REPLICA_ASSIGNMENT (empty, duplicates, an
//     unknown broker, or a move txncoord cannot make: it keeps each
//     partition where the placement rule puts it).
//
// Version notes: v1 adds AllowReplicationFactorChange (KIP-860); v0 is
// flexible already.
var alterPartitionAssignmentsAPI = wire.API[*Controller]{Key: 45, Min: 0, Max: 1, Handle: (*Controller).handleAlterPartitionAssignments}

func (c *Controller) handleAlterPartitionAssignments(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !wire.Authorize(r, kmsg.ACLOperationAlter, wire.ClusterResource) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authorization failed.")
		return wire.Now(resp)
	}
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			code, msg := c.reassign(rt.Topic, rp.Partition, rp.Replicas)
			if code != 0 {
				p.ErrorCode, p.ErrorMessage = code, kmsg.StringPtr(msg)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return wire.Now(resp)
}

func (c *Controller) reassign(topic string, partition int32, replicas []int32) (int16, string) {
	leader, ok := c.view.LeaderOf(topic, partition)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, "The topic or partition does not exist."
	}
	switch {
	case replicas == nil:
		return kerr.NoReassignmentInProgress.Code, "No ongoing reassignment for topic " + topic + " partition."
	case slices.Equal(replicas, []int32{leader.NodeID}):
		return 0, ""
	case len(replicas) == 0:
		return kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes an empty replica list."
	}
	return kerr.InvalidReplicaAssignment.Code, "txncoord keeps one replica of each partition on the leader its placement rule names (broker " +
		strconv.Itoa(int(leader.NodeID)) + "): it cannot move it."
}
