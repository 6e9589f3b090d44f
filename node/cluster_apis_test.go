package node

import (
	"context"
	"github.com/txncoord/txncoord/authmeta"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/wire"
)

// DescribeCluster at every node and every version: the cluster id, every
// node with its address, the coordinator node as controller, endpoint
// type BROKER (a CONTROLLER request is MISMATCHED_ENDPOINT_TYPE, an
// unknown type UNSUPPORTED_ENDPOINT_TYPE); the coordinator node, which
// leads none of orders' partitions (the rule places them on the leaders),
// answers DescribeLogDirs with its one dir and no topics, and DeleteRecords
// and OffsetForLeaderEpoch NOT_LEADER_OR_FOLLOWER per partition of orders
// (so clients go to the partition's leader).
func TestClusterAPIsEveryNode(t *testing.T) {
	f, _ := startTwoLeaders(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := append([]string{f.Coordinator.Addr}, f.Leaders[0].Addr, f.Leaders[1].Addr)
	for _, addr := range nodes {
		cl, err := wire.Dial(ctx, addr, "cluster-apis-test")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for v := int16(0); v <= 2; v++ {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.SetVersion(v)
			req.IncludeClusterAuthorizedOperations = true
			raw, err := cl.Do(ctx, req)
			if err != nil {
				t.Fatalf("%s: DescribeCluster v%d: %v", addr, v, err)
			}
			resp := raw.(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != 0 || resp.ClusterID != f.ClusterID || resp.ControllerID != f.Coordinator.NodeID || len(resp.Brokers) != 3 {
				t.Fatalf("%s: DescribeCluster v%d: %+v", addr, v, resp)
			}
			if v >= 1 && resp.EndpointType != 1 {
				t.Fatalf("%s: DescribeCluster v%d: endpoint type %d, want 1 (BROKER)", addr, v, resp.EndpointType)
			}
			if resp.ClusterAuthorizedOperations <= 0 {
				t.Fatalf("%s: cluster authorized operations %d without security, want every cluster operation", addr, resp.ClusterAuthorizedOperations)
			}
			for i, b := range resp.Brokers {
				want := []string{f.Coordinator.Addr, f.Leaders[0].Addr, f.Leaders[1].Addr}[i]
				if got := b.Host + ":" + itoa(b.Port); got != want || b.IsFenced {
					t.Fatalf("%s: broker %d at %s (fenced %v), want %s", addr, b.NodeID, got, b.IsFenced, want)
				}
			}
		}
		for typ, code := range map[int8]int16{2: kerr.MismatchedEndpointType.Code, 7: kerr.UnsupportedEndpointType.Code} {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.SetVersion(1)
			req.EndpointType = typ
			raw, err := cl.Do(ctx, req)
			if err != nil || raw.(*kmsg.DescribeClusterResponse).ErrorCode != code {
				t.Fatalf("%s: DescribeCluster endpoint type %d: %v %+v, want error %d", addr, typ, err, raw, code)
			}
		}
	}

	coord, err := wire.Dial(ctx, f.Coordinator.Addr, "cluster-apis-test")
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	logDirs := kmsg.NewPtrDescribeLogDirsRequest()
	logDirs.SetVersion(4)
	raw, err := coord.Do(ctx, logDirs)
	if dirs := raw.(*kmsg.DescribeLogDirsResponse).Dirs; err != nil || raw.(*kmsg.DescribeLogDirsResponse).ErrorCode != 0 || len(dirs) != 1 || len(dirs[0].Topics) != 0 {
		t.Fatalf("DescribeLogDirs at the coordinator node: %v %+v", err, raw)
	}
	del := kmsg.NewPtrDeleteRecordsRequest()
	del.SetVersion(2)
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "orders"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Offset = 0
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	raw, err = coord.Do(ctx, del)
	if err != nil || raw.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("DeleteRecords at the coordinator node: %v %+v", err, raw)
	}
	ofle := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofle.SetVersion(4)
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "orders"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ot.Partitions = append(ot.Partitions, op)
	ofle.Topics = append(ofle.Topics, ot)
	raw, err = coord.Do(ctx, ofle)
	if err != nil || raw.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("OffsetForLeaderEpoch at the coordinator node: %v %+v", err, raw)
	}
}

