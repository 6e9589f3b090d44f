package topics

import (
	"encoding/base64"
	"maps"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/topicconfig"
)

// Info is a topic as the controller and the admin API show it.
type Info struct {
	Name string `json:"name"`
	// ID is Kafka's text form of the topic id (URL-safe base64, no
	// padding), as kafka-topics.sh prints it.
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
	// ReplicationFactor is what txncoord keeps: one replica per
	// partition. RequestedReplicationFactor is what the topic was
	// created with.
	ReplicationFactor          int16             `json:"replication_factor"`
	RequestedReplicationFactor int16             `json:"requested_replication_factor"`
	Internal                   bool              `json:"internal,omitempty"`
	Configs                    map[string]string `json:"configs"`
	// Leaders, by partition, are the partitions' leaders, and Replicas
	// their replica lists as Metadata reports them, the leader first
	// (Describe only).
	Leaders  []int32   `json:"leaders,omitempty"`
	Replicas [][]int32 `json:"-"`

	id [16]byte
}

// IDBytes is the topic id.
func (i Info) IDBytes() [16]byte { return i.id }

// TopicIDString is Kafka's Uuid.toString.
func TopicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func (c *Controller) info(s state) Info {
	configs := maps.Clone(s.Configs)
	if configs == nil {
		configs = map[string]string{}
	}
	return Info{Name: s.Name, ID: TopicIDString(s.ID), id: s.ID, Partitions: s.Partitions, ReplicationFactor: 1,
		RequestedReplicationFactor: s.ReplicationFactor, Configs: configs}
}

// List returns every live topic, __consumer_offsets included, by name.
func (c *Controller) List() []Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Info
	for _, s := range c.topics {
		if !s.Deleted {
			out = append(out, c.info(s))
		}
	}
	if t, ok := c.view.Topic(cluster.OffsetsTopic); ok {
		out = append(out, internalInfo(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func internalInfo(t cluster.Topic) Info {
	return Info{Name: t.Name, ID: TopicIDString(t.ID), id: t.ID, Partitions: t.Partitions, ReplicationFactor: 1,
		RequestedReplicationFactor: 1, Internal: true, Configs: map[string]string{}}
}

// Describe returns one topic with its partitions' leaders.
func (c *Controller) Describe(name string) (Info, bool) {
	c.mu.Lock()
	s, ok := c.topics[name]
	c.mu.Unlock()
	var info Info
	switch {
	case ok && !s.Deleted:
		info = c.info(s)
	case name == cluster.OffsetsTopic:
		t, _ := c.view.Topic(name)
		info = internalInfo(t)
	default:
		return Info{}, false
	}
	for p := range info.Partitions {
		n, _ := c.view.LeaderOf(name, p)
		info.Leaders = append(info.Leaders, n.NodeID)
		info.Replicas = append(info.Replicas, c.view.ReplicasOf(name, p))
	}
	return info, true
}

// effectiveConfigs lists every topic config of a topic whose own configs
// are own, on nodes whose broker configs are broker, as CreateTopics v5+
// answers them (Kafka's computeEffectiveTopicConfigs): sorted by name, a
// sensitive value null.
func effectiveConfigs(own, broker map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range topicconfig.Topics() {
		v, source := topicconfig.Effective(d, own, broker)
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = d.Name, v, d.ReadOnly, int8(source), d.Sensitive
		if d.Sensitive {
			c.Value = nil
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
