package groups_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932) end to end with kgo's share consumer against an
// embedded cluster: the group coordinator assigns, the two leaders
// acquire, lock and count deliveries.

// setGroupConfigs sets a group's configs (IncrementalAlterConfigs on the
// GROUP resource, as kafka-configs.sh --entity-type groups).
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) {
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
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("IncrementalAlterConfigs %v: %v", kvs, err)
	}
}

// shareStart is group's share-partition start offset of topic's partition
// (-1: no share state there).
func shareStart(t *testing.T, adm *kadm.Client, group, topic string, partition int32) int64 {
	t.Helper()
	got, err := adm.DescribeShareGroupOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	d := got[group]
	if d.Err != nil {
		t.Fatalf("DescribeShareGroupOffsets %s: %v", group, d.Err)
	}
	o, ok := d.Offsets.Lookup(topic, partition)
	if !ok {
		return -1
	}
	return o.StartOffset
}

// TestShareKgoSeveralMembers: three share consumers of one group read a
// topic of six partitions together; every record is delivered once, with
// delivery count 1 (nothing failed, so nothing is redelivered), and the
// share-partition start offsets reach the end of every partition.
func TestShareKgoSeveralMembers(t *testing.T) {
	tc := startCluster(t)
	const n = 600
	admCl := tc.client()
	setGroupConfigs(t, admCl, "s3", "share.auto.offset.reset", "earliest")
	produceNumbered(t, admCl, "in", n)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	byMember := map[int]int{}
	total := 0
	pollCtx, allSeen := context.WithCancel(ctx)
	defer allSeen()
	var wg sync.WaitGroup
	for i := range 3 {
		cl := tc.client(kgo.ShareGroup("s3"), kgo.ConsumeTopics("in"), kgo.ShareMaxRecords(25), kgo.ClientID(fmt.Sprintf("member-%d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollFetches(pollCtx)
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					if r.DeliveryCount() != 1 {
						t.Errorf("record %s delivered with count %d", r.Value, r.DeliveryCount())
					}
					seen[string(r.Value)]++
					byMember[i]++
					total++
				})
				if total >= n {
					allSeen()
				}
				mu.Unlock()
			}
			// Close sends the acknowledgements of the last poll
			// (unacknowledged records would be released).
			cl.Close()
		}()
	}
	wg.Wait()
	if total < n {
		t.Fatalf("consumed %d of %d records before the deadline", total, n)
	}
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d delivered %d times", i, c)
		}
	}
	t.Logf("records per member: %v", byMember)

	adm := kadm.NewClient(admCl)
	described, err := adm.DescribeShareGroups(ctx, "s3")
	if err != nil || described["s3"].Err != nil {
		t.Fatalf("DescribeShareGroups: %v %v", err, described["s3"].Err)
	}
	ends := endOffsets(t, adm, "in")
	for p, end := range ends {
		// The last acknowledgements of a closing member are durable
		// before its ShareAcknowledge is answered.
		if got := shareStart(t, adm, "s3", "in", p); got != end {
			t.Errorf("partition %d: share start offset %d, want the end %d", p, got, end)
		}
	}
}

// rawShareFetch acquires records with a ShareFetch of its own (a member
// that never acknowledges): it returns the acquired offsets.
func rawShareFetch(t *testing.T, tc *testCluster, cl *kgo.Client, group, member, topic string, topicID [16]byte, partition int32, epoch int32) []int64 {
	t.Helper()
	leader, ok := tc.e.View.LeaderOf(topic, partition)
	if !ok {
		t.Fatalf("no leader of %s/%d", topic, partition)
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = epoch, 2000, 1<<20, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := cl.Broker(int(leader.NodeID)).Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	var out []int64
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("ShareFetch partition %d: %v", p.Partition, err)
			}
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// createTopic makes a topic of one partition and returns its id.
func createTopic(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	resp, err := adm.CreateTopic(context.Background(), 1, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	return resp.ID
}

// TestShareKgoRedeliveryAfterLockTimeout: a member acquires records and
// never acknowledges them; once their acquisition lock (15 s, the least a
// group may set) expires, a kgo share consumer of the group gets them,
// each with delivery count 2.
func TestShareKgoRedeliveryAfterLockTimeout(t *testing.T) {
	tc := startCluster(t)
	admCl := tc.client()
	adm := kadm.NewClient(admCl)
	id := createTopic(t, adm, "locked")
	setGroupConfigs(t, admCl, "lk", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "15000")
	const n = 20
	produceNumbered(t, admCl, "locked", n)

	acquired := rawShareFetch(t, tc, admCl, "lk", "stuck-member", "locked", id, 0, 0)
	if len(acquired) != n {
		t.Fatalf("the stuck member acquired %d records, want %d", len(acquired), n)
	}
	cl := tc.client(kgo.ShareGroup("lk"), kgo.ConsumeTopics("locked"))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	got := map[string]int32{}
	for len(got) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = r.DeliveryCount() })
	}
	if len(got) != n {
		t.Fatalf("redelivered %d of %d records", len(got), n)
	}
	for v, dc := range got {
		if dc != 2 {
			t.Errorf("record %s redelivered with delivery count %d, want 2", v, dc)
		}
	}
}

