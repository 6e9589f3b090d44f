package topics

// DescribeConfigs (key 32), v0–v4, served by every node.
//
// Behavior, as Kafka's ConfigHelper.describeConfigs:
//   - TOPIC: every topic config (topicconfig.Topics), each with its value
//     (the topic's own, else a broker setting, else Kafka's default), its
//     source (DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG),
//     read-only false; synonyms (v1+, when asked) list the topic's value,
//     then the broker's, then the default under the broker synonym's name;
//     an unknown topic is UNKNOWN_TOPIC_OR_PARTITION;
//   - BROKER: the resource name is "" or this node's id (another id is
//     INVALID_REQUEST, as Kafka answers a request sent to the wrong
//     broker); the broker configs a node describes (topicconfig.Brokers),
//     STATIC_BROKER_CONFIG where this node sets them (node id, partitions
//     of auto-created topics and of __consumer_offsets,
//     auto.create.topics.enable, listeners, the log cleaner's defaults the
//     cluster file sets), DEFAULT_CONFIG otherwise, all
//     read-only; a sensitive value is null;
//   - other resource types are INVALID_REQUEST;
//   - ConfigNames filters (null: all); documentation (v3+, when asked) and
//     the config type (v3+) come from topicconfig.
//
// Topic configs are the view's (cluster.View.TopicConfigs): the
// controller's on the coordinator node and in `txncoord up`.
//
// Version notes: v1 IncludeSynonyms and synonyms; v2 throttle; v3
// IncludeDocumentation, ConfigType, Documentation; v4 flexible.

import (
	"context"
	"maps"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/shares"
	"github.com/txncoord/txncoord/topicconfig"
	"github.com/txncoord/txncoord/wire"
)

const (
	describeConfigsMinVersion = 0
	describeConfigsMaxVersion = 4
)

// RegisterDescribeConfigs adds DescribeConfigs for node self of view.
func RegisterDescribeConfigs(reg *wire.Registry, view *cluster.View, self cluster.Node) {
	reg.Register(32, describeConfigsMinVersion, describeConfigsMaxVersion, func(_ context.Context, r *wire.Request) wire.Reply {
		allowed := func(typ kmsg.ConfigResourceType, name string) bool {
			if typ == kmsg.ConfigResourceTypeTopic {
				return wire.Authorize(r, kmsg.ACLOperationDescribeConfigs, wire.TopicResource(name))
			}
			return wire.Authorize(r, kmsg.ACLOperationDescribeConfigs, wire.ClusterResource)
		}
		return wire.Now(describeConfigs(view, self, r.Body.(*kmsg.DescribeConfigsRequest), r.Version, allowed))
	})
}

// BrokerSettings are the broker configs node self sets, by Kafka name.
func BrokerSettings(view *cluster.View, self cluster.Node) map[string]string {
	id := strconv.Itoa(int(self.NodeID))
	partitions := view.File().DefaultPartitions
	settings := map[string]string{
		"broker.id":                        id,
		"node.id":                          id,
		"num.partitions":                   strconv.Itoa(int(partitions)),
		"default.replication.factor":       "1",
		"offsets.topic.num.partitions":     strconv.Itoa(int(view.OffsetsPartitions())),
		"auto.create.topics.enable":        strconv.FormatBool(view.AutoCreateTopics()),
		"listeners":                        "PLAINTEXT://" + self.Addr,
		"advertised.listeners":             "PLAINTEXT://" + self.Addr,
		"group.initial.rebalance.delay.ms": strconv.FormatInt(view.GroupInitialRebalanceDelay().Milliseconds(), 10),
	}
	maps.Copy(settings, view.File().BrokerConfigs())
	return settings
}

