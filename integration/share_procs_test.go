package integration

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
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

// TestShareGroupAcrossProcesses: a share group with the group coordinator
// in a `txncoord coordinator` process and the share partitions at two
// `txncoord leader` processes.
//   - Each leader process applies the group's configs, set with
//     IncrementalAlterConfigs at the controller: its ShareFetch answers
//     carry the group's record lock duration (60 s, not the default 30 s).
//   - A member that acquired records and whose connection ends gives them
//     back at once (Kafka's share session ends with its connection): three
//     kgo share consumers get every record exactly once, those records at
//     delivery count 2 and the others at 1, long before the 60 s locks
//     would have expired.
//   - DescribeShareGroupOffsets, AlterShareGroupOffsets and
//     DeleteShareGroupOffsets through kadm, answered by the coordinator
//     process from the leaders' state; a consumer started after the alter
//     gets exactly the records it rewound.
//   - A later change of the lock duration reaches every leader process.
func TestShareGroupAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts txncoord processes")
	}
	const topic, group, n = "shares", "procs-share", 400
	const lockMs = 60000
	pc := startProcCluster(t, "4.2", []string{"4.2", "4.2"}, map[string]int32{topic: 4})
	ctx := testCtx(t, 150*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	setShareConfigs(ctx, t, cl, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", strconv.Itoa(lockMs))
	produceNumbered(ctx, t, cl, n)
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := topics[topic]
	led := map[int32][]int32{} // leader → its partitions
	for _, p := range td.Partitions.Sorted() {
		led[p.Leader] = append(led[p.Leader], p.Partition)
	}
	if len(led) != 2 {
		t.Fatalf("partitions led by %v, want both leaders", led)
	}

	waitLeadersApply(ctx, t, cl, slices.Collect(maps.Keys(led)), group, lockMs)

	// A member acquires records at every leader, then its connection ends.
	doomed, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	held := map[[2]int64]bool{} // partition, offset
	for leader, parts := range led {
		resp := rawShareFetch(ctx, t, doomed, leader, group, "doomed-member", 0, td.ID, parts, 60)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("doomed fetch at leader %d, partition %d: %v", leader, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
				for _, a := range rp.AcquiredRecords {
					for o := a.FirstOffset; o <= a.LastOffset; o++ {
						held[[2]int64{int64(rp.Partition), o}] = true
					}
				}
			}
		}
	}
	if len(held) == 0 {
		t.Fatal("the doomed member acquired nothing")
	}
	doomed.Close()

	start := time.Now()
	got := consumeShare(ctx, t, pc.seeds, group, topic, 3, n, nil)
	took := time.Since(start)
	seen := map[string]int{}
	for _, d := range got {
		seen[d.value]++
		want := int32(1)
		if held[[2]int64{int64(d.partition), d.offset}] {
			want = 2
		}
		if d.count != want {
			t.Errorf("%s/%d@%d delivered with delivery count %d, want %d", topic, d.partition, d.offset, d.count, want)
		}
	}
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d delivered %d times to the kgo members, want 1", i, c)
		}
	}
	if took >= lockMs*time.Millisecond/2 {
		t.Errorf("consuming took %v: the departed member's records waited for their locks", took)
	}
	t.Logf("held by the member whose connection ended: %d; all %d consumed by 3 kgo members in %v", len(held), n, took)

	// The offset APIs at the coordinator process, once the group is empty.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	described := describeShareOffsets(ctx, t, adm, group)
	for p := range int32(4) {
		end, _ := ends.Lookup(topic, p)
		o, ok := described.Lookup(topic, p)
		if !ok || o.Err != nil || o.StartOffset != end.Offset || o.Lag != 0 {
			t.Errorf("%s/%d described %+v (%v), want start offset %d, lag 0", topic, p, o, ok, end.Offset)
		}
	}
	rewind, _ := ends.Lookup(topic, 0)
	whenEmpty(t, "AlterShareGroupOffsets", func() error {
		res, err := adm.AlterShareGroupOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 0}}})
		if err == nil {
			err = res.Error()
		}
		return err
	})
	if o, _ := describeShareOffsets(ctx, t, adm, group).Lookup(topic, 0); o.StartOffset != 0 || o.Lag != rewind.Offset {
		t.Fatalf("after the alter %s/0 is %+v, want start offset 0, lag %d", topic, o, rewind.Offset)
	}
	again := consumeShare(ctx, t, pc.seeds, group, topic, 1, int(rewind.Offset), nil)
	for _, d := range again {
		if d.partition != 0 {
			t.Errorf("%s/%d@%d delivered after rewinding partition 0 only", topic, d.partition, d.offset)
		}
	}
	if len(again) != int(rewind.Offset) {
		t.Fatalf("after rewinding %s/0 to 0, %d records delivered, want %d", topic, len(again), rewind.Offset)
	}
	whenEmpty(t, "DeleteShareGroupOffsets", func() error {
		res, err := adm.DeleteShareGroupOffsets(ctx, group, topic)
		if err == nil {
			err = res.Error()
		}
		return err
	})
	if left := describeShareOffsets(ctx, t, adm, group)[topic]; len(left) != 0 {
		t.Fatalf("after DeleteShareGroupOffsets the group still has share state on %v", left)
	}

	// A later change of the group's configs reaches every leader process.
	setShareConfigs(ctx, t, cl, group, "share.record.lock.duration.ms", "15000")
	waitLeadersApply(ctx, t, cl, slices.Collect(maps.Keys(led)), group, 15000)
}

