package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLogCleanerBrokerDefaults: the log cleaner's broker defaults set in the
// cluster file are described on the BROKER resource as
// STATIC_BROKER_CONFIG, a topic that does not set the topic config
// inherits them (DescribeConfigs and CreateTopics v5+ say
// STATIC_BROKER_CONFIG, with the broker synonym first), a topic's own value
// wins, and the leaders enforce what a topic inherits: a topic created
// with no cleanup.policy of its own is compacted.
func TestLogCleanerBrokerDefaults(t *testing.T) {
	f, lns := twoLeaderFile(t)
	policy, retention, minLag, maxLag, ratio := "compact", int64(100), int64(0), int64(3_600_000), 0.01
	f.LogCleanupPolicy, f.LogCleanerDeleteRetentionMs = &policy, &retention
	f.LogCleanerMinCompactionLagMs, f.LogCleanerMaxCompactionLagMs, f.LogCleanerMinCleanableRatio = &minLag, &maxLag, &ratio
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, Log: zerolog.Nop(), CleanerBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, e.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.DefaultProduceTopic("inherits"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	want := map[string]string{
		"log.cleanup.policy":                policy,
		"log.cleaner.delete.retention.ms":   "100",
		"log.cleaner.min.compaction.lag.ms": "0",
		"log.cleaner.max.compaction.lag.ms": "3600000",
		"log.cleaner.min.cleanable.ratio":   "0.01",
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := brokers.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range rc.Configs {
		if v, ok := want[c.Key]; ok {
			seen++
			if c.Value == nil || *c.Value != v || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
				t.Errorf("broker %s = %v (%s), want %s STATIC_BROKER_CONFIG", c.Key, c.MaybeValue(), c.Source, v)
			}
		}
		if c.Key == "log.cleaner.enable" && (c.Value == nil || *c.Value != "true") {
			t.Errorf("broker log.cleaner.enable = %v: the leaders run the cleaner", c.MaybeValue())
		}
	}
	if seen != len(want) {
		t.Fatalf("broker configs: %d of the %d cleaner defaults described", seen, len(want))
	}

	// CreateTopics v5+ answers the effective configs with their source.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "inherits", 1, -1
	segment := kmsg.NewCreateTopicsRequestTopicConfig()
	segment.Name, segment.Value = "segment.ms", kmsg.StringPtr("1") // the topic's own: no active segment to wait for
	own := kmsg.NewCreateTopicsRequestTopicConfig()
	own.Name, own.Value = "min.compaction.lag.ms", kmsg.StringPtr("0")
	rt.Configs = append(rt.Configs, segment, own)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	created := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, c := range resp.Topics[0].Configs {
		created[c.Name] = c
	}
	for name, v := range map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "100", "max.compaction.lag.ms": "3600000",
		"min.cleanable.dirty.ratio": "0.01"} {
		if c := created[name]; c.Value == nil || *c.Value != v || kmsg.ConfigSource(c.Source) != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("CreateTopics %s = %v (source %d), want %s STATIC_BROKER_CONFIG", name, c.Value, c.Source, v)
		}
	}
	if c := created["min.compaction.lag.ms"]; kmsg.ConfigSource(c.Source) != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("CreateTopics min.compaction.lag.ms source %d, want the topic's own", c.Source)
	}

	// DescribeConfigs of the topic: inherited with the broker synonym,
	// then Kafka's default; the topic's own value first.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "inherits"
	dreq.Resources, dreq.IncludeSynonyms = append(dreq.Resources, rr), true
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || dresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe: %v %+v", err, dresp)
	}
	described := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range dresp.Resources[0].Configs {
		described[c.Name] = c
	}
	c := described["cleanup.policy"]
	if c.Value == nil || *c.Value != "compact" || c.Source != kmsg.ConfigSourceStaticBrokerConfig || c.IsDefault ||
		len(c.ConfigSynonyms) != 2 || c.ConfigSynonyms[0].Name != "log.cleanup.policy" || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceStaticBrokerConfig ||
		c.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig || *c.ConfigSynonyms[1].Value != "delete" {
		t.Errorf("topic cleanup.policy: %+v", c)
	}
	if c := described["min.compaction.lag.ms"]; c.Source != kmsg.ConfigSourceDynamicTopicConfig || len(c.ConfigSynonyms) != 3 ||
		c.ConfigSynonyms[1].Name != "log.cleaner.min.compaction.lag.ms" {
		t.Errorf("topic min.compaction.lag.ms: %+v", c)
	}
	if c := described["segment.bytes"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("topic segment.bytes: %+v, want Kafka's default", c)
	}

	// The leader compacts what it inherits: 10 keys written 5 times
	// shrink to about one record per key.
	const keys, rounds = 10, 5
	for round := range rounds {
		for k := range keys {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d", round)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	last := int64(keys*rounds - 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		state, n := readState(ctx, t, e.Bootstrap(), "inherits", true, last)
		if len(state) != keys {
			t.Fatalf("state %v: want %d keys", state, keys)
		}
		for k, v := range state {
			if v != fmt.Sprintf("v%d", rounds-1) {
				t.Fatalf("key %s = %s after cleaning, want v%d", k, v, rounds-1)
			}
		}
		if n <= keys+1 { // the last batch may stay in the active segment's place
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a topic inheriting cleanup.policy=compact still reads %d records for %d keys", n, keys)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
