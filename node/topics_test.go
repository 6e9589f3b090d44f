package node

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// metadataAt asks one node for topic's Metadata: its error code and
// partition count.
func metadataAt(t *testing.T, addr, topic string) (int16, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := wire.Dial(ctx, addr, "topics-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	mt := resp.(*kmsg.MetadataResponse).Topics[0]
	return mt.ErrorCode, len(mt.Partitions)
}

// everyNode checks every node's Metadata for topic at once: in `txncoord
// up` the nodes share one view.
func everyNode(t *testing.T, f *cluster.File, topic string, code int16, partitions int) {
	t.Helper()
	for _, n := range append([]cluster.Node{*f.Coordinator}, f.Leaders...) {
		if c, p := metadataAt(t, n.Addr, topic); c != code || p != partitions {
			t.Fatalf("node %d: %s has error %d and %d partitions, want %d and %d", n.NodeID, topic, c, p, code, partitions)
		}
	}
}

func heldAnywhere(e *Embedded, topic string) bool {
	for _, l := range e.Leaders {
		if _, ok := l.Leader.HeldTopics()[topic]; ok {
			return true
		}
	}
	return false
}

// kadm against `txncoord up`: create with configs, list, create
// partitions, produce, delete (every node's Metadata at once, the leaders'
// data gone), and a restart keeps created topics, their configs and
// deletions.
func TestTopicsKadmEmbedded(t *testing.T) {
	dir := t.TempDir()
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.DefaultProduceTopic("t1"))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)

	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("60000")}, "t1")
	if err != nil || created.Err != nil || created.NumPartitions != 3 || created.ID == [16]byte{} {
		t.Fatalf("create t1: %+v, %v", created, err)
	}
	if again, _ := adm.CreateTopic(ctx, 3, 1, nil, "t1"); again.Err != kerr.TopicAlreadyExists {
		t.Fatalf("create t1 again: %v", again.Err)
	}
	if bad, _ := adm.CreateTopic(ctx, 1, 4, nil, "rf4"); bad.Err != kerr.InvalidReplicationFactor {
		t.Fatalf("replication factor 4 with 3 brokers: %v", bad.Err)
	}
	if rf2, _ := adm.CreateTopic(ctx, 1, 2, nil, "rf2"); rf2.Err != nil || rf2.ReplicationFactor != 2 {
		t.Fatalf("replication factor 2 with 3 brokers: %v, answered %d (the replicas Metadata reports)", rf2.Err, rf2.ReplicationFactor)
	}
	everyNode(t, f, "t1", 0, 3)
	if got := e.View.TopicConfigs("t1")["retention.ms"]; got != "60000" {
		t.Fatalf("t1's retention.ms in the view: %q", got)
	}
	details, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := details["t1"]; d.Err != nil || len(d.Partitions) != 3 || d.ID != created.ID || d.Partitions[0].Replicas[0] != d.Partitions[0].Leader {
		t.Fatalf("list t1: %+v", d)
	}
	grown, err := adm.CreatePartitions(ctx, 2, "t1")
	if err != nil || grown["t1"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, grown)
	}
	everyNode(t, f, "t1", 0, 5)
	if shrunk, _ := adm.UpdatePartitions(ctx, 4, "t1"); shrunk["t1"].Err != kerr.InvalidPartitions {
		t.Fatalf("decrease to 4: %v", shrunk["t1"].Err)
	}

	for p := range int32(5) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if !heldAnywhere(e, "t1") {
		t.Fatal("no leader holds t1 after producing")
	}
	deleted, err := adm.DeleteTopics(ctx, "t1")
	if err != nil || deleted["t1"].Err != nil {
		t.Fatalf("delete t1: %v %v", err, deleted)
	}
	everyNode(t, f, "t1", kerr.UnknownTopicOrPartition.Code, 0)
	if heldAnywhere(e, "t1") {
		t.Fatal("a leader still holds t1's data after the delete")
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": kmsg.StringPtr("4096")}, "t2"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	stopWithin(t, e.Stop)

	// On the same addresses (the cluster file's).
	e, err = StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, e.Stop)
	everyNode(t, f, "t2", 0, 1)
	everyNode(t, f, "t1", kerr.UnknownTopicOrPartition.Code, 0)
	if got := e.View.TopicConfigs("t2")["max.message.bytes"]; got != "4096" {
		t.Fatalf("t2's max.message.bytes after a restart: %q", got)
	}
}

// sarama's ClusterAdmin against `txncoord up`.
func TestTopicsSaramaEmbedded(t *testing.T) {
	f, e := startTwoLeaders(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin([]string{e.Bootstrap()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	retention := "1000"
	if err := adm.CreateTopic("s1", &sarama.TopicDetail{NumPartitions: 4, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTopic("s1", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err == nil {
		t.Fatal("creating s1 twice succeeded")
	}
	// (ClusterAdmin.ListTopics also asks DescribeConfigs: not here.)
	if meta, err := adm.DescribeTopics([]string{"s1"}); err != nil || len(meta) != 1 || len(meta[0].Partitions) != 4 {
		t.Fatalf("describe s1: %v %+v", err, meta)
	}
	if err := adm.CreatePartitions("s1", 6, nil, false); err != nil {
		t.Fatal(err)
	}
	meta, err := adm.DescribeTopics([]string{"s1"})
	if err != nil || len(meta) != 1 || len(meta[0].Partitions) != 6 {
		t.Fatalf("describe s1: %v %+v", err, meta)
	}
	if err := adm.DeleteTopic("s1"); err != nil {
		t.Fatal(err)
	}
	everyNode(t, f, "s1", kerr.UnknownTopicOrPartition.Code, 0)
}
