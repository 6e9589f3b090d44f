package leaderstub

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// TestRegistrationsBatched: while every sender is busy (one here),
// registrations from other producers queue up and go out together in the
// next request.
func TestRegistrationsBatched(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.RegistrationsInFlight = 1 })
	block := make(chan struct{})
	f.coord.mu.Lock()
	f.coord.block, f.coord.inFlight = block, make(chan struct{}, 10)
	f.coord.mu.Unlock()
	var wg sync.WaitGroup
	codes := make([]int16, 3)
	produce := func(i int) {
		defer wg.Done()
		id := []string{"a", "b", "c"}[i]
		resp := f.call(f.l.handleProduce, produceReq("t", 0, &id, -1,
			testBatch{pid: int64(i + 1), epoch: 0, seq: 0, txn: true}.bytes()), 12).(*kmsg.ProduceResponse)
		codes[i] = resp.Topics[0].Partitions[0].ErrorCode
	}
	wg.Add(1)
	go produce(0)
	<-f.coord.inFlight // the first request is at the coordinator
	wg.Add(2)
	go produce(1)
	go produce(2)
	waitFor(t, "two queued registrations", func() bool { return f.l.registrar.Queued() == 2 })
	close(block)
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 || codes[2] != 0 {
		t.Fatalf("produce codes %v", codes)
	}
	f.coord.mu.Lock()
	defer f.coord.mu.Unlock()
	if len(f.coord.calls) != 2 || len(f.coord.calls[0].Transactions) != 1 || len(f.coord.calls[1].Transactions) != 2 {
		t.Fatalf("want 2 requests (1 txn, then 2 batched), got %d", len(f.coord.calls))
	}
}

// TestCoordinatorErrorsMapped: the coordinator's answer becomes the
// producer's error as Kafka maps it, and nothing is appended.
func TestCoordinatorErrorsMapped(t *testing.T) {
	for _, tc := range []struct {
		coordinator int16
		version     int16
		want        int16
	}{
		{kerr.ProducerFenced.Code, 12, kerr.InvalidProducerEpoch.Code},
		{kerr.TransactionAbortable.Code, 10, kerr.InvalidTxnState.Code},
		{kerr.TransactionAbortable.Code, 11, kerr.TransactionAbortable.Code},
		{kerr.NotCoordinator.Code, 12, kerr.NotEnoughReplicas.Code},
		{kerr.InvalidProducerIDMapping.Code, 12, kerr.InvalidProducerIDMapping.Code},
	} {
		f := newFixture(t)
		id := "x"
		f.coord.errFor[id] = tc.coordinator
		resp := f.call(f.l.handleProduce, produceReq("t", 0, &id, -1, testBatch{pid: 1, epoch: 0, seq: 0, txn: true}.bytes()), tc.version).(*kmsg.ProduceResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("coordinator %d at Produce v%d: got %d, want %d", tc.coordinator, tc.version, got, tc.want)
		}
		if f.logEnd() != 0 {
			t.Errorf("coordinator %d: a refused batch was appended", tc.coordinator)
		}
	}
}

// TestBadInput: corrupt, truncated and otherwise invalid record sets get a
// per-partition error, never a panic, and the other partitions still work.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	good := testBatch{pid: -1, epoch: -1, seq: -1, count: 2}.bytes()
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	ctrl := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(ctrl[offAttributes:], attrControl)
	binary.BigEndian.PutUint32(ctrl[offCRC:], crc32.Checksum(ctrl[offAttributes:], crc32c))
	magic1 := append([]byte(nil), good...)
	magic1[offMagic] = 1
	for name, tc := range map[string]struct {
		records []byte
		acks    int16
		want    int16
	}{
		"crc":       {badCRC, -1, kerr.CorruptMessage.Code},
		"truncated": {good[:40], -1, kerr.InvalidRecord.Code}, // Kafka: no whole batch (produce_versions_test.go)
		"empty":     {nil, -1, kerr.InvalidRecord.Code},
		"control":   {ctrl, -1, kerr.InvalidRecord.Code},
		"magic1":    {magic1, -1, kerr.InvalidRecord.Code}, // Kafka 4.x: only magic 2
		"acks2":     {good, 2, kerr.InvalidRequiredAcks.Code},
		"ok":        {append([]byte(nil), good...), 1, 0},
	} {
		resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, tc.acks, tc.records), 9).(*kmsg.ProduceResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("%s: got %s, want %s", name, codeName(got), codeName(tc.want))
		}
	}
	for _, tc := range []struct {
		topic string
		part  int32
		want  int16
	}{{"nope", 0, kerr.UnknownTopicOrPartition.Code}, {"t", 5, kerr.UnknownTopicOrPartition.Code}} {
		resp := f.call(f.l.handleProduce, produceReq(tc.topic, tc.part, nil, -1, good), 9).(*kmsg.ProduceResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("%s/%d: got %s", tc.topic, tc.part, codeName(got))
		}
	}
	// acks=0: no response, but the batch is appended.
	if resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, 0, testBatch{pid: -1, epoch: -1, seq: -1}.bytes()), 9); resp != nil {
		t.Fatalf("acks=0 got a response: %v", resp)
	}
	waitFor(t, "acks=0 batch durable", func() bool { return f.logEnd() == 3 })
}

