package topics

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// CreatePartitions (key 37), v0–v3, served by the controller.
//
// Behavior (ReplicationControlManager.createPartitions):
//   - a name given twice: INVALID_REQUEST; an unknown topic:
//     UNKNOWN_TOPIC_OR_PARTITION; __consumer_offsets: INVALID_REQUEST;
//   - the same count: INVALID_PARTITIONS "Topic already has N partition(s).";
//     fewer: INVALID_PARTITIONS "... would not be an increase.";
//   - assignments: as many as new partitions, each the placement rule's
//     (INVALID_REPLICA_ASSIGNMENT otherwise);
//   - validate_only checks and changes nothing. Existing partitions keep
//     their leaders: placement depends on the partition number only.
//
// Version notes: v2 is the first flexible version; v3 is v2 (KIP-599's
// quota error, which txncoord never answers).
var createPartitionsAPI = wire.API[*Controller]{Key: 37, Min: 0, Max: 3, Handle: (*Controller).handleCreatePartitions}

func (c *Controller) handleCreatePartitions(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	specs := make([]PartitionsSpec, len(req.Topics))
	for i, t := range req.Topics {
		specs[i] = PartitionsSpec{Name: t.Topic, Count: t.Count}
		c.mu.Lock()
		current := c.topics[t.Topic].Partitions
		c.mu.Unlock()
		if t.Assignment != nil {
			specs[i].Assignments = map[int32][]int32{}
			for j, a := range t.Assignment {
				specs[i].Assignments[current+int32(j)] = a.Replicas
			}
		}
	}
	// ALTER on each topic.
	results := make([]Result, len(specs))
	var allowed []PartitionsSpec
	var at []int
	for i, spec := range specs {
		if !wire.Authorize(r, kmsg.ACLOperationAlter, wire.TopicResource(spec.Name)) {
			results[i] = fail(spec.Name, kerr.TopicAuthorizationFailed, "Authorization failed.")
			continue
		}
		allowed, at = append(allowed, spec), append(at, i)
	}
	for j, res := range c.CreatePartitions(ctx, allowed, req.ValidateOnly) {
		results[at[j]] = res
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, res := range results {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = res.Name
		if res.Err != nil {
			rt.ErrorCode, rt.ErrorMessage = res.Err.Code, kmsg.StringPtr(res.Msg)
			r.LogRefused(res.Name, res.Err.Code, res.Msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return wire.Now(resp)
}
