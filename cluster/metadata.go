package cluster

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Metadata (key 3), v0–v13, served identically by every node.
//
// Behavior:
//   - brokers are the coordinator and the leaders; ControllerID is the
//     node running the topic controller (View.Controller: the coordinator,
//     or the holder of the controller's etcd lease; KafkaJS sends
//     idempotent InitProducerId there);
//   - a null topic list means all topics, and so does an empty list at v0
//     (v1+: an empty list means none), as Kafka's MetadataRequest.isAllTopics;
//   - a listed unknown topic is created with default_partitions when the
//     request allows it and auto.create.topics.enable is on, else
//     UNKNOWN_TOPIC_OR_PARTITION; an invalid name gets
//     INVALID_TOPIC_EXCEPTION. Below v4 the request has no
//     AllowAutoTopicCreation field and Kafka reads it as its default, true:
//     an old client's Metadata auto-creates as it did against Kafka 0.10;
//   - a topic asked for by an unknown id (v10+) gets UNKNOWN_TOPIC_ID;
//   - a partition's replicas are its replica list (View.ReplicasOf: one
//     per replication factor, the leader first); its ISR is the leader
//     alone, which keeps the one copy; leader epoch 0.
//
// Version notes: v1 adds the controller and rack, v2 the cluster id (kmsg
// leaves out what a version lacks); v10+ topics carry ids and may be
// requested by id; v13 adds a top-level error code (always 0 here). Kafka
// 4.x still serves v0–v3: KIP-896 meant to remove them, KAFKA-18648 kept
// them because librdkafka sends them.
const (
	MetadataMinVersion = 0
	MetadataMaxVersion = 13
)

// RegisterMetadata registers the Metadata handler of this view.
func (v *View) RegisterMetadata(reg *wire.Registry) {
	reg.Register(3, MetadataMinVersion, MetadataMaxVersion, func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(v.metadata(r.Body.(*kmsg.MetadataRequest), func(topic string) bool {
			return wire.Authorize(r, kmsg.ACLOperationDescribe, wire.TopicResource(topic))
		}))
	})
}

// Metadata answers one Metadata request of a principal that may describe
// every topic.
func (v *View) Metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	return v.metadata(req, func(string) bool { return true })
}

// metadata answers req for a principal that may DESCRIBE the topics
// describable allows: the others are left out of an all-topics answer and
// answered TOPIC_AUTHORIZATION_FAILED (without auto-creation) when named,
// as Kafka does.
func (v *View) metadata(req *kmsg.MetadataRequest, describable func(string) bool) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ClusterID = kmsg.StringPtr(v.file.ClusterID)
	resp.ControllerID = v.Controller().NodeID
	for _, n := range v.LiveBrokers() {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = n.NodeID
		b.Host, b.Port = hostPort(n.Addr)
		resp.Brokers = append(resp.Brokers, b)
	}
	version := req.GetVersion()
	if req.Topics == nil || (version == 0 && len(req.Topics) == 0) {
		for _, t := range v.Topics() {
			if describable(t.Name) {
				resp.Topics = append(resp.Topics, v.topicMetadata(t))
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		var (
			t   Topic
			ok  bool
			err error
		)
		denied := false
		switch {
		case rt.Topic != nil && !describable(*rt.Topic):
			denied = true
		case rt.Topic != nil:
			t, ok = v.Topic(*rt.Topic)
			if !ok && (req.AllowAutoTopicCreation || version < 4) {
				t, err = v.EnsureTopic(*rt.Topic)
				ok = err == nil
			}
		case rt.TopicID != [16]byte{}:
			t, ok = v.TopicByID(rt.TopicID)
			if ok && !describable(t.Name) {
				ok, denied = false, true
			}
		}
		if ok {
			resp.Topics = append(resp.Topics, v.topicMetadata(t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		switch {
		case denied:
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case err != nil:
			// EnsureTopic's errors carry their code: an invalid name,
			// auto-creation off, the controller's store failed.
			mt.ErrorCode = kerr.InvalidTopicException.Code
			var ke *kerr.Error
			if errors.As(err, &ke) {
				mt.ErrorCode = ke.Code
			}
		case rt.Topic == nil:
			mt.ErrorCode = kerr.UnknownTopicID.Code
		default:
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func (v *View) topicMetadata(t Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for p := int32(0); p < t.Partitions; p++ {
		leader, _ := v.LeaderOf(t.Name, p)
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = leader.NodeID
		mp.Replicas = v.ReplicasOf(t.Name, p)
		mp.ISR = []int32{leader.NodeID}
		mp.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