// allowed says whether the principal may DESCRIBE_CONFIGS a resource (the
// topic; the cluster for a broker): the others get
// TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED.
func describeConfigs(view *cluster.View, self cluster.Node, req *kmsg.DescribeConfigsRequest, version int16,
	allowed func(kmsg.ConfigResourceType, string) bool) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	broker := BrokerSettings(view, self)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		want := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker:
			if !allowed(rr.ResourceType, rr.ResourceName) {
				out.ErrorCode, out.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
				if rr.ResourceType == kmsg.ConfigResourceTypeTopic {
					out.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				resp.Resources = append(resp.Resources, out)
				continue
			}
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if _, ok := view.Topic(rr.ResourceName); !ok {
				out.ErrorCode = kerr.UnknownTopicOrPartition.Code
				out.ErrorMessage = kmsg.StringPtr("Topic " + rr.ResourceName + " does not exist")
				break
			}
			topic := view.TopicConfigs(rr.ResourceName)
			for _, d := range topicconfig.Topics() {
				if want(d.Name) {
					out.Configs = append(out.Configs, topicEntry(d, topic, broker, req, version))
				}
			}
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(self.NodeID)) {
				out.ErrorCode = kerr.InvalidRequest.Code
				out.ErrorMessage = kmsg.StringPtr("Unexpected broker id, expected " + strconv.Itoa(int(self.NodeID)) +
					" or empty string, but received " + rr.ResourceName)
				break
			}
			for _, d := range topicconfig.Brokers() {
				if want(d.Name) {
					out.Configs = append(out.Configs, brokerEntry(d, broker, req, version))
				}
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			explicit := view.GroupConfigs(rr.ResourceName)
			for _, d := range shares.GroupConfigs {
				if !want(d.Name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Source, c.IsDefault = d.Name, kmsg.ConfigSourceDefaultConfig, true
				v := d.Default
				if ev, ok := explicit[d.Name]; ok {
					v, c.Source, c.IsDefault = ev, kmsg.ConfigSourceGroupConfig, false
				}
				c.Value = &v
				if version >= 3 {
					c.ConfigType = kmsg.ConfigTypeString
					if d.Int {
						c.ConfigType = kmsg.ConfigTypeInt
					}
					if req.IncludeDocumentation {
						c.Documentation = kmsg.StringPtr(d.Doc)
					}
				}
				out.Configs = append(out.Configs, c)
			}
		default:
			out.ErrorCode = kerr.InvalidRequest.Code
			out.ErrorMessage = kmsg.StringPtr("Unsupported resource type " + rr.ResourceType.String())
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

func entry(d *topicconfig.Def, value *string, source kmsg.ConfigSource, req *kmsg.DescribeConfigsRequest, version int16) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source, c.IsSensitive, c.ReadOnly = d.Name, value, source, d.Sensitive, d.ReadOnly
	if d.Sensitive {
		c.Value = nil
	}
	c.IsDefault = source == kmsg.ConfigSourceDefaultConfig
	if version >= 3 {
		c.ConfigType = d.Type
		if req.IncludeDocumentation {
			c.Documentation = kmsg.StringPtr(d.Doc)
		}
	}
	return c
}

func synonym(name string, value *string, source kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, value, source
	return s
}

func topicEntry(d *topicconfig.Def, topic, broker map[string]string, req *kmsg.DescribeConfigsRequest, version int16) kmsg.DescribeConfigsResponseResourceConfig {
	value, source := topicconfig.Effective(d, topic, broker)
	c := entry(d, value, source, req, version)
	if version < 1 || !req.IncludeSynonyms {
		return c
	}
	c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
	if v, ok := topic[d.Name]; ok {
		c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(d.Name, kmsg.StringPtr(v), kmsg.ConfigSourceDynamicTopicConfig))
	}
	for _, s := range d.Synonyms {
		if v, ok := broker[s.Name]; ok {
			c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(s.Name, kmsg.StringPtr(v), kmsg.ConfigSourceStaticBrokerConfig))
		}
	}
	defName := d.Name
	if len(d.Synonyms) > 0 {
		defName = d.Synonyms[0].Name
	}
	return withDefault(c, defName, d.Default)
}

func withDefault(c kmsg.DescribeConfigsResponseResourceConfig, name string, def *string) kmsg.DescribeConfigsResponseResourceConfig {
	if def != nil {
		c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(name, def, kmsg.ConfigSourceDefaultConfig))
	}
	return c
}

func brokerEntry(d *topicconfig.Def, broker map[string]string, req *kmsg.DescribeConfigsRequest, version int16) kmsg.DescribeConfigsResponseResourceConfig {
	value, source := d.Default, kmsg.ConfigSourceDefaultConfig
	if v, ok := broker[d.Name]; ok {
		value, source = kmsg.StringPtr(v), kmsg.ConfigSourceStaticBrokerConfig
	}
	c := entry(d, value, source, req, version)
	if version < 1 || !req.IncludeSynonyms {
		return c
	}
	c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
	if source == kmsg.ConfigSourceStaticBrokerConfig {
		c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(d.Name, value, source))
	}
	return withDefault(c, d.Name, d.Default)
}
