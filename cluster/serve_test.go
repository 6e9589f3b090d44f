package cluster_test

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

const ioTimeout = 10 * time.Second

func startMixed(t *testing.T) *clustertest.Cluster {
	return clustertest.Start(t, clustertest.Options{
		LeaderVersions: []string{"4.2", "4.1", "4.2"},
		Topics:         map[string]int32{"orders": 6, "payments": 2},
	})
}

// metadataView is what a client learns from Metadata, in a comparable form.
type metadataView struct {
	ClusterID  string
	Controller int32
	Brokers    []string          // "id@host:port"
	Leaders    map[string]string // "topic/p" → "leader"
	IDs        map[string][16]byte
}

func summarize(t *testing.T, resp *kmsg.MetadataResponse) metadataView {
	t.Helper()
	m := metadataView{Controller: resp.ControllerID, Leaders: map[string]string{}, IDs: map[string][16]byte{}}
	if resp.ClusterID != nil {
		m.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		m.Brokers = append(m.Brokers, fmt.Sprintf("%d@%s", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))))
	}
	sort.Strings(m.Brokers)
	for _, tp := range resp.Topics {
		if tp.ErrorCode != 0 || tp.Topic == nil {
			t.Fatalf("topic %v: error %d", tp.Topic, tp.ErrorCode)
		}
		m.IDs[*tp.Topic] = tp.TopicID
		for _, p := range tp.Partitions {
			m.Leaders[fmt.Sprintf("%s/%d", *tp.Topic, p.Partition)] = strconv.Itoa(int(p.Leader))
		}
	}
	return m
}

// expectedView is computed from the file alone: brokers, the leader
// formula, and topic ids.
func expectedView(f *cluster.File, topics map[string]int32, withIDs bool) metadataView {
	m := metadataView{ClusterID: f.ClusterID, Controller: f.Coordinator.NodeID, Leaders: map[string]string{}, IDs: map[string][16]byte{}}
	for _, n := range append([]cluster.Node{*f.Coordinator}, f.Leaders...) {
		m.Brokers = append(m.Brokers, fmt.Sprintf("%d@%s", n.NodeID, n.Addr))
	}
	sort.Strings(m.Brokers)
	for name, parts := range topics {
		if withIDs {
			m.IDs[name] = cluster.TopicID(f.ClusterID, name)
		} else {
			m.IDs[name] = [16]byte{}
		}
		for p := int32(0); p < parts; p++ {
			m.Leaders[fmt.Sprintf("%s/%d", name, p)] = strconv.Itoa(int(f.Leaders[cluster.LeaderIndex(name, p, len(f.Leaders))].NodeID))
		}
	}
	return m
}

// withOffsetsTopic adds what a request for all topics also lists:
// __consumer_offsets, every partition on the coordinator.
func withOffsetsTopic(m metadataView, f *cluster.File) metadataView {
	m.IDs[cluster.OffsetsTopic] = cluster.TopicID(f.ClusterID, cluster.OffsetsTopic)
	for p := int32(0); p < cluster.DefaultOffsetsPartitions; p++ {
		m.Leaders[fmt.Sprintf("%s/%d", cluster.OffsetsTopic, p)] = strconv.Itoa(int(f.Coordinator.NodeID))
	}
	return m
}

