package leaderstub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeAll reads partition t/0 from the start with a real kgo consumer
// until want records arrived, and returns their values.
func consumeAll(t *testing.T, addr string, committed bool, want int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}})}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, got)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch error: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestE2EIdempotentProducer: a real kgo idempotent producer (InitProducerId
// forwarded through coordclient.Dial to the coordinator node), each codec
// franz-go supports, read back in order by a kgo consumer.
func TestE2EIdempotentProducer(t *testing.T) {
	tc := startCluster(t, "4.2")
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	var want []string
	for i, codec := range codecs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(tc.leaderAddr), kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("t"))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			v := fmt.Sprintf("codec%d-%03d-%s", i, j, "some compressible payload payload payload")
			recs = append(recs, &kgo.Record{Value: []byte(v)})
			want = append(want, v)
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatalf("codec %d: %v", i, err)
		}
		cl.Close()
	}
	got := consumeAll(t, tc.leaderAddr, false, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: got %q want %q", i, got[i], want[i])
		}
	}
	if n := len(tc.coord.versionsOf(22)); n != len(codecs) {
		t.Fatalf("coordinator saw %d InitProducerId, want %d (one per producer)", n, len(codecs))
	}
	// DescribeProducers lists every producer, none in a transaction.
	resp := do[*kmsg.DescribeProducersResponse](t, tc.dialLeader(t), describeReq("t", 0), 0)
	prods := resp.Topics[0].Partitions[0].ActiveProducers
	if len(prods) != len(codecs) {
		t.Fatalf("DescribeProducers: %d producers, want %d", len(prods), len(codecs))
	}
	for _, p := range prods {
		if p.CurrentTxnStartOffset != -1 || p.LastSequence < 0 || p.ProducerEpoch != 0 {
			t.Fatalf("producer state: %+v", p)
		}
	}
}

func describeReq(topic string, partition int32) *kmsg.DescribeProducersRequest {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	return req
}

func listOffsetsReq(topic string, partition int32, ts int64, committed bool) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func latest(t *testing.T, tc *testCluster, committed bool) int64 {
	t.Helper()
	resp := do[*kmsg.ListOffsetsResponse](t, tc.dialLeader(t), listOffsetsReq("t", 0, -1, committed), 11)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: error %d", p.ErrorCode)
	}
	return p.Offset
}

