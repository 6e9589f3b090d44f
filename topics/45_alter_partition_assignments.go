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
// Behavior, for a cluster whose partitions each keep one copy, on their
// leader (Kafka's ReplicationControlManager.alterPartitionReassignments
// answers):
//   - needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED at
//     the top;
//   - an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
//   - a cancellation (null replicas): NO_REASSIGNMENT_IN_PROGRESS, as no
//     reassignment ever is;
//   - the partition's current replica list (View.ReplicasOf): success,
//     no change, as Kafka completes a reassignment to the current
//     replicas at once;
//   - another list that keeps the current leader first (followers added,
//     removed or changed): success, the list recorded at once (durable
//     before the answer) and reported by Metadata; no data moves, as the
//     followers hold none;
//   - a list that changes the replica count with
//     AllowReplicationFactorChange false (v1): INVALID_REPLICATION_FACTOR;
//   - any other list: INVALID_REPLICA_ASSIGNMENT (empty, duplicates, a
//     node that cannot lead partitions, or a new leader: txncoord cannot
//     move a partition's copy).
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
			code, msg := c.reassign(rt.Topic, rp.Partition, rp.Replicas, req.Version < 1 || req.AllowReplicationFactorChange)
			if code != 0 {
				p.ErrorCode, p.ErrorMessage = code, kmsg.StringPtr(msg)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return wire.Now(resp)
}

// reassign answers one partition of a reassignment, as Kafka's controller
// does for a cluster that keeps one copy of each partition on its leader:
// a list that keeps the leader first is recorded (its followers are
// reported, not written); one that would move the leader cannot be made.
func (c *Controller) reassign(topic string, partition int32, replicas []int32, allowRFChange bool) (int16, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	leader, ok := c.view.LeaderOf(topic, partition)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, "The topic or partition does not exist."
	}
	current := c.view.ReplicasOf(topic, partition)
	switch {
	case replicas == nil:
		return kerr.NoReassignmentInProgress.Code, "No ongoing reassignment for topic " + topic + " partition."
	case slices.Equal(replicas, current):
		return 0, ""
	case len(replicas) == 0:
		return kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes an empty replica list."
	}
	nodes := map[int32]bool{}
	for _, n := range c.view.PartitionNodes() {
		nodes[n.NodeID] = true
	}
	if res := c.checkReplicas(topic, replicas, nodes); res.Err != nil {
		return res.Err.Code, res.Msg
	}
	if !allowRFChange && len(replicas) != len(current) {
		return kerr.InvalidReplicationFactor.Code, "The replication factor is changed from " + strconv.Itoa(len(current)) + " to " +
			strconv.Itoa(len(replicas)) + " but changing replication factor is not allowed for this reassignment."
	}
	s, ok := c.topics[topic]
	if replicas[0] != leader.NodeID || !ok || s.Deleted {
		return kerr.InvalidReplicaAssignment.Code, "txncoord keeps each partition's one copy on its leader (broker " +
			strconv.Itoa(int(leader.NodeID)) + ") and cannot move it: a reassignment must keep that broker as the first replica."
	}
	grown := make([][]int32, s.Partitions)
	copy(grown, s.Assignment)
	grown[partition] = slices.Clone(replicas)
	s.Assignment = grown
	if err := c.commitLocked([]state{s}); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	return 0, ""
}