// TestNotLeader: partitions of another leader are NOT_LEADER_OR_FOLLOWER.
func TestNotLeader(t *testing.T) {
	f := newFixture(t)
	f.view = cluster.NewView(testFile([]cluster.Node{{NodeID: 1, Addr: "127.0.0.1:2", KafkaVersion: "4.2"},
		{NodeID: 2, Addr: "127.0.0.1:3", KafkaVersion: "4.2"}}, map[string]int32{"t": 2}))
	f.restart()
	other := int32(0)
	if n, _ := f.view.LeaderOf("t", 0); n.NodeID == 1 {
		other = 1
	}
	resp := f.call(f.l.handleWriteTxnMarkers, markerReq(1, 0, true, 0, 2, "t", other), 2).(*kmsg.WriteTxnMarkersResponse)
	if got := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; got != kerr.NotLeaderForPartition.Code {
		t.Fatalf("marker for another leader's partition: %s", codeName(got))
	}
}

// TestRetention: whole batches are dropped from the start beyond
// RetentionBytes, never at or above the LSO; the log start survives a
// restart and fetching below it is OFFSET_OUT_OF_RANGE.
func TestRetention(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.RetentionBytes = 1000 })
	txn := "r"
	f.call(f.l.handleProduce, produceReq("t", 0, &txn, -1, testBatch{pid: 1, epoch: 0, seq: 0, txn: true}.bytes()), 12)
	for i := 0; i < 30; i++ {
		f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1, payload: "xxxxxxxxxxxxxxxxxxxx"}.bytes()), 9)
	}
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	start := p.logStart
	p.mu.RUnlock()
	if start != 0 {
		t.Fatalf("retention dropped past the LSO: log start %d with a txn open at 0", start)
	}
	f.call(f.l.handleWriteTxnMarkers, markerReq(1, 1, true, 0, 2, "t", 0), 2)
	f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1}.bytes()), 9)
	p.mu.RLock()
	start, size := p.logStart, p.size
	p.mu.RUnlock()
	if start == 0 || size > 1000 {
		t.Fatalf("after the commit: log start %d, size %d; want retention applied", start, size)
	}
	f.restart()
	p, _ = f.l.partitionFor("t", 0)
	if p.logStart != start {
		t.Fatalf("log start after restart %d, want %d", p.logStart, start)
	}
	lo := f.call(f.l.handleListOffsets, listOffsetsReq("t", 0, -2, false), 11).(*kmsg.ListOffsetsResponse)
	if got := lo.Topics[0].Partitions[0].Offset; got != start {
		t.Fatalf("ListOffsets earliest = %d, want %d", got, start)
	}
	req := kmsg.NewPtrFetchRequest()
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 0, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fr := f.call(f.l.handleFetch, req, 12).(*kmsg.FetchResponse)
	if got := fr.Topics[0].Partitions[0].ErrorCode; got != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the log start: %s", codeName(got))
	}
}

// TestListOffsets: earliest, latest (HW vs LSO), by timestamp, max timestamp
// (v7+; under read_committed the open transaction's batch holds the max
// timestamp, at the LSO, so none is answered, as Kafka does).
func TestListOffsets(t *testing.T) {
	f := newFixture(t)
	for i, ts := range []int64{100, 200, 300} {
		f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1, ts: ts, count: i + 1}.bytes()), 9)
	}
	txn := "lo"
	f.call(f.l.handleProduce, produceReq("t", 0, &txn, -1, testBatch{pid: 5, epoch: 0, seq: 0, txn: true, ts: 400}.bytes()), 12)
	for _, tc := range []struct {
		ts        int64
		committed bool
		want      int64
	}{{-2, false, 0}, {-1, false, 7}, {-1, true, 6}, {150, false, 1}, {300, false, 3}, {500, false, -1}, {-3, false, 6}, {-3, true, -1}} {
		for _, v := range []int16{1, 7, 11} {
			if tc.ts == -3 && v < 7 {
				continue // UNSUPPORTED_VERSION: list_offsets_test.go
			}
			lo := f.call(f.l.handleListOffsets, listOffsetsReq("t", 0, tc.ts, tc.committed), v).(*kmsg.ListOffsetsResponse)
			p := lo.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.want {
				t.Errorf("v%d ts=%d committed=%v: offset %d error %d, want %d", v, tc.ts, tc.committed, p.Offset, p.ErrorCode, tc.want)
			}
		}
	}
}