// TestE2ETransactionMarkers: a transactional batch sent as raw kmsg Produce
// v13 with a chosen (pid, epoch) is registered with the coordinator;
// WriteTxnMarkers v2 TV=2 commits it for a kgo read_committed consumer; the
// same marker replayed while a new transaction is open at that epoch is 47
// and writes nothing; an abort marker hides the new txn from read_committed
// but not from read_uncommitted.
func TestE2ETransactionMarkers(t *testing.T) {
	tc := startCluster(t, "4.2")
	cl := tc.dialLeader(t)
	txnID := "e2e-txn"
	const pid, epoch = int64(7000), int16(5)

	produce := func(b testBatch) int64 {
		t.Helper()
		req := produceReq("", 0, &txnID, -1, b.bytes())
		req.Topics[0].TopicID = tc.topicID
		resp := do[*kmsg.ProduceResponse](t, cl, req, 13)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("produce %+v: %s", b, codeName(rp.ErrorCode))
		}
		return rp.BaseOffset
	}
	marker := func(ep int16, commit bool, tv int8) int16 {
		t.Helper()
		resp := do[*kmsg.WriteTxnMarkersResponse](t, cl, markerReq(pid, ep, commit, 1, tv, "t", 0), 2)
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}

	first := produce(testBatch{pid: pid, epoch: epoch, seq: 0, txn: true, count: 3, ts: time.Now().UnixMilli(), payload: "committed"})
	adds := tc.coord.twin.callCount()
	if adds != 1 || tc.coord.versionsOf(24)[0] != 5 {
		t.Fatalf("leader registered the partition with %d AddPartitionsToTxn at versions %v, want one at v5", adds, tc.coord.versionsOf(24))
	}
	if got := latest(t, tc, true); got != first {
		t.Fatalf("LSO with the txn open = %d, want %d", got, first)
	}
	if code := marker(epoch+1, true, 2); code != 0 {
		t.Fatalf("commit marker: %s", codeName(code))
	}
	got := consumeAll(t, tc.leaderAddr, true, 3)
	if fmt.Sprint(got) != "[committed-0 committed-1 committed-2]" {
		t.Fatalf("read_committed got %v", got)
	}

	// A new transaction at epoch 6, then the old commit marker replayed.
	second := produce(testBatch{pid: pid, epoch: epoch + 1, seq: 0, txn: true, count: 2, ts: time.Now().UnixMilli(), payload: "aborted"})
	end := latest(t, tc, false)
	if code := marker(epoch+1, true, 2); code != 47 {
		t.Fatalf("replayed marker: %s, want INVALID_PRODUCER_EPOCH", codeName(code))
	}
	if after := latest(t, tc, false); after != end {
		t.Fatalf("a rejected marker appended: log end %d → %d", end, after)
	}
	if lso := latest(t, tc, true); lso != second {
		t.Fatalf("LSO after the rejected marker = %d, want %d (the new txn stays open)", lso, second)
	}
	// Abort the new transaction, then commit a third one so that
	// read_committed has something after the aborted records to reach.
	if code := marker(epoch+2, false, 2); code != 0 {
		t.Fatalf("abort marker: %s", codeName(code))
	}
	produce(testBatch{pid: pid, epoch: epoch + 2, seq: 0, txn: true, count: 1, ts: time.Now().UnixMilli(), payload: "later"})
	if code := marker(epoch+3, true, 2); code != 0 {
		t.Fatalf("second commit marker: %s", codeName(code))
	}
	got = consumeAll(t, tc.leaderAddr, true, 4)
	if fmt.Sprint(got) != "[committed-0 committed-1 committed-2 later-0]" {
		t.Fatalf("read_committed got %v", got)
	}
	got = consumeAll(t, tc.leaderAddr, false, 6)
	if fmt.Sprint(got) != "[committed-0 committed-1 committed-2 aborted-0 aborted-1 later-0]" {
		t.Fatalf("read_uncommitted got %v", got)
	}

	ms := tc.leader.ReceivedMarkers()
	if len(ms) != 4 {
		t.Fatalf("ReceivedMarkers: %d, want 4", len(ms))
	}
	for i, want := range []int16{0, 47, 0, 0} {
		if ms[i].RequestVersion != 2 || ms[i].TransactionVersion != 2 || ms[i].ErrorCode != want {
			t.Fatalf("ReceivedMarkers[%d] = %+v, want v2 tv2 error %d", i, ms[i], want)
		}
	}
	// DescribeProducers: epoch 8 from the last marker, coordinator epoch 1, no open txn.
	resp := do[*kmsg.DescribeProducersResponse](t, cl, describeReq("t", 0), 0)
	p := resp.Topics[0].Partitions[0].ActiveProducers[0]
	if p.ProducerID != pid || p.ProducerEpoch != 8 || p.CoordinatorEpoch != 1 || p.CurrentTxnStartOffset != -1 || p.LastSequence != -1 {
		t.Fatalf("DescribeProducers: %+v", p)
	}
}

// TestE2EOldLeaderClosesOnWriteTxnMarkersV2: a 4.1 leader advertises
// WriteTxnMarkers max v1 and closes the connection on a v2 request (as
// Kafka 4.0/4.1 do); v1 on a new connection works with the legacy rule.
func TestE2EOldLeaderClosesOnWriteTxnMarkersV2(t *testing.T) {
	tc := startCluster(t, "4.1")
	cl := tc.dialLeader(t)
	av, err := cl.ApiVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wtmMax int16 = -1
	for _, k := range av.ApiKeys {
		if k.ApiKey == 27 {
			wtmMax = k.MaxVersion
		}
	}
	if wtmMax != 1 {
		t.Fatalf("4.1 leader advertises WriteTxnMarkers max v%d, want v1", wtmMax)
	}
	req := markerReq(1, 0, true, 0, 2, "t", 0)
	req.SetVersion(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Do(ctx, req); err == nil {
		t.Fatal("WriteTxnMarkers v2 to a 4.1 leader was answered; want the connection closed")
	}
	if len(tc.leader.ReceivedMarkers()) != 0 {
		t.Fatal("the v2 request reached the handler")
	}
	cl2 := tc.dialLeader(t)
	resp := do[*kmsg.WriteTxnMarkersResponse](t, cl2, markerReq(1, 0, true, 0, 2, "t", 0), 1)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("v1 marker: %s", codeName(code))
	}
	if ms := tc.leader.ReceivedMarkers(); len(ms) != 1 || ms[0].RequestVersion != 1 || ms[0].TransactionVersion != 0 {
		t.Fatalf("ReceivedMarkers = %+v, want one v1 marker with TV 0", ms)
	}
}