// whenEmpty runs an admin change that needs an empty group until it is
// not refused NON_EMPTY_GROUP (the members' leaves may still be on their
// way), for up to ten seconds.
func whenEmpty(t *testing.T, name string, change func() error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := change()
		if err == nil {
			return
		}
		if !errors.Is(err, kerr.NonEmptyGroup) || attempt == 50 {
			t.Fatalf("%s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// produceNumbered produces the records "0" to n-1 with cl.
func produceNumbered(ctx context.Context, t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// waitLeadersApply waits until each leader applies group's configs (a
// leader process learns them from the controller about once a second),
// which show in its ShareFetch answers' lock duration.
func waitLeadersApply(ctx context.Context, t *testing.T, cl *kgo.Client, leaders []int32, group string, lockMs int32) {
	t.Helper()
	for _, leader := range leaders {
		deadline := time.Now().Add(15 * time.Second)
		for {
			resp := rawShareFetch(ctx, t, cl, leader, group, "probe-member", 0, [16]byte{}, nil, 0)
			if resp.AcquisitionLockTimeoutMillis == lockMs {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("leader %d answers lock duration %d ms, want the group's %d", leader, resp.AcquisitionLockTimeoutMillis, lockMs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// rawShareFetch sends one ShareFetch to leader for partitions of topic id
// (none: only the session), acquiring at most maxRecords.
func rawShareFetch(ctx context.Context, t *testing.T, cl *kgo.Client, leader int32, group, member string, epoch int32,
	id [16]byte, partitions []int32, maxRecords int32) *kmsg.ShareFetchResponse {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = 1000, 1<<20, maxRecords
	if len(partitions) > 0 {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = id
		for _, p := range partitions {
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	raw, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareFetch at leader %d: %v", leader, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// shareDelivery is one record as a kgo share member got it.
type shareDelivery struct {
	value     string
	partition int32
	offset    int64
	count     int32 // its delivery count
}

// consumeShare runs members kgo share consumers of group on topic, each
// accepting every record it gets, until want distinct records were
// delivered (and
// half a second more, so that a duplicate shows); it closes them.
// halfway, when set, runs once when half of want were delivered. A
// record delivered again after its acceptance was acknowledged (the ack
// answered without error) is an error: Kafka's at-least-once redelivers
// only what was not acknowledged.
func consumeShare(ctx context.Context, t *testing.T, seeds []string, group, topic string, members, want int, halfway func()) []shareDelivery {
	t.Helper()
	var mu sync.Mutex
	var out []shareDelivery
	accepted, distinct := map[string]bool{}, map[string]bool{}
	var doneAt time.Time
	var half sync.Once
	finished := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(distinct) >= want && doneAt.IsZero() {
			doneAt = time.Now()
		}
		return !doneAt.IsZero() && time.Since(doneAt) > 500*time.Millisecond
	}
	var wg sync.WaitGroup
	for range members {
		var failedMu sync.Mutex
		failed := map[int32]bool{} // partitions whose last acks were refused
		m, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(20),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				failedMu.Lock()
				defer failedMu.Unlock()
				for _, r := range rs {
					if r.Err != nil {
						failed[r.Partition] = true
					}
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer m.Close()
			for !finished() && ctx.Err() == nil {
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := m.PollRecords(pctx, 20)
				cancel()
				var batch []shareDelivery
				fs.EachRecord(func(r *kgo.Record) {
					d := shareDelivery{string(r.Value), r.Partition, r.Offset, r.DeliveryCount()}
					batch = append(batch, d)
					mu.Lock()
					if accepted[d.value] {
						t.Errorf("record %s (%s/%d@%d) delivered again at delivery count %d after its acceptance was acknowledged",
							d.value, topic, d.partition, d.offset, d.count)
					}
					out = append(out, d)
					distinct[d.value] = true
					n := len(distinct)
					mu.Unlock()
					r.Ack(kgo.AckAccept)
					if halfway != nil && n >= want/2 {
						half.Do(halfway)
					}
				})
				if len(batch) == 0 {
					continue
				}
				failedMu.Lock()
				clear(failed)
				failedMu.Unlock()
				if err := m.FlushAcks(ctx); err != nil {
					continue
				}
				failedMu.Lock()
				mu.Lock()
				for _, d := range batch {
					if !failed[d.partition] {
						accepted[d.value] = true
					}
				}
				mu.Unlock()
				failedMu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(distinct) < want {
		t.Fatalf("%d distinct records delivered before the deadline, want %d", len(distinct), want)
	}
	return out
}

// describeShareOffsets describes group's share-partition start offsets
// with kadm (at the group coordinator).
func describeShareOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, group string) kadm.ShareOffsets {
	t.Helper()
	ds, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err == nil {
		err = ds.Error()
	}
	if err != nil {
		t.Fatalf("DescribeShareGroupOffsets: %v", err)
	}
	return ds[group].Offsets
}
