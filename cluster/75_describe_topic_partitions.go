package cluster

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DescribeTopicPartitions (key 75), v0, served by every node (KIP-966).
//
// Behavior (Kafka's DescribeTopicPartitionsRequestHandler):
//   - no topics named: every topic the principal may DESCRIBE; named
//     topics: each, an unknown one UNKNOWN_TOPIC_OR_PARTITION, one the
//     principal may not DESCRIBE TOPIC_AUTHORIZATION_FAILED;
//   - topics in name order, from the cursor's topic (and, in it, from the
//     cursor's partition) on; at most ResponsePartitionLimit partitions
//     (capped at Kafka's max.request.partition.size.limit, 2000): where the
//     limit stops the answer, NextCursor names the first partition left
//     out;
//   - each partition: its replicas (View.ReplicasOf), the first leading
//     and alone in the ISR (txncoord keeps one copy); no
//     eligible leader replicas (ELR is off);
//   - TopicAuthorizedOperations: the principal's operations on the topic.
var describeTopicPartitionsRange = [2]int16{0, 0}

// maxPartitionLimit is Kafka's max.request.partition.size.limit default.
const maxPartitionLimit = 2000

// topicOperations are the operations DescribeTopicPartitions reports.
var topicOperations = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
	kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs,
	kmsg.ACLOperationAlterConfigs}

// RegisterDescribeTopicPartitions registers DescribeTopicPartitions.
func (v *View) RegisterDescribeTopicPartitions(reg *wire.Registry) {
	reg.Register(75, describeTopicPartitionsRange[0], describeTopicPartitionsRange[1], func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(v.describeTopicPartitions(r, r.Body.(*kmsg.DescribeTopicPartitionsRequest)))
	})
}

func (v *View) describeTopicPartitions(r *wire.Request, req *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	describable := func(name string) bool {
		return wire.Authorize(r, kmsg.ACLOperationDescribe, wire.TopicResource(name))
	}
	var names []string
	if len(req.Topics) == 0 {
		for _, t := range v.Topics() {
			if describable(t.Name) {
				names = append(names, t.Name)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, t := range req.Topics {
			if !seen[t.Topic] {
				seen[t.Topic] = true
				names = append(names, t.Topic)
			}
		}
		sort.Strings(names)
	}
	limit := req.ResponsePartitionLimit
	if limit <= 0 || limit > maxPartitionLimit {
		limit = maxPartitionLimit
	}
	var from int32
	if c := req.Cursor; c != nil {
		i := sort.SearchStrings(names, c.Topic)
		names = names[i:]
		if len(names) > 0 && names[0] == c.Topic {
			from = max(c.Partition, 0)
		}
	}
	for i, name := range names {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		t, ok := v.Topic(name)
		switch {
		case !describable(name):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !ok:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		if rt.ErrorCode != 0 {
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if limit == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		rt.TopicID, rt.IsInternal = t.ID, t.Internal
		var ops int32
		for _, op := range topicOperations {
			if wire.Authorize(r, op, wire.TopicResource(name)) {
				ops |= 1 << op
			}
		}
		rt.AuthorizedOperations = ops
		start := int32(0)
		if i == 0 {
			start = from
		}
		for p := start; p < t.Partitions; p++ {
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: p}
				break
			}
			leader, _ := v.LeaderOf(name, p)
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.Partition, rp.LeaderID = p, leader.NodeID
			rp.Replicas, rp.ISR = v.ReplicasOf(name, p), []int32{leader.NodeID}
			rp.EligibleLeaderReplicas, rp.LastKnownELR, rp.OfflineReplicas = []int32{}, []int32{}, []int32{}
			rt.Partitions = append(rt.Partitions, rp)
			limit--
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return resp
}