// TestFetchWaitsForData: a long-poll Fetch answers as soon as a produce
// becomes durable, not at MaxWait.
func TestFetchWaitsForData(t *testing.T) {
	f := newFixture(t)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes = 30000, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.SetVersion(12)
	reply := f.l.handleFetch(context.Background(), &wire.Request{Body: req, Key: 1, Version: 12, Log: zerolog.Nop()})
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, _ := reply()
		done <- resp.(*kmsg.FetchResponse)
	}()
	f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1}.bytes()), 9)
	select {
	case resp := <-done:
		if len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Fatal("fetch returned without data")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fetch did not wake up on the produce")
	}
}

// TestFetchVersionsAbortedTransactions: Fetch v4, v11, v12, v13 (by topic
// id) and v18 under read_committed stop at the LSO and list the aborted
// transaction overlapping the range; read_uncommitted gets no list.
func TestFetchVersionsAbortedTransactions(t *testing.T) {
	f := newFixture(t)
	txn := "fv"
	f.call(f.l.handleProduce, produceReq("t", 0, &txn, -1, testBatch{pid: 1, epoch: 0, seq: 0, txn: true, count: 2}.bytes()), 12)
	f.call(f.l.handleWriteTxnMarkers, markerReq(1, 1, false, 0, 2, "t", 0), 2)                                          // abort: 0-1, marker 2
	f.call(f.l.handleProduce, produceReq("t", 0, &txn, -1, testBatch{pid: 1, epoch: 1, seq: 0, txn: true}.bytes()), 12) // open at 3
	topic, _ := f.view.Topic("t")
	for _, v := range []int16{4, 11, 12, 13, 18} {
		for _, committed := range []bool{true, false} {
			req := kmsg.NewPtrFetchRequest()
			req.MaxBytes = 1 << 20
			if committed {
				req.IsolationLevel = 1
			}
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "t", topic.ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			p := f.call(f.l.handleFetch, req, v).(*kmsg.FetchResponse).Topics[0].Partitions[0]
			batches := 0
			for raw := p.RecordBatches; len(raw) > 0; batches++ {
				_, n, err := parseHeader(raw)
				if err != nil {
					t.Fatal(err)
				}
				raw = raw[n:]
			}
			// Batches: 0-1 (aborted txn), 2 (abort marker), 3 (open txn).
			wantBatches, wantAborted := 3, 0
			if committed {
				wantBatches = 2
				wantAborted = 1
			}
			if p.ErrorCode != 0 || p.HighWatermark != 4 || p.LastStableOffset != 3 || batches != wantBatches || len(p.AbortedTransactions) != wantAborted {
				t.Errorf("v%d committed=%v: err %d hw %d lso %d batches %d aborted %v", v, committed, p.ErrorCode, p.HighWatermark, p.LastStableOffset, batches, p.AbortedTransactions)
			}
			if wantAborted == 1 && (p.AbortedTransactions[0].ProducerID != 1 || p.AbortedTransactions[0].FirstOffset != 0) {
				t.Errorf("v%d: aborted %+v", v, p.AbortedTransactions[0])
			}
		}
	}
}

// TestRegistrationsNotConvoyed: with senders free, a registration does not
// wait behind a request that the coordinator holds (one waiting for its
// previous transaction's markers): it goes out in a request of its own.
func TestRegistrationsNotConvoyed(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.RegistrationsInFlight = 2 })
	block := make(chan struct{})
	f.coord.mu.Lock()
	f.coord.block, f.coord.inFlight = block, make(chan struct{}, 10)
	f.coord.mu.Unlock()
	defer func() {
		select {
		case <-block:
		default:
			close(block)
		}
	}()
	var wg sync.WaitGroup
	codes := make([]int16, 2)
	produce := func(i int) {
		defer wg.Done()
		id := []string{"a", "b"}[i]
		resp := f.call(f.l.handleProduce, produceReq("t", 0, &id, -1,
			testBatch{pid: int64(i + 1), epoch: 0, seq: 0, txn: true}.bytes()), 12).(*kmsg.ProduceResponse)
		codes[i] = resp.Topics[0].Partitions[0].ErrorCode
	}
	wg.Add(2)
	go produce(0)
	<-f.coord.inFlight // the first request is held at the coordinator
	go produce(1)
	select {
	case <-f.coord.inFlight: // the second went out meanwhile
	case <-time.After(10 * time.Second): // a failure bound, not a synchronization
		t.Fatal("the second registration waited behind the held request")
	}
	close(block)
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("produce codes %v", codes)
	}
}