func itoa(n int32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestAdvertisedAPIsAreDeclared: every node of `up` advertises the same
// ApiVersions table (KafkaJS takes one broker's for all), and its keys are
// exactly the components' declared APIs (coordinator, leader, group
// coordinator, controller) and the keys every node serves itself, within
// the 4.2 profile; each declared key at its declared range capped by the
// profile. A handler registered outside its component's list, or a list
// entry no node registers, fails it.
func TestAdvertisedAPIsAreDeclared(t *testing.T) {
	f, _ := startTwoLeaders(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	profile := kversion.V4_2_0()
	want := map[int16][2]int16{}
	declare := func(owner string, ranges map[int16][2]int16) {
		for key, r := range ranges {
			pmax, ok := profile.LookupMaxKeyVersion(key)
			if !ok || min(r[1], pmax) < r[0] {
				continue
			}
			r[1] = min(r[1], pmax)
			if was, dup := want[key]; dup && was != r {
				t.Errorf("%s declares %s at v%d-v%d, another component at v%d-v%d", owner, kmsg.NameForKey(key), r[0], r[1], was[0], was[1])
			}
			want[key] = r
		}
	}
	declare("coordinator", coordinator.Declared().Ranges())
	declare("leaderstub", leaderstub.Declared().Ranges())
	declare("groups", groups.Declared().Ranges())
	declare("topics", topics.Declared().Ranges())
	declare("authmeta", authmeta.Declared().Ranges())
	// A client other than librdkafka is shown Produce from v3, the
	// versions the server accepts (wire/refused.go).
	if r, ok := want[0]; ok {
		want[0] = [2]int16{max(r[0], 3), r[1]}
	}
	// Served by every node itself: ApiVersions, Metadata, FindCoordinator,
	// DescribeConfigs, DescribeCluster, DescribeTopicPartitions,
	// ListConfigResources, and DescribeLogDirs on a node without
	// partitions.
	nodeWide := map[int16]bool{18: true, 3: true, 10: true, 32: true, 60: true, 35: true, 74: true, 75: true}

	var first map[int16][2]int16
	for _, n := range append([]cluster.Node{*f.Coordinator}, f.Leaders...) {
		cl, err := wire.Dial(ctx, n.Addr, "advertised-apis-test")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := cl.Do(ctx, kmsg.NewPtrApiVersionsRequest())
		cl.Close()
		if err != nil {
			t.Fatalf("node %d: ApiVersions: %v", n.NodeID, err)
		}
		got := map[int16][2]int16{}
		for _, k := range raw.(*kmsg.ApiVersionsResponse).ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		for key, r := range got {
			if w, ok := want[key]; ok && w != r {
				t.Errorf("node %d advertises %s at v%d-v%d, declared v%d-v%d", n.NodeID, kmsg.NameForKey(key), r[0], r[1], w[0], w[1])
			} else if !ok && !nodeWide[key] {
				t.Errorf("node %d advertises %s (key %d), which no component declares", n.NodeID, kmsg.NameForKey(key), key)
			}
		}
		for key := range want {
			if _, ok := got[key]; !ok {
				t.Errorf("node %d does not advertise the declared %s (key %d)", n.NodeID, kmsg.NameForKey(key), key)
			}
		}
		for key := range nodeWide {
			if _, ok := got[key]; !ok {
				t.Errorf("node %d does not advertise %s (key %d), which every node serves", n.NodeID, kmsg.NameForKey(key), key)
			}
		}
		if first == nil {
			first = got
		} else if !maps.Equal(first, got) {
			t.Errorf("node %d advertises %v, the coordinator node %v", n.NodeID, got, first)
		}
	}
}
