package integration

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// TestEveryNodeAdvertisesTheClusterAPIs: KafkaJS gives every broker the
// ApiVersions table of the first broker it met, so the coordinator must
// advertise Produce and the leaders EndTxn, as every Kafka broker does; a
// request at the wrong node is redirected with the error Kafka uses.
func TestEveryNodeAdvertisesTheClusterAPIs(t *testing.T) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.2"}, Topics: map[string]int32{"orders": 2}})
	ctx := testCtx(t, 20*time.Second)
	keysOf := func(addr string) (map[int16]bool, *wire.Client) {
		cl, err := wire.Dial(ctx, addr, "apis-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		av, err := cl.ApiVersions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[int16]bool{}
		for _, k := range av.ApiKeys {
			keys[k.ApiKey] = true
		}
		return keys, cl
	}
	coordKeys, coord := keysOf(c.File.Coordinator.Addr)
	for _, l := range c.File.Leaders {
		leaderKeys, leader := keysOf(l.Addr)
		if !maps.Equal(coordKeys, leaderKeys) {
			t.Fatalf("coordinator advertises %v, leader %d %v", slices.Sorted(maps.Keys(coordKeys)), l.NodeID, slices.Sorted(maps.Keys(leaderKeys)))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.SetVersion(4)
		end.TransactionalID = "x"
		resp, err := leader.Do(ctx, end)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.EndTxnResponse).ErrorCode; code != kerr.NotCoordinator.Code {
			t.Fatalf("EndTxn at leader %d: %d, want NOT_COORDINATOR", l.NodeID, code)
		}
	}
	for _, key := range []int16{0, 1, 2, 22, 24, 25, 26, 27, 61, 65, 66} {
		if !coordKeys[key] {
			t.Fatalf("key %d (%s) not advertised", key, kmsg.NameForKey(key))
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks, produce.TimeoutMillis = -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 0
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	resp, err := coord.Do(ctx, produce)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("Produce at the coordinator: %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
}
