package cluster

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDataDriven replays testdata/*.txt. Commands:
//
//	parse                      the cluster file → "ok ..." (and what the view makes of it) or
//	                           one "error:" line per problem; a valid file written and parsed
//	                           again must come back the same
//	leaders topic=T            partition → leader node of topic T (from the file)
//	topic-id topic=T           T's id in the file's cluster
//	transaction-version        the finalized transaction.version and each node's supported range
//	share-version              the same for share.version
func TestDataDriven(t *testing.T) {
	runScenarios(t, func(t *testing.T, c ddCase) string {
		f, err := Parse([]byte(c.input))
		if c.command == "parse" {
			if err != nil {
				var out []string
				for _, line := range strings.Split(err.Error(), "\n") {
					out = append(out, "error: "+line)
				}
				return strings.Join(out, "\n")
			}
			v := NewView(f)
			again, err := Parse(mustMarshal(t, f))
			if err != nil {
				t.Fatalf("line %d: the file as written does not parse: %v", c.line, err)
			}
			if !reflect.DeepEqual(again, f) {
				t.Fatalf("line %d: the file as written parses as\n%+v\nnot\n%+v", c.line, again, f)
			}
			var coords []string
			for _, n := range v.Coordinators() {
				coords = append(coords, fmt.Sprintf("%d@%s", n.NodeID, n.Addr))
			}
			e := v.Etcd()
			lease := ""
			if e.LeaseTTLSeconds != DefaultLeaseTTLSeconds {
				lease = fmt.Sprintf(" lease_ttl_seconds %d", e.LeaseTTLSeconds)
			}
			out := fmt.Sprintf("ok: cluster %s, coordinator %d, %d leaders, default_partitions %d, %d topics\n"+
				"coordinators [%s], transaction_state_partitions %d, etcd endpoints %v prefix %s%s",
				f.ClusterID, v.Coordinator().NodeID, len(f.Leaders), f.DefaultPartitions, len(f.Topics),
				strings.Join(coords, " "), v.TransactionStatePartitions(), e.Endpoints, e.Prefix, lease)
			if bc := f.BrokerConfigs(); len(bc) > 0 {
				// The broker configs, and what a topic with none of its
				// own enforces by them.
				keys := slices.Sorted(maps.Keys(bc))
				for i, k := range keys {
					keys[i] = k + "=" + bc[k]
				}
				d := v.TopicValues("any")
				out += fmt.Sprintf("\nbroker configs: %s\na topic inherits: compact %t, delete %t, delete.retention.ms %d, "+
					"min.compaction.lag.ms %d, max.compaction.lag.ms %d, min.cleanable.dirty.ratio %g",
					strings.Join(keys, " "), d.Compact, d.Delete, d.DeleteRetentionMs, d.MinCompactionLagMs,
					d.MaxCompactionLagMs, d.MinCleanableDirtyRatio)
			}
			return out
		}
		if err != nil {
			t.Fatalf("line %d: %v", c.line, err)
		}
		v := NewView(f)
		switch c.command {
		case "leaders":
			topic, err := v.EnsureTopic(c.args["topic"])
			if err != nil {
				return "error: " + err.Error()
			}
			var out []string
			for p := int32(0); p < topic.Partitions; p++ {
				l, _ := v.LeaderOf(topic.Name, p)
				out = append(out, fmt.Sprintf("%s/%d → node %d", topic.Name, p, l.NodeID))
			}
			return strings.Join(out, "\n")
		case "topic-id":
			return fmt.Sprintf("%x", TopicID(f.ClusterID, c.args["topic"]))
		case "transaction-version", "share-version":
			feature := strings.ReplaceAll(c.command, "-", ".")
			level := v.TransactionVersion()
			if feature == "share.version" {
				level = v.ShareVersion()
			}
			out := []string{"finalized " + feature + "=" + strconv.Itoa(int(level))}
			for _, n := range v.Brokers() {
				feat := v.Features(n.KafkaVersion)
				s := "none"
				for _, sf := range feat.Supported {
					if sf.Name == feature {
						s = fmt.Sprintf("%s %d-%d", sf.Name, sf.Min, sf.Max)
					}
				}
				out = append(out, fmt.Sprintf("node %d (%s) supports %s", n.NodeID, n.KafkaVersion, s))
			}
			return strings.Join(out, "\n")
		}
		t.Fatalf("line %d: unknown command %q", c.line, c.command)
		return ""
	})
}

func mustMarshal(t *testing.T, f *File) []byte {
	t.Helper()
	raw, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
