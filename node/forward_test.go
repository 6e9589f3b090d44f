package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// The controller's requests sent to a leader of `txncoord up` are
// forwarded to the coordinator node and answered as it answers them
// (KIP-590's forwarding): create with a config, alter it, grow, delete,
// each visible in every node's Metadata when the answer arrives; every
// node answers DescribeConfigs, a leader for its own broker id too.
func TestControllerRequestsAtALeader(t *testing.T) {
	f, _ := startTwoLeaders(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(addr string) *wire.Client {
		t.Helper()
		cl, err := wire.Dial(ctx, addr, "forward-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	l1, l2 := dial(f.Leaders[0].Addr), dial(f.Leaders[1].Addr)
	do := func(cl *wire.Client, req kmsg.Request) kmsg.Response { t.Helper(); return mustDo(ctx, t, cl, req) }

	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fwd", 3, 1
	cc := kmsg.NewCreateTopicsRequestTopicConfig()
	cc.Name, cc.Value = "retention.ms", kmsg.StringPtr("60000")
	ct.Configs = append(ct.Configs, cc)
	create.Topics = append(create.Topics, ct)
	if rt := do(l1, create).(*kmsg.CreateTopicsResponse).Topics[0]; rt.ErrorCode != 0 || rt.NumPartitions != 3 || rt.TopicID == [16]byte{} || len(rt.Configs) == 0 {
		t.Fatalf("CreateTopics v7 at leader 1: %+v", rt)
	}
	everyNode(t, f, "fwd", 0, 3)
	if again := do(l2, create).(*kmsg.CreateTopicsResponse).Topics[0]; again.ErrorCode != 36 { // TOPIC_ALREADY_EXISTS
		t.Fatalf("CreateTopics again at leader 2: %+v", again)
	}

	describe := func(cl *wire.Client, typ kmsg.ConfigResourceType, name, config string) kmsg.DescribeConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = typ, name, []string{config}
		req.Resources = append(req.Resources, rr)
		return do(cl, req).(*kmsg.DescribeConfigsResponse).Resources[0]
	}
	value := func(r kmsg.DescribeConfigsResponseResource) (string, kmsg.ConfigSource) {
		if r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Value == nil {
			t.Fatalf("DescribeConfigs: %+v", r)
		}
		return *r.Configs[0].Value, r.Configs[0].Source
	}
	if v, src := value(describe(l2, kmsg.ConfigResourceTypeTopic, "fwd", "retention.ms")); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms of fwd at leader 2: %s from %v", v, src)
	}
	if v, _ := value(describe(l2, kmsg.ConfigResourceTypeBroker, "2", "broker.id")); v != "2" {
		t.Fatalf("broker.id at leader 2: %s", v)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.SetVersion(1)
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value, ac.Op = "max.message.bytes", kmsg.StringPtr("4096"), kmsg.IncrementalAlterConfigOpSet
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)
	if r := do(l2, alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs at leader 2: %+v", r)
	}
	if v, _ := value(describe(l1, kmsg.ConfigResourceTypeTopic, "fwd", "max.message.bytes")); v != "4096" {
		t.Fatalf("max.message.bytes of fwd at leader 1 after the alter: %s", v)
	}

	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.SetVersion(3)
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "fwd", 5
	grow.Topics = append(grow.Topics, gt)
	if r := do(l1, grow).(*kmsg.CreatePartitionsResponse).Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("CreatePartitions at leader 1: %+v", r)
	}
	everyNode(t, f, "fwd", 0, 5)

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("fwd")
	del.Topics = append(del.Topics, dt)
	if r := do(l2, del).(*kmsg.DeleteTopicsResponse).Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("DeleteTopics v6 at leader 2: %+v", r)
	}
	everyNode(t, f, "fwd", 3, 0) // UNKNOWN_TOPIC_OR_PARTITION
}
