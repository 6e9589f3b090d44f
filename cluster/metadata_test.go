package cluster_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// topicNames lists a response's topics (with their error codes if any).
func topicNames(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, tp := range resp.Topics {
		name := "<nil>"
		if tp.Topic != nil {
			name = *tp.Topic
		}
		if tp.ErrorCode != 0 {
			name = fmt.Sprintf("%s:%d", name, tp.ErrorCode)
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Metadata v0–v3 over the wire, as Kafka answers them: at v0 an empty
// topic list means every topic, from v1 it means none and null means
// every topic; a listed unknown topic is auto-created below v4 (the field
// that says otherwise arrives in v4; Kafka's default is true) unless
// auto.create.topics.enable is off; every answer decodes at its version.
func TestMetadataOldVersions(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Topics: map[string]int32{"orders": 2}})
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	cl, err := wire.Dial(ctx, c.Nodes[1].Addr, "old-client")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	do := func(v int16, topics []kmsg.MetadataRequestTopic) *kmsg.MetadataResponse {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		req.Topics = topics
		raw, err := cl.Do(ctx, req)
		if err != nil {
			t.Fatalf("Metadata v%d: %v", v, err)
		}
		return raw.(*kmsg.MetadataResponse)
	}
	all := []string{cluster.OffsetsTopic, "orders"}
	if got := topicNames(do(0, []kmsg.MetadataRequestTopic{})); !reflect.DeepEqual(got, all) {
		t.Fatalf("v0 with an empty list: topics %v, want every topic %v", got, all)
	}
	for v := int16(1); v <= 3; v++ {
		if got := topicNames(do(v, []kmsg.MetadataRequestTopic{})); len(got) != 0 {
			t.Fatalf("v%d with an empty list: topics %v, want none", v, got)
		}
		if got := topicNames(do(v, nil)); !reflect.DeepEqual(got, all) {
			t.Fatalf("v%d with a null list: topics %v, want every topic %v", v, got, all)
		}
	}
	for v := int16(0); v <= 3; v++ {
		fresh := fmt.Sprintf("fresh-v%d", v)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fresh)
		bad := kmsg.NewMetadataRequestTopic()
		bad.Topic = kmsg.StringPtr("bad/name")
		resp := do(v, []kmsg.MetadataRequestTopic{rt, bad})
		want := []string{fmt.Sprintf("bad/name:%d", kerr.InvalidTopicException.Code), fresh}
		if got := topicNames(resp); !reflect.DeepEqual(got, want) {
			t.Fatalf("v%d listing an unknown topic: %v, want %v", v, got, want)
		}
		if _, ok := c.Nodes[1].View.Topic(fresh); !ok {
			t.Fatalf("v%d: %s not auto-created", v, fresh)
		}
		if v >= 1 && resp.ControllerID != c.File.Coordinator.NodeID {
			t.Fatalf("v%d: controller %d", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != c.File.ClusterID) {
			t.Fatalf("v%d: cluster id %v", v, resp.ClusterID)
		}
	}

	off := false
	noAuto := cluster.NewView(&cluster.File{ClusterID: "x", Coordinator: c.File.Coordinator, Leaders: c.File.Leaders,
		DefaultPartitions: 1, AutoCreateTopicsEnable: &off})
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(2)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("never")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	want := []string{fmt.Sprintf("never:%d", kerr.UnknownTopicOrPartition.Code)}
	if got := topicNames(noAuto.Metadata(req)); !reflect.DeepEqual(got, want) {
		t.Fatalf("v2 with auto.create.topics.enable off: %v, want %v", got, want)
	}
}

// Clients pinned to Kafka 0.10.2 load metadata: kgo sends Metadata v2 and
// sarama (Version V0_10_2_0) Metadata v2, and both learn the brokers and
// the partition leaders (before Metadata v0–v3, kgo failed locally with
// "broker is too old" and never loaded metadata).
func TestMetadataClientsPinnedTo0102(t *testing.T) {
	c := startMixed(t)
	want := withOffsetsTopic(expectedView(c.File, c.File.Topics, false), c.File)
	want.IDs[cluster.OffsetsTopic] = [16]byte{} // no topic ids before v10
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Nodes[1].Addr), kgo.MaxVersions(kversion.V0_10_2()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	raw, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatalf("kgo pinned to 0.10.2: %v", err)
	}
	resp := raw.(*kmsg.MetadataResponse)
	if resp.GetVersion() != 2 {
		t.Fatalf("kgo pinned to 0.10.2 used Metadata v%d, want v2", resp.GetVersion())
	}
	if got := summarize(t, resp); !reflect.DeepEqual(got, want) {
		t.Fatalf("kgo pinned to 0.10.2:\n got %+v\nwant %+v", got, want)
	}

	conf := sarama.NewConfig()
	conf.Version = sarama.V0_10_2_0
	conf.Metadata.AllowAutoTopicCreation = false
	sc, err := sarama.NewClient([]string{c.Nodes[2].Addr}, conf)
	if err != nil {
		t.Fatalf("sarama V0_10_2_0: %v", err)
	}
	defer sc.Close()
	for name, parts := range c.File.Topics {
		got, err := sc.Partitions(name)
		if err != nil || len(got) != int(parts) {
			t.Fatalf("sarama V0_10_2_0: %s partitions %v err %v, want %d", name, got, err, parts)
		}
		for p := int32(0); p < parts; p++ {
			b, err := sc.Leader(name, p)
			if err != nil {
				t.Fatal(err)
			}
			if w := want.Leaders[fmt.Sprintf("%s/%d", name, p)]; fmt.Sprint(b.ID()) != w {
				t.Fatalf("sarama V0_10_2_0: leader of %s/%d is %d, want %s", name, p, b.ID(), w)
			}
		}
	}
}
