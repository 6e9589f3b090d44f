package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DescribeCluster at every node and every version: the cluster id, every
// node with its address, the coordinator node as controller, endpoint
// type BROKER (a CONTROLLER request is MISMATCHED_ENDPOINT_TYPE, an
// unknown type UNSUPPORTED_ENDPOINT_TYPE); the coordinator node, which
// leads no partitions, answers DescribeLogDirs with no dirs and
// DeleteRecords and OffsetForLeaderEpoch NOT_LEADER_OR_FOLLOWER per
// partition (so clients go to the partition's leader).
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
	if err != nil || raw.(*kmsg.DescribeLogDirsResponse).ErrorCode != 0 || len(raw.(*kmsg.DescribeLogDirsResponse).Dirs) != 0 {
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
