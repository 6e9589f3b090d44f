package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// leaderMetadata asks one node for topic: its error code and partitions.
func leaderMetadata(ctx context.Context, t *testing.T, addr, topic string) (int16, int) {
	t.Helper()
	cl, err := wire.Dial(ctx, addr, "topics-test")
	if err != nil {
		return -1, 0
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Do(ctx, req)
	if err != nil {
		return -1, 0
	}
	mt := resp.(*kmsg.MetadataResponse).Topics[0]
	return mt.ErrorCode, len(mt.Partitions)
}

// waitEveryLeader polls each leader until its Metadata shows topic with
// code and partitions, and logs how long each took after since.
func waitEveryLeader(ctx context.Context, t *testing.T, pc *procCluster, topic string, code int16, partitions int, since time.Time) {
	t.Helper()
	for _, l := range pc.file.Leaders {
		for {
			c, p := leaderMetadata(ctx, t, l.Addr, topic)
			if c == code && p == partitions {
				t.Logf("leader %d shows %s (error %d, %d partitions) %v after the answer", l.NodeID, topic, code, partitions, time.Since(since).Round(time.Millisecond))
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("leader %d: %s has error %d and %d partitions, want %d and %d", l.NodeID, topic, c, p, code, partitions)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Separate processes: a topic created at the controller (the coordinator
// process) reaches every leader process, takes records produced through a
// leader, and leaves every leader when deleted, its data with it (created
// again, it starts empty); a leader that was down while a topic it holds
// was deleted drops that data at its restart.
func TestTopicsSeparateProcesses(t *testing.T) {
	pc := startProcCluster(t, "4.2", []string{"4.2", "4.2"}, map[string]int32{"orders": 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := pc.admin()

	created, err := adm.CreateTopic(ctx, 4, 1, nil, "fresh")
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	waitEveryLeader(ctx, t, pc, "fresh", 0, 4, time.Now())

	// Produce through a leader: the client knows only leader 1.
	produce := func(topic string, n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(pc.file.Leaders[0].Addr), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("fresh", 8)
	if got := endOffsets(ctx, adm, "fresh"); got != 8 {
		t.Fatalf("end offsets of fresh: %d, want 8", got)
	}

	deleted, err := adm.DeleteTopics(ctx, "fresh")
	if err != nil || deleted["fresh"].Err != nil {
		t.Fatalf("delete: %v %v", err, deleted)
	}
	waitEveryLeader(ctx, t, pc, "fresh", kerr.UnknownTopicOrPartition.Code, 0, time.Now())
	again, err := adm.CreateTopic(ctx, 4, 1, nil, "fresh")
	if err != nil || again.Err != nil || again.ID == created.ID {
		t.Fatalf("create again: %v %v, id %x (was %x)", err, again.Err, again.ID, created.ID)
	}
	waitEveryLeader(ctx, t, pc, "fresh", 0, 4, time.Now())
	if got := endOffsets(ctx, adm, "fresh"); got != 0 {
		t.Fatalf("end offsets of fresh created again: %d, want 0 (the leaders kept the deleted topic's data)", got)
	}

	// Leader 2 is down while a topic it holds is deleted.
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	waitEveryLeader(ctx, t, pc, "gone", 0, 2, time.Now())
	produce("gone", 4)
	pc.Leaders[2].kill()
	if deleted, err := adm.DeleteTopics(ctx, "gone"); err != nil || deleted["gone"].Err != nil {
		t.Fatalf("delete gone: %v %v", err, deleted)
	}
	pc.StartLeader(2)
	waitEveryLeader(ctx, t, pc, "gone", kerr.UnknownTopicOrPartition.Code, 0, time.Now())
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	waitEveryLeader(ctx, t, pc, "gone", 0, 2, time.Now())
	if got := endOffsets(ctx, adm, "gone"); got != 0 {
		t.Fatalf("end offsets of gone created again: %d, want 0 (leader 2 kept the data it held)", got)
	}
}

// Separate processes and topic configs: a leader process enforces the
// configs of a topic created at the controller from its first record
// (max.message.bytes: MESSAGE_TOO_LARGE), describes them, and follows an
// alter within about a second; the controller's requests sent to a leader
// process are forwarded over the Kafka protocol, and that leader shows the
// change when its answer arrives.
func TestTopicConfigsSeparateProcesses(t *testing.T) {
	pc := startProcCluster(t, "4.2", []string{"4.2", "4.2"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := pc.admin()
	if created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("2048")}, "capped"); err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.file.Leaders[0].Addr), kgo.DefaultProduceTopic("capped"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	big := make([]byte, 4096)
	rand.Read(big)                  // incompressible: kgo compresses batches
	for p := int32(0); p < 2; p++ { // a partition on each leader
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: big}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("4 KiB to capped-%d (max.message.bytes 2048): %v, want MESSAGE_TOO_LARGE", p, err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("small")}).FirstErr(); err != nil {
			t.Fatalf("a small record to capped-%d: %v", p, err)
		}
	}

	describeAt := func(addr string) (string, kmsg.ConfigSource) {
		t.Helper()
		wc, err := wire.Dial(ctx, addr, "topics-test")
		if err != nil {
			t.Fatal(err)
		}
		defer wc.Close()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "capped", []string{"max.message.bytes"}
		req.Resources = append(req.Resources, rr)
		resp, err := wc.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DescribeConfigsResponse).Resources[0]
		if r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Value == nil {
			t.Fatalf("DescribeConfigs at %s: %+v", addr, r)
		}
		return *r.Configs[0].Value, r.Configs[0].Source
	}
	for _, l := range pc.file.Leaders {
		if v, src := describeAt(l.Addr); v != "2048" || src != kmsg.ConfigSourceDynamicTopicConfig {
			t.Fatalf("leader %d describes max.message.bytes %s from %v", l.NodeID, v, src)
		}
	}

	// The alter goes to leader 2, which forwards it: it shows the new
	// value when the answer arrives, leader 1 within about a second.
	l2, err := wire.Dial(ctx, pc.file.Leaders[1].Addr, "topics-test")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "capped"
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value, ac.Op = "max.message.bytes", kmsg.StringPtr("65536"), kmsg.IncrementalAlterConfigOpSet
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)
	resp, err := l2.Do(ctx, alter)
	if err != nil || resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs at leader 2: %v %+v", err, resp)
	}
	answered := time.Now()
	if v, _ := describeAt(pc.file.Leaders[1].Addr); v != "65536" {
		t.Fatalf("leader 2 describes max.message.bytes %s right after its alter's answer, want 65536", v)
	}
	for {
		if v, _ := describeAt(pc.file.Leaders[0].Addr); v == "65536" {
			t.Logf("leader 1 has the altered config %v after the answer", time.Since(answered).Round(time.Millisecond))
			break
		}
		if time.Since(answered) > 5*time.Second {
			t.Fatal("leader 1 still has the old max.message.bytes 5 s after the alter")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for p := int32(0); p < 2; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: big}).FirstErr(); err != nil {
			t.Fatalf("4 KiB to capped-%d after raising max.message.bytes: %v", p, err)
		}
	}

	// CreateTopics at a leader process: forwarded, and in that leader's
	// Metadata when the answer arrives.
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "via-leader", 3, 1
	create.Topics = append(create.Topics, ct)
	resp, err = l2.Do(ctx, create)
	if err != nil || resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics at leader 2: %v %+v", err, resp)
	}
	if code, n := leaderMetadata(ctx, t, pc.file.Leaders[1].Addr, "via-leader"); code != 0 || n != 3 {
		t.Fatalf("leader 2's Metadata right after its CreateTopics answer: error %d, %d partitions", code, n)
	}
	waitEveryLeader(ctx, t, pc, "via-leader", 0, 3, time.Now())
}
