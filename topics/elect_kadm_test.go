package topics_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/node"
)

// TestKadmElectAndReassign: ElectLeaders and the reassignment APIs
// answered as a cluster with one replica per partition answers them,
// through kadm and sarama's ClusterAdmin: nothing to elect
// (ELECTION_NOT_NEEDED; every partition: an empty answer), a reassignment
// to the current replica succeeds, another one is INVALID_REPLICA_ASSIGNMENT,
// a cancellation NO_REASSIGNMENT_IN_PROGRESS, and none is ever listed.
func TestKadmElectAndReassign(t *testing.T) {
	f, _, cl := startEmbedded(t, node.EmbeddedSpec{LeaderVersions: []string{"4.2", "4.2"}, Topics: map[string]int32{"el": 2}}, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	set := kadm.TopicsSet{}
	set.Add("el", 0, 1)
	set.Add("missing", 0)
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 1} {
		if r := res["el"][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("elect el/%d: %v, want ELECTION_NOT_NEEDED", p, r.Err)
		}
	}
	if r := res["missing"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("elect missing/0: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	if all, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, nil); err != nil || len(all) != 0 {
		t.Errorf("elect every partition: %v %+v, want an empty answer", err, all)
	}

	md, err := adm.Metadata(ctx, "el")
	if err != nil {
		t.Fatal(err)
	}
	leader := md.Topics["el"].Partitions[0].Leader
	leader1 := md.Topics["el"].Partitions[1].Leader
	other := int32(1)
	if leader1 == 1 {
		other = 2
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("el", 0, []int32{leader})
	req.Assign("el", 1, []int32{other, leader1})
	req.CancelAssign("missing", 0)
	alter, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := alter["el"][0]; r.Err != nil {
		t.Errorf("reassign el/0 to its replica: %v", r.Err)
	}
	if r := alter["el"][1]; !errors.Is(r.Err, kerr.InvalidReplicaAssignment) {
		t.Errorf("reassign el/1 to a new leader: %v, want INVALID_REPLICA_ASSIGNMENT", r.Err)
	}
	// A follower added behind the leader is recorded (no data moves).
	var follow kadm.AlterPartitionAssignmentsReq
	follow.Assign("el", 1, []int32{leader1, other})
	if res, err := adm.AlterPartitionAssignments(ctx, follow); err != nil || res["el"][1].Err != nil {
		t.Fatalf("reassign el/1 to its leader and a follower: %v %+v", err, res)
	}
	// A new client: kgo answers a Metadata request from its cache
	// for a moment.
	fresh, err := kgo.NewClient(kgo.SeedBrokers(f.Coordinator.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if md, err := kadm.NewClient(fresh).Metadata(ctx, "el"); err != nil || !slices.Equal(md.Topics["el"].Partitions[1].Replicas, []int32{leader1, other}) {
		t.Fatalf("el/1 after adding a follower: %v %+v, want replicas [%d %d]", err, md.Topics["el"].Partitions[1], leader1, other)
	}
	if r := alter["missing"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("cancel on a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign("el", 0)
	if c, err := adm.AlterPartitionAssignments(ctx, cancelReq); err != nil || !errors.Is(c["el"][0].Err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancel el/0: %v %+v, want NO_REASSIGNMENT_IN_PROGRESS", err, c)
	}
	listSet := kadm.TopicsSet{}
	listSet.Add("el", 0, 1)
	if l, err := adm.ListPartitionReassignments(ctx, listSet); err != nil || len(l) != 0 {
		t.Errorf("list reassignments: %v %+v, want none", err, l)
	}

	// sarama's ClusterAdmin, sent to whichever broker it picks.
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_9_0_0
	sa, err := sarama.NewClusterAdmin([]string{f.Coordinator.Addr}, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	elected, err := sa.ElectLeaders(sarama.PreferredElection, map[string][]int32{"el": {0}})
	if err != nil {
		t.Fatal(err)
	}
	if r := elected["el"][0]; r == nil || r.ErrorCode != sarama.ErrElectionNotNeeded {
		t.Errorf("sarama ElectLeaders el/0: %+v, want ELECTION_NOT_NEEDED", r)
	}
	status, err := sa.ListPartitionReassignments("el", []int32{0, 1})
	if err != nil || len(status["el"]) != 0 {
		t.Errorf("sarama ListPartitionReassignments: %v %+v, want none", err, status)
	}
	if err := sa.AlterPartitionReassignments("el", [][]int32{{leader}}); err != nil {
		t.Errorf("sarama AlterPartitionReassignments to the current replica: %v", err)
	}
}

// TestDescribeTopicPartitionsCursor: DescribeTopicPartitions pages every
// topic's partitions in name order with its cursor, answers unknown
// named topics UNKNOWN_TOPIC_OR_PARTITION, and reports each partition's
// one replica as leader and ISR, as Metadata does; ListConfigResources
// lists the topics and brokers.
func TestDescribeTopicPartitionsCursor(t *testing.T) {
	f, _, _ := startEmbedded(t, node.EmbeddedSpec{Topics: map[string]int32{"a": 3, "b": 2, "c": 4}, OffsetsPartitions: 2}, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Leaders[0].Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Every topic, two partitions a page.
	var pages []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for range 10 {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = 2, cursor
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		page := ""
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("topic %s: %v", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
			}
			for _, p := range rt.Partitions {
				if p.LeaderID != f.Leaders[0].NodeID && !rt.IsInternal || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.Replicas[0] != p.LeaderID {
					t.Fatalf("%s/%d: leader %d replicas %v isr %v", *rt.Topic, p.Partition, p.LeaderID, p.Replicas, p.ISR)
				}
				page += fmt.Sprintf("%s%d ", *rt.Topic, p.Partition)
			}
		}
		pages = append(pages, page)
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	got := strings.Join(pages, "|")
	want := "__consumer_offsets0 __consumer_offsets1 |a0 a1 |a2 b0 |b1 c0 |c1 c2 |c3 "
	if got != want {
		t.Fatalf("pages %q, want %q", got, want)
	}

	// Named topics, sorted, the unknown one answered.
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, n := range []string{"c", "missing", "b"} {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = n
		req.Topics = append(req.Topics, rt)
	}
	req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b", Partition: 1}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rt := range resp.Topics {
		out = append(out, fmt.Sprintf("%s:%d:%d", *rt.Topic, rt.ErrorCode, len(rt.Partitions)))
	}
	if got, want := strings.Join(out, " "), fmt.Sprintf("b:0:1 c:0:4 missing:%d:0", kerr.UnknownTopicOrPartition.Code); got != want {
		t.Fatalf("named topics from cursor b/1: %s, want %s", got, want)
	}

	// ListConfigResources: every topic and every broker, by type.
	lreq := kmsg.NewPtrListConfigResourcesRequest()
	lreq.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeTopic), int8(kmsg.ConfigResourceTypeBroker)}
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil || lresp.ErrorCode != 0 {
		t.Fatalf("ListConfigResources: %v %+v", err, lresp)
	}
	var listed []string
	for _, r := range lresp.ConfigResources {
		listed = append(listed, fmt.Sprintf("%d:%s", r.Type, r.Name))
	}
	if got, want := strings.Join(listed, " "), "2:__consumer_offsets 2:a 2:b 2:c 4:0 4:1"; got != want {
		t.Fatalf("ListConfigResources: %s, want %s", got, want)
	}
	lreq.ResourceTypes = []int8{99}
	if lresp, err := lreq.RequestWith(ctx, cl); err != nil || lresp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ListConfigResources of type 99: %v %+v, want UNSUPPORTED_VERSION", err, lresp)
	}
}
