package topics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/node"
)

// TestKadmConfigs: topic configs created with kadm are described with
// their sources and synonyms, altered (incremental and legacy) through the
// controller; invalid values are INVALID_CONFIG; broker configs are
// described. DescribeConfigs and the alters go to the controller's node
// (node 0) here; node's TestControllerRequestsAtALeader sends them to
// leaders, which describe and forward.
func TestKadmConfigs(t *testing.T) {
	_, e, cl := startEmbedded(t, node.EmbeddedSpec{}, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "cfg"); err != nil {
		t.Fatal(err)
	}
	coord := cl.Broker(0)
	describe := func(typ kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		req.Resources = append(req.Resources, rr)
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		resp, err := req.RequestWith(ctx, coord)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatal(err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	topic := describe(kmsg.ConfigResourceTypeTopic, "cfg")
	if c := topic["retention.ms"]; c.Value == nil || *c.Value != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig ||
		len(c.ConfigSynonyms) != 2 || c.ConfigSynonyms[1].Name != "log.retention.ms" || c.Documentation == nil || c.ConfigType != kmsg.ConfigTypeLong {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := topic["max.message.bytes"]; c.Value == nil || *c.Value != "1048588" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("max.message.bytes: %+v", c)
	}
	if c := describe(kmsg.ConfigResourceTypeBroker, "0")["auto.create.topics.enable"]; c.Value == nil || *c.Value != "true" ||
		c.Source != kmsg.ConfigSourceStaticBrokerConfig || !c.ReadOnly {
		t.Fatalf("broker auto.create.topics.enable: %+v", c)
	}

	alter := func(incremental bool, cfgs ...kadm.AlterConfig) error {
		t.Helper()
		var code int16
		if incremental {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
			for _, c := range cfgs {
				rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				rc.Name, rc.Value, rc.Op = c.Name, c.Value, kmsg.IncrementalAlterConfigOp(c.Op)
				rr.Configs = append(rr.Configs, rc)
			}
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, coord)
			if err != nil {
				return err
			}
			code = resp.Resources[0].ErrorCode
		} else {
			req := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
			for _, c := range cfgs {
				rc := kmsg.NewAlterConfigsRequestResourceConfig()
				rc.Name, rc.Value = c.Name, c.Value
				rr.Configs = append(rr.Configs, rc)
			}
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, coord)
			if err != nil {
				return err
			}
			code = resp.Resources[0].ErrorCode
		}
		return kerr.ErrorForCode(code)
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatal(err)
	}
	if got := e.View.TopicConfigs("cfg"); len(got) != 1 || got["max.message.bytes"] != "2000" {
		t.Fatalf("after incremental alter: %v", got)
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("-5")}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("retention.ms=-5: %v", err)
	}
	// Switching a topic between delete and compact, as Kafka: APPEND
	// adds to the default list, SUBTRACT takes out.
	if err := alter(true, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}); err != nil {
		t.Fatalf("append compact: %v", err)
	}
	if got := e.View.TopicConfigs("cfg")["cleanup.policy"]; got != "delete,compact" {
		t.Fatalf("after append compact: cleanup.policy=%q", got)
	}
	if !e.View.TopicValues("cfg").Compact || !e.View.TopicValues("cfg").Delete {
		t.Fatalf("resolved after append compact: %+v", e.View.TopicValues("cfg"))
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")}); err != nil {
		t.Fatalf("subtract delete: %v", err)
	}
	if v := e.View.TopicValues("cfg"); !v.Compact || v.Delete {
		t.Fatalf("resolved after subtract delete: %+v", v)
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("1.5")}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("min.cleanable.dirty.ratio=1.5: %v", err)
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "cleanup.policy"}); err != nil {
		t.Fatal(err)
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("append to a LONG: %v", err)
	}
	if err := alter(false, kadm.AlterConfig{Name: "segment.ms", Value: kadm.StringPtr("1000")}); err != nil {
		t.Fatal(err)
	}
	if got := e.View.TopicConfigs("cfg"); len(got) != 1 || got["segment.ms"] != "1000" {
		t.Fatalf("after legacy alter (replaces everything): %v", got)
	}
}
