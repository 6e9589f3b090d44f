package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupSurvivesSIGKILLUp: a share group's state through a SIGKILL
// of `txncoord up`. A kgo member accepts part of the records (its
// acknowledgements answered, so durable); another member acquires the
// rest of one partition and never acknowledges (it dies with the process).
// After the restart a new member gets every record not accepted before,
// the acquired ones included (locks do not survive), and none that was
// accepted: at-least-once, nothing lost, nothing acknowledged redelivered.
func TestShareGroupSurvivesSIGKILLUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts txncoord processes")
	}
	pc, bounce := startGroupsUp(t)
	ctx := testCtx(t, 120*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const group, n, first = "share-kill", 300, 100
	setShareConfigs(ctx, t, cl, group, "share.auto.offset.reset", "earliest")
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: wireTopic, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	accepted := map[string]bool{}
	member, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(wireTopic),
		kgo.ShareMaxRecords(10))
	if err != nil {
		t.Fatal(err)
	}
	for len(accepted) < first && ctx.Err() == nil {
		member.PollRecords(ctx, 10).EachRecord(func(r *kgo.Record) {
			accepted[string(r.Value)] = true
			r.Ack(kgo.AckAccept)
		})
	}
	if err := member.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	member.Close() // every polled record is acknowledged: nothing released

	// A member that acquires and dies with the process, on the partition
	// holding the most records (kgo's sticky partitioner fills few).
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, wireTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, wireTopic)
	if err != nil {
		t.Fatal(err)
	}
	var fullest kadm.ListedOffset
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > fullest.Offset {
			fullest = o
		}
	})
	p0 := topics[wireTopic].Partitions[fullest.Partition]
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr("doomed-member")
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = 1000, 1<<20, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topics[wireTopic].ID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = p0.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := cl.Broker(int(p0.Leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	held := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				held += int(a.LastOffset - a.FirstOffset + 1)
			}
		}
	}
	if resp.ErrorCode != 0 || held == 0 {
		t.Fatalf("the doomed member acquired %d records (error %d)", held, resp.ErrorCode)
	}

	bounce()

	after := map[string]bool{}
	survivor, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(wireTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer survivor.Close()
	for len(accepted)+len(after) < n && ctx.Err() == nil {
		survivor.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if accepted[string(r.Value)] {
				t.Errorf("record %s, accepted before the SIGKILL, delivered again", r.Value)
			}
			after[string(r.Value)] = true
		})
	}
	if len(accepted)+len(after) != n {
		t.Fatalf("%d records accepted before the SIGKILL and %d delivered after, want %d in all", len(accepted), len(after), n)
	}
	t.Logf("accepted before: %d; held by the killed member: %d; delivered after the restart: %d", len(accepted), held, len(after))
}

// setShareConfigs sets a group's configs (IncrementalAlterConfigs on the
// GROUP resource).
func setShareConfigs(ctx context.Context, t *testing.T, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("IncrementalAlterConfigs %v: %v", kvs, err)
	}
}
