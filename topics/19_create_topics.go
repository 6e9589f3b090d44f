package topics

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// CreateTopics (key 19), v0–v7, served by the controller (the coordinator
// node).
//
// Behavior (Kafka's ControllerApis + ReplicationControlManager.createTopics):
//   - a name given twice: INVALID_REQUEST "Duplicate topic name." for each;
//     __cluster_metadata: INVALID_REQUEST;
//   - an invalid name, or one that collides with an existing topic once
//     '.' and '_' are unified: INVALID_TOPIC_EXCEPTION;
//   - an existing topic: TOPIC_ALREADY_EXISTS;
//   - a null config value, or a config topicconfig.ValidateTopicConfigs
//     refuses (unknown name, bad value): INVALID_CONFIG;
//   - partitions 0 or below -1: INVALID_PARTITIONS; replication factor 0 or
//     below -1, or above the number of leaders: INVALID_REPLICATION_FACTOR;
//     -1 is the default (default_partitions; replication factor 1);
//   - a manual assignment is accepted only when it is the placement rule's
//     (INVALID_REPLICA_ASSIGNMENT otherwise; INVALID_REQUEST with a count);
//   - txncoord's policy (POLICY_VIOLATION): Kafka's own internal topics
//     __transaction_state and __share_group_state, and more than
//     DefaultMaxPartitions partitions;
//   - validate_only checks everything and creates nothing; otherwise the
//     answer comes once the topic is durable and in the view;
//   - txncoord keeps one replica per partition: a topic created with a
//     replication factor up to the number of leaders is accepted and
//     answered (v5+) and listed in Metadata with replication factor 1.
//
// Version notes: v1 adds validate_only and error messages; v5 answers the
// partition count, replication factor and every effective config; v7 the
// topic id. TimeoutMillis is not waited on: the view changes with the answer.
var createTopicsAPI = wire.API[*Controller]{Key: 19, Min: 0, Max: 7, Handle: (*Controller).handleCreateTopics}

func (c *Controller) handleCreateTopics(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	if r.ClientID != nil && *r.ClientID == AdoptClientID {
		return wire.Now(c.adopt(req))
	}
	specs := make([]Spec, len(req.Topics))
	for i, t := range req.Topics {
		spec := Spec{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		for _, cfg := range t.Configs {
			if spec.Configs == nil {
				spec.Configs = map[string]*string{}
			}
			spec.Configs[cfg.Name] = cfg.Value
		}
		for _, a := range t.ReplicaAssignment {
			if spec.Assignments == nil {
				spec.Assignments = map[int32][]int32{}
			}
			spec.Assignments[a.Partition] = a.Replicas
		}
		specs[i] = spec
	}
	// CREATE on the cluster, or else on each topic (Kafka's order).
	clusterCreate := wire.Authorize(r, kmsg.ACLOperationCreate, wire.ClusterResource)
	results := make([]Result, len(specs))
	var allowed []Spec
	var at []int
	for i, spec := range specs {
		if !clusterCreate && !wire.Authorize(r, kmsg.ACLOperationCreate, wire.TopicResource(spec.Name)) {
			results[i] = fail(spec.Name, kerr.TopicAuthorizationFailed, "Authorization failed.")
			continue
		}
		allowed, at = append(allowed, spec), append(at, i)
	}
	for j, res := range c.Create(ctx, allowed, req.ValidateOnly) {
		results[at[j]] = res
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, res := range results {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = res.Name
		if res.Err != nil {
			rt.ErrorCode, rt.ErrorMessage = res.Err.Code, kmsg.StringPtr(res.Msg)
			// An existing topic is how clients create idempotently:
			// not worth a line.
			if res.Err != kerr.TopicAlreadyExists {
				r.LogRefused(res.Name, res.Err.Code, res.Msg)
			}
		} else {
			rt.TopicID = res.Info.id
			// The replica count Metadata reports; one copy is kept.
			rt.NumPartitions, rt.ReplicationFactor = res.Info.Partitions, res.Info.RequestedReplicationFactor
			if req.Version >= 5 {
				rt.Configs = effectiveConfigs(res.Info.Configs, c.view.File().BrokerConfigs())
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return wire.Now(resp)
}

// adopt answers a follower's CreateTopics for topics its leader holds data
// for (sync.go, AdoptClientID): each is created unless it was deleted
// (UNKNOWN_TOPIC_OR_PARTITION); an existing one is answered as it is.
func (c *Controller) adopt(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		topic, err := c.Adopt(t.Topic, t.NumPartitions)
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
			var ke *kerr.Error
			if errors.As(err, &ke) {
				rt.ErrorCode = ke.Code
			}
		} else {
			rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = topic.ID, topic.Partitions, 1
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
