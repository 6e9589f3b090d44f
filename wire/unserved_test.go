package wire_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// A request for an API the node does not serve (not advertised) is
// answered UNSUPPORTED_VERSION, which clients treat as final, on a
// connection that stays open, instead of closed (clients then reconnect
// and retry in a silent loop); the first request of each API on a
// connection is one info line naming the API.
func TestUnservedAPIAnsweredUnsupportedVersion(t *testing.T) {
	var logs logBuffer
	node := startRawNode(t, &logs)
	c := dialRaw(t, node.Addr)

	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(5)
	join.Group, join.ProtocolType, join.SessionTimeoutMillis = "g", "consumer", 10000
	for corr := int32(1); corr <= 2; corr++ {
		resp := c.roundTrip(join, corr).(*kmsg.JoinGroupResponse)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("JoinGroup: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(4)
	for _, name := range []string{"a", "b"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		create.Topics = append(create.Topics, rt)
	}
	cresp := c.roundTrip(create, 3).(*kmsg.CreateTopicsResponse)
	if len(cresp.Topics) != 2 || cresp.Topics[0].Topic != "a" || cresp.Topics[1].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("CreateTopics: %+v, want each topic answered UNSUPPORTED_VERSION", cresp.Topics)
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(3)
	describe.Groups = []string{"g1"}
	if d := c.roundTrip(describe, 4).(*kmsg.DescribeGroupsResponse); len(d.Groups) != 1 || d.Groups[0].Group != "g1" ||
		d.Groups[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("DescribeGroups: %+v", d.Groups)
	}
	// A known but unregistered partition API gets it per partition.
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks = 1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
	produce.Topics = append(produce.Topics, pt)
	if p := c.roundTrip(produce, 5).(*kmsg.ProduceResponse); p.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("Produce: %+v", p.Topics)
	}
	// Still open, and served as before.
	c.roundTrip(apiVersionsReq(3), 6)

	for api, want := range map[string]int{"JoinGroup": 1, "CreateTopics": 1, "DescribeGroups": 1, "Produce": 1} {
		got := logs.lines(map[string]any{"api": api, "level": "info", "remote": c.local()})
		if len(got) != want {
			t.Fatalf("%d info lines for %s, want %d (one per connection):\n%v", len(got), api, want, logs.String())
		}
	}
	// A second connection logs again.
	c2 := dialRaw(t, node.Addr)
	c2.roundTrip(join, 1)
	logs.waitLog(t, map[string]any{"api": "JoinGroup", "remote": c2.local()})
}

// A real client fails at once, with an error naming the API, for an API no
// node serves: kadm's DescribeACLs (kgo refuses unadvertised keys itself)
// and DescribeACLs sent as clients that do not check ApiVersions send it
// gets the server's UNSUPPORTED_VERSION.
func TestUnservedAPIRealClient(t *testing.T) {
	var logs logBuffer
	node := startRawNode(t, &logs)
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListPartitionReassignments(ctx, kadm.TopicsSet{"orders": {0: {}}})
	t.Logf("kadm ListPartitionReassignments: %v", err)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "ListPartitionReassignments") && !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("kadm ListPartitionReassignments: %v (ctx %v), want a fast error naming the API", err, ctx.Err())
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.SetVersion(1)
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	c := dialRaw(t, node.Addr)
	if resp := c.roundTrip(req, 1).(*kmsg.DescribeACLsResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("DescribeACLs: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestUnservedOffsetFetch: a node that is not the group coordinator
// answers OffsetFetch with the error at the level each version reads it,
// and never an offset: v0/v1 per requested partition (offset -1), v2-v7
// at the top, v8+ per group.
func TestUnservedOffsetFetch(t *testing.T) {
	code := kerr.NotCoordinator.Code
	for _, v := range []int16{0, 1, 5, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		if v < 8 {
			req.Group = "g"
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{3, 7}
			req.Topics = append(req.Topics, rt)
		} else {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "g"
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = "t", []int32{3, 7}
			rg.Topics = append(rg.Topics, rt)
			req.Groups = append(req.Groups, rg)
		}
		resp := wire.UnservedResponse(req, code).(*kmsg.OffsetFetchResponse)
		switch {
		case v >= 8:
			if len(resp.Groups) != 1 || resp.Groups[0].Group != "g" || resp.Groups[0].ErrorCode != code || len(resp.Groups[0].Topics) != 0 {
				t.Errorf("v%d: %+v, want group g with NOT_COORDINATOR and no topics", v, resp.Groups)
			}
		case v >= 2:
			if resp.ErrorCode != code || len(resp.Topics) != 0 {
				t.Errorf("v%d: error %d, topics %+v; want the top-level NOT_COORDINATOR and no topics", v, resp.ErrorCode, resp.Topics)
			}
		default:
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
				t.Fatalf("v%d: topics %+v, want t with partitions 3 and 7", v, resp.Topics)
			}
			for i, p := range resp.Topics[0].Partitions {
				if p.Partition != []int32{3, 7}[i] || p.Offset != -1 || p.ErrorCode != code {
					t.Errorf("v%d: partition %+v, want %d at offset -1 with NOT_COORDINATOR", v, p, []int32{3, 7}[i])
				}
			}
		}
	}
}

// TestUnservedMirrorsPartitionNumbers: a request whose partitions are a
// list of numbers is answered one entry per number, with the number, the
// error and kmsg's defaults elsewhere (Lag -1).
func TestUnservedMirrorsPartitionNumbers(t *testing.T) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.SetVersion(1)
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = "g"
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = "t", []int32{2, 5}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp := wire.UnservedResponse(req, kerr.NotCoordinator.Code).(*kmsg.DescribeShareGroupOffsetsResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].GroupID != "g" || len(resp.Groups[0].Topics) != 1 {
		t.Fatalf("answered %+v", resp)
	}
	ps := resp.Groups[0].Topics[0].Partitions
	if len(ps) != 2 {
		t.Fatalf("partitions %+v, want 2 and 5", ps)
	}
	for i, p := range ps {
		if p.Partition != []int32{2, 5}[i] || p.ErrorCode != kerr.NotCoordinator.Code || p.Lag != -1 {
			t.Errorf("partition %+v, want %d with NOT_COORDINATOR and lag -1", p, []int32{2, 5}[i])
		}
	}
}
