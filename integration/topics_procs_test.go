package integration

import (
	"context"
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