// A real kgo client asking each node (a 4.2 coordinator and 4.2 / 4.1
// leaders, each with its own View of the same file) learns the same
// brokers, topics, partition leaders and topic ids, and they are the ones
// the file defines.
func TestMetadataIdenticalFromEveryNodeKgo(t *testing.T) {
	c := startMixed(t)
	want := withOffsetsTopic(expectedView(c.File, c.File.Topics, true), c.File)
	for _, node := range c.Nodes {
		t.Run(fmt.Sprintf("node%d-%s", node.NodeID, node.KafkaVersion), func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			raw, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
			if err != nil {
				t.Fatal(err)
			}
			resp := raw.(*kmsg.MetadataResponse)
			if resp.GetVersion() < 12 {
				t.Fatalf("kgo used Metadata v%d, expected v12+", resp.GetVersion())
			}
			if got := summarize(t, resp); !reflect.DeepEqual(got, want) {
				t.Fatalf("node %d metadata:\n got %+v\nwant %+v", node.NodeID, got, want)
			}
			// kgo's routing view: it can reach every broker it learned.
			for _, n := range c.Nodes {
				if _, err := cl.Broker(int(n.NodeID)).Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
					t.Fatalf("broker %d from node %d's metadata: %v", n.NodeID, node.NodeID, err)
				}
			}
		})
	}
}

// Metadata v4 and v6 (non-flexible, what KafkaJS sends): listed topics,
// one auto-created; a second node auto-creates the identical topic.
func TestMetadataKafkaJSVersions(t *testing.T) {
	c := startMixed(t)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for i, v := range []int16{4, 6} {
		fresh := fmt.Sprintf("fresh-%d", v)
		topics := map[string]int32{"orders": 6, fresh: c.File.DefaultPartitions}
		want := expectedView(c.File, topics, false) // no topic ids before v10
		for _, node := range []clustertest.Node{c.Nodes[1+i], c.Nodes[2+i]} {
			cl, err := wire.Dial(ctx, node.Addr, "kafkajs")
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			req.AllowAutoTopicCreation = true
			for _, name := range []string{"orders", fresh} {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			raw, err := cl.Do(ctx, req)
			cl.Close()
			if err != nil {
				t.Fatalf("Metadata v%d from node %d: %v", v, node.NodeID, err)
			}
			if got := summarize(t, raw.(*kmsg.MetadataResponse)); !reflect.DeepEqual(got, want) {
				t.Fatalf("Metadata v%d from node %d:\n got %+v\nwant %+v", v, node.NodeID, got, want)
			}
		}
	}
}

// FindCoordinator v0–v6 on any node: transaction keys → the coordinator
// node; group keys → COORDINATOR_NOT_AVAILABLE (no group coordinator).
func TestFindCoordinatorEveryVersion(t *testing.T) {
	c := startMixed(t)
	coord := c.Coordinator()
	host, port, _ := net.SplitHostPort(coord.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	cl, err := wire.Dial(ctx, c.Nodes[2].Addr, "find-coordinator-test") // a 4.1 leader
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type answer struct {
		node int32
		host string
		port string
		code int16
	}
	ask := func(v int16, keyType int8) []answer {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorType = keyType
		req.CoordinatorKey = "txn-a"
		req.CoordinatorKeys = []string{"txn-a", "txn-b"}
		raw, err := cl.Do(ctx, req)
		if err != nil {
			t.Fatalf("FindCoordinator v%d: %v", v, err)
		}
		resp := raw.(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			return []answer{{resp.NodeID, resp.Host, strconv.Itoa(int(resp.Port)), resp.ErrorCode}}
		}
		var out []answer
		for _, co := range resp.Coordinators {
			out = append(out, answer{co.NodeID, co.Host, strconv.Itoa(int(co.Port)), co.ErrorCode})
		}
		return out
	}
	txn := answer{coord.NodeID, host, port, 0}
	group := txn // the coordinator node also runs the group coordinator
	for v := int16(0); v <= 6; v++ {
		n := 1
		if v >= 4 {
			n = 2 // batched keys
		}
		if v > 0 { // v0 has no key type: always a group key
			if got := ask(v, 1); !reflect.DeepEqual(got, repeat(txn, n)) {
				t.Fatalf("v%d transaction key: %+v, want %+v", v, got, txn)
			}
		}
		if got := ask(v, 0); !reflect.DeepEqual(got, repeat(group, n)) {
			t.Fatalf("v%d group key: %+v, want %+v", v, got, group)
		}
	}
}

func repeat[T any](x T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = x
	}
	return out
}