// TestShareKgoDeliveryLimitReleaseReject: a consumer releases every
// record with an even key and rejects those with a key divisible by 5,
// accepting the rest. A rejected record is never delivered again; a
// released one comes back until share.delivery.count.limit (2) is
// reached, and then is archived; the start offset ends at the log end.
func TestShareKgoDeliveryLimitReleaseReject(t *testing.T) {
	tc := startCluster(t)
	admCl := tc.client()
	adm := kadm.NewClient(admCl)
	createTopic(t, adm, "limits")
	setGroupConfigs(t, admCl, "lim", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2")
	const n = 100
	produceNumbered(t, admCl, "limits", n)

	cl := tc.client(kgo.ShareGroup("lim"), kgo.ConsumeTopics("limits"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deliveries := map[int][]int32{}
	done := func() bool {
		for i := range n {
			switch {
			case i%5 == 0, i%2 != 0:
				if len(deliveries[i]) < 1 {
					return false
				}
			default:
				if len(deliveries[i]) < 2 {
					return false
				}
			}
		}
		return true
	}
	for !done() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			i, _ := strconv.Atoi(string(r.Value))
			deliveries[i] = append(deliveries[i], r.DeliveryCount())
			switch {
			case i%5 == 0:
				r.Ack(kgo.AckReject)
			case i%2 == 0:
				r.Ack(kgo.AckRelease)
			default:
				r.Ack(kgo.AckAccept)
			}
		})
	}
	if !done() {
		t.Fatalf("not every record reached its deliveries: %v", deliveries)
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	// Whatever comes now is a delivery too many.
	extra, cancelExtra := context.WithTimeout(ctx, time.Second)
	cl.PollFetches(extra).EachRecord(func(r *kgo.Record) { t.Errorf("record %s delivered again (count %d)", r.Value, r.DeliveryCount()) })
	cancelExtra()
	for i := range n {
		var want []int32
		switch {
		case i%5 == 0, i%2 != 0:
			want = []int32{1}
		default:
			want = []int32{1, 2}
		}
		if fmt.Sprint(deliveries[i]) != fmt.Sprint(want) {
			t.Errorf("record %d delivery counts %v, want %v", i, deliveries[i], want)
		}
	}
	if got := shareStart(t, adm, "lim", "limits", 0); got != n {
		t.Errorf("share start offset %d, want %d (every record finished)", got, n)
	}
}

// TestShareKgoReadCommitted: with share.isolation.level=read_committed a
// share consumer gets every record of committed transactions and none of
// aborted ones (interleaved, from two kgo transactional producers and a
// sarama one), and nothing of an open transaction until it commits.
func TestShareKgoReadCommitted(t *testing.T) {
	tc := startCluster(t)
	admCl := tc.client()
	adm := kadm.NewClient(admCl)
	createTopic(t, adm, "txns")
	setGroupConfigs(t, admCl, "rc", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	producers := []*kgo.Client{
		tc.client(kgo.TransactionalID("share-a"), kgo.DefaultProduceTopic("txns")),
		tc.client(kgo.TransactionalID("share-b"), kgo.DefaultProduceTopic("txns")),
	}
	sp := saramaTxnProducer(t, tc.addrs[0], "share-sarama")
	committed := map[string]bool{}
	for round := range 10 {
		for pi, p := range producers {
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			commit := (round+pi)%3 != 0
			for k := range 5 {
				v := fmt.Sprintf("r%d-p%d-%d-%v", round, pi, k, commit)
				if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if commit {
					committed[v] = true
				}
			}
			if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
		// A sarama producer's transaction in between: committed in
		// odd rounds, aborted in even ones.
		if err := sp.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		commit := round%2 == 1
		var msgs []*sarama.ProducerMessage
		for k := range 3 {
			v := fmt.Sprintf("r%d-sarama-%d-%v", round, k, commit)
			msgs = append(msgs, &sarama.ProducerMessage{Topic: "txns", Partition: 0, Value: sarama.StringEncoder(v)})
			if commit {
				committed[v] = true
			}
		}
		if err := sp.SendMessages(msgs); err != nil {
			t.Fatal(err)
		}
		end := sp.AbortTxn
		if commit {
			end = sp.CommitTxn
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
	}
	// An open transaction: its records are below the high watermark
	// but above the last stable offset.
	open := producers[0]
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, kgo.StringRecord("open-0"), kgo.StringRecord("open-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cl := tc.client(kgo.ShareGroup("rc"), kgo.ConsumeTopics("txns"))
	got := map[string]int{}
	consume := func(until func() bool) {
		for !until() && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
		}
	}
	consume(func() bool {
		for v := range committed {
			if got[v] == 0 {
				return false
			}
		}
		return true
	})
	for v, c := range got {
		if !committed[v] {
			t.Errorf("record %q delivered (%d times): not committed", v, c)
		}
	}
	if len(got) != len(committed) {
		t.Fatalf("delivered %d of %d committed records", len(got), len(committed))
	}
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	consume(func() bool { return got["open-0"] > 0 && got["open-1"] > 0 })
	if got["open-0"] != 1 || got["open-1"] != 1 {
		t.Fatalf("the committed open transaction's records: %v", got)
	}
}

// TestShareKgoRestart: a member accepts part of a topic; after a restart
// of the cluster on its data dir the share-partition start offset is
// where it was, and a new member gets exactly the records not accepted
// before: none acknowledged is redelivered, none is lost.
func TestShareKgoRestart(t *testing.T) {
	tc := startCluster(t)
	admCl := tc.client()
	adm := kadm.NewClient(admCl)
	createTopic(t, adm, "durable")
	setGroupConfigs(t, admCl, "rs", "share.auto.offset.reset", "earliest")
	const n, first = 100, 40
	produceNumbered(t, admCl, "durable", n)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := map[string]bool{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.addrs[0]), kgo.ShareGroup("rs"), kgo.ConsumeTopics("durable"), kgo.ShareMaxRecords(first), kgo.ShareMaxRecordsStrict())
	if err != nil {
		t.Fatal(err)
	}
	for len(before) < first && ctx.Err() == nil {
		cl.PollRecords(ctx, first-len(before)).EachRecord(func(r *kgo.Record) {
			before[string(r.Value)] = true
			r.Ack(kgo.AckAccept)
		})
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	// The admin views while the member is in the group: ListGroups
	// (kadm, by type) and the coordinator's description with the share
	// partition's start offset, lag and records in flight.
	listed, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil || listed["rs"].GroupType != "share" || listed["rs"].State != "Stable" {
		t.Fatalf("ListGroups by type share: %+v %v", listed, err)
	}
	d, ok := tc.e.Coordinator.Groups.DescribeGroup("rs")
	if !ok || d.Type != "share" || len(d.Members) != 1 || len(d.SharePartitions) != 1 {
		t.Fatalf("DescribeGroup: %+v %v", d, ok)
	}
	if sp := d.SharePartitions[0]; sp.Topic != "durable" || sp.StartOffset != first || sp.EndOffset != n || sp.Lag != n-first {
		t.Fatalf("share partition %+v, want start %d end %d lag %d", sp, first, n, n-first)
	}
	if a := d.Members[0].Assignment; len(a) != 1 || a[0].Topic != "durable" || len(a[0].Partitions) != 1 {
		t.Fatalf("member assignment %+v", a)
	}
	cl.Close()
	if len(before) != first {
		t.Fatalf("accepted %d records before the restart, want %d", len(before), first)
	}
	start := shareStart(t, adm, "rs", "durable", 0)
	if start != first {
		t.Fatalf("share start offset %d before the restart, want %d", start, first)
	}

	tc.stop()
	tc.start(nil)
	adm = kadm.NewClient(tc.client())
	if got := shareStart(t, adm, "rs", "durable", 0); got != start {
		t.Fatalf("share start offset %d after the restart, want %d", got, start)
	}
	// The group itself is stored: listed after the restart (Empty: its
	// member left).
	if listed, err := adm.ListGroupsByType(ctx, []string{"share"}); err != nil || listed["rs"].State != "Empty" {
		t.Fatalf("ListGroups after the restart: %+v %v", listed, err)
	}
	after := map[string]bool{}
	cl2 := tc.client(kgo.ShareGroup("rs"), kgo.ConsumeTopics("durable"))
	for len(before)+len(after) < n && ctx.Err() == nil {
		cl2.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if before[string(r.Value)] {
				t.Errorf("record %s, accepted before the restart, delivered again", r.Value)
			}
			after[string(r.Value)] = true
		})
	}
	if len(before)+len(after) != n {
		t.Fatalf("%d records before and %d after the restart, want %d in all", len(before), len(after), n)
	}
}

// saramaTxnProducer is a transactional sarama producer of transactional
// id id, closed at the end of the test.
func saramaTxnProducer(t *testing.T, addr, id string) sarama.SyncProducer {
	t.Helper()
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Transaction.ID = id
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer([]string{addr}, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
