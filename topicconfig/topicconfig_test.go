package topicconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// The scenarios (testdata/*.txt):
//
//	validate            input lines name=value (a bare name is a null value)
//	resolve             input lines name=value; broker settings as broker.name=value
//	def topic|broker name=N
//
// go test ./topicconfig -args -rewrite refreshes the expected outputs.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			switch c.Cmd {
			case "validate":
				configs := map[string]*string{}
				for _, l := range c.Input {
					k, v, ok := strings.Cut(l, "=")
					if !ok {
						configs[k] = nil
						continue
					}
					configs[k] = &v
				}
				err := ValidateTopicConfigs(configs)
				if err == nil {
					return "ok"
				}
				var ce *Error
				if !errors.As(err, &ce) || !errors.Is(err, kerr.InvalidConfig) {
					t.Fatalf("%s: error %v is not an INVALID_CONFIG *Error", c.Pos, err)
				}
				return "INVALID_CONFIG: " + ce.Message
			case "resolve":
				topic, broker := map[string]string{}, map[string]string{}
				for _, l := range c.Input {
					k, v, _ := strings.Cut(l, "=")
					if b, ok := strings.CutPrefix(k, "broker."); ok {
						broker[b] = v
					} else {
						topic[k] = v
					}
				}
				v := Resolve(topic, broker)
				out := fmt.Sprintf("max.message.bytes=%d retention.ms=%d retention.bytes=%d delete=%t log_append_time=%t",
					v.MaxMessageBytes, v.RetentionMs, v.RetentionBytes, v.Delete, v.LogAppendTime)
				if c.Has("cleaner") {
					out += fmt.Sprintf("\ncompact=%t delete.retention.ms=%d min.compaction.lag.ms=%d max.compaction.lag.ms=%d min.cleanable.dirty.ratio=%g segment.ms=%d segment.bytes=%d",
						v.Compact, v.DeleteRetentionMs, v.MinCompactionLagMs, v.MaxCompactionLagMs, v.MinCleanableDirtyRatio, v.SegmentMs, v.SegmentBytes)
				}
				return out
			case "def":
				lookup := Topic
				if c.Has("broker") {
					lookup = Broker
				}
				d, ok := lookup(c.Arg("name", ""))
				if !ok {
					return "unknown"
				}
				def := "null"
				if d.Default != nil {
					def = *d.Default
				}
				return fmt.Sprintf("type=%d default=%s valid=%q enforced=%t read_only=%t synonyms=%v",
					d.Type, def, d.ValidValues, d.Enforced, d.ReadOnly, d.Synonyms)
			}
			t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
			return ""
		})
	})
}

// Every default must pass its own validation (Kafka checks this when a
// ConfigKey is defined), and every topic config must validate alone.
func TestDefaultsAreValid(t *testing.T) {
	for _, defs := range [][]*Def{topicDefs, brokerDefs} {
		for _, d := range defs {
			if d.Default == nil {
				continue
			}
			if err := ValidateValue(d, *d.Default); err != nil {
				t.Errorf("%s: default %q: %v", d.Name, *d.Default, err)
			}
		}
	}
	for _, d := range topicDefs {
		if err := ValidateTopicConfigs(map[string]*string{d.Name: d.Default}); err != nil {
			t.Errorf("%s alone at its default: %v", d.Name, err)
		}
	}
	if len(Topics()) != len(topicDefs) || Topics()[0].Name > Topics()[1].Name {
		t.Fatal("Topics() is not the sorted list of every topic config")
	}
}
