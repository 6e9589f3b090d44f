package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
)

// readState consumes topic partition 0 from its start up to and including
// offset last, at the isolation level given, and returns the state the
// records leave (the last value of each key; a null value deletes it) and
// how many records it read.
func readState(ctx context.Context, t *testing.T, addr, topic string, committed bool, last int64) (map[string]string, int) {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	state, n := map[string]string{}, 0
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll (read_committed %t): %v", committed, err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.Value == nil {
				delete(state, string(r.Key))
			} else {
				state[string(r.Key)] = string(r.Value)
			}
			done = done || r.Offset >= last
		})
		if done {
			return state, n
		}
	}
}

// TestLogCleanerEmbedded: a compacted topic written by a plain producer
// (lz4 batches, overwrites, a tombstone) and a transactional one (commits
// and aborts) is cleaned by the leaders' cleaner: read_committed and
// read_uncommitted then see the same committed state as before, the log
// shrinks to about one record per key, and a restart keeps it so.
func TestLogCleanerEmbedded(t *testing.T) {
	f, lns := twoLeaderFile(t)
	dir := t.TempDir()
	cfg := EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, Log: zerolog.Nop(), CleanerBackoff: 20 * time.Millisecond}
	e, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stopWithin(t, e.Stop)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "changelog"
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "segment.ms": kadm.StringPtr("1"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"), "delete.retention.ms": kadm.StringPtr("100")}
	if c, err := adm.CreateTopic(ctx, 1, -1, configs, topic); err != nil || c.Err != nil {
		t.Fatalf("create %s with cleanup.policy=compact: %v %v", topic, err, c.Err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On(topic, nil); err != nil || !hasConfig(v, "cleanup.policy", "compact") {
		t.Fatalf("DescribeConfigs of %s: %v %+v", topic, err, v)
	}

	txn, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("cleaner-e2e"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()

	const keys = 20
	want := map[string]string{}
	produced := 0
	// Another idempotent producer writes k00 once: overwritten later, its
	// batch is kept empty (its producer's last), as Kafka keeps it.
	other, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(ctx, &kgo.Record{Key: []byte("k00"), Value: []byte("other")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	other.Close()
	produced++
	for round := range 5 {
		for k := range keys {
			key, val := fmt.Sprintf("k%02d", k), fmt.Sprintf("plain-%d", round)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(val)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			want[key] = val
			produced++
		}
		for _, commit := range []bool{true, false} {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for k := range keys / 2 {
				key, val := fmt.Sprintf("k%02d", k), fmt.Sprintf("txn-%d-%t", round, commit)
				if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(val)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if commit {
					want[key] = val
				}
				produced++
			}
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The plain records below must follow the last abort's marker, which
	// is written after its EndTxn answered (the log end checked below).
	waitTxnComplete(t, e, "cleaner-e2e")
	// A key written and deleted (a tombstone).
	for _, v := range [][]byte{[]byte("short-lived"), nil} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("gone"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced++
	}
	// The last batch is the active segment, never cleaned.
	fence, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("fence"), Value: []byte("1")}).First()
	if err != nil {
		t.Fatal(err)
	}
	want["fence"] = "1"
	produced++

	check := func(when string) int {
		t.Helper()
		committed, _ := readState(ctx, t, e.Bootstrap(), topic, true, fence.Offset)
		uncommitted, n := readState(ctx, t, e.Bootstrap(), topic, false, fence.Offset)
		if !maps.Equal(committed, want) {
			t.Fatalf("%s: read_committed state %v, want %v", when, committed, want)
		}
		if when != "before cleaning" && !maps.Equal(uncommitted, want) {
			t.Fatalf("%s: read_uncommitted state %v, want %v", when, uncommitted, want)
		}
		return n
	}
	// The cleaner may have started already: read_committed sees the
	// committed state whatever it did.
	check("before cleaning")
	if produced <= 5*(keys+1) {
		t.Fatalf("only %d records produced: the test would not show the log shrink", produced)
	}
	// The cleaner runs every 20 ms; wait (bounded) for the log to hold
	// one record per key: 20 keys and the fence.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, n := readState(ctx, t, e.Bootstrap(), topic, false, fence.Offset)
		if n <= keys+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s of cleaning the log still holds %d records, want %d (one per key)", n, keys+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := check("after cleaning"); n != keys+1 {
		t.Fatalf("after cleaning: %d records, want %d", n, keys+1)
	}
	if empty := emptyBatches(ctx, t, cl, topic); empty != 1 {
		t.Fatalf("%d empty batches after cleaning, want 1 (the other producer's last batch)", empty)
	}
	// The admin API's topic shows the partition's cleanable ratio (the
	// leader is in this process); a topic that is not compacted has none.
	tb, ok := e.Coordinator.AdminBackend().(admin.TopicsBackend)
	if !ok {
		t.Fatal("the coordinator's admin backend serves no topics")
	}
	at, err := tb.Topic(ctx, topic)
	if err != nil || len(at.PartitionInfo) != 1 || at.PartitionInfo[0].CleanableRatio == nil {
		t.Fatalf("admin topic %s: %v %+v, want a cleanable ratio", topic, err, at.PartitionInfo)
	}
	if r := *at.PartitionInfo[0].CleanableRatio; r < 0 || r > 1 {
		t.Fatalf("cleanable ratio %v", r)
	}
	if at, err := tb.Topic(ctx, "orders"); err != nil || at.PartitionInfo[0].CleanableRatio != nil {
		t.Fatalf("admin topic orders (delete): %v %+v, want no cleanable ratio", err, at.PartitionInfo)
	}
	// sarama reads the cleaned log (gaps, rewritten and emptied batches)
	// to the same state.
	for _, committed := range []bool{false, true} {
		if got := saramaState(t, e.Bootstrap(), topic, committed, fence.Offset); !maps.Equal(got, want) {
			t.Fatalf("sarama (read_committed %t) after cleaning: %v, want %v", committed, got, want)
		}
	}
	// Offsets never change: the log end is where it was, and the log
	// start too.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != fence.Offset+1 {
		t.Fatalf("log end %d after cleaning, want %d", o.Offset, fence.Offset+1)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 0 {
		t.Fatalf("log start %d after cleaning, want 0", o.Offset)
	}

	cl.Close()
	txn.Close()
	stopWithin(t, e.Stop)
	stopped = true
	cfg.Listeners = nil // the restarted nodes bind the cluster file's addresses
	e, err = StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped = false
	if n := check("after a restart"); n != keys+1 {
		t.Fatalf("after a restart: %d records, want %d", n, keys+1)
	}
}

func hasConfig(rc kadm.ResourceConfig, name, value string) bool {
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// saramaState is readState with a sarama consumer.
func saramaState(t *testing.T, addr, topic string, committed bool, last int64) map[string]string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	if committed {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	state := map[string]string{}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-pc.Messages():
			if m.Value == nil {
				delete(state, string(m.Key))
			} else {
				state[string(m.Key)] = string(m.Value)
			}
			if m.Offset >= last {
				return state
			}
		case err := <-pc.Errors():
			t.Fatalf("sarama: %v", err)
		case <-timeout:
			t.Fatalf("sarama (read_committed %t): offset %d not reached in 30 s; state %v", committed, last, state)
		}
	}
}

// emptyBatches fetches partition 0 of topic whole from its leader and
// counts its record batches without records.
func emptyBatches(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int {
	t.Helper()
	meta, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := meta.Topics[topic].Partitions[0].Leader
	empty := 0
	for off := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, meta.Topics[topic].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = off, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("fetch at %d: %v", off, kerr.ErrorForCode(code))
		}
		raw := resp.Topics[0].Partitions[0].RecordBatches
		if len(raw) == 0 {
			return empty
		}
		for len(raw) > 0 {
			var b kmsg.RecordBatch
			n := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
			if err := b.ReadFrom(raw[:n]); err != nil {
				t.Fatal(err)
			}
			if b.NumRecords == 0 {
				empty++
			}
			off = b.FirstOffset + int64(b.LastOffsetDelta) + 1
			raw = raw[n:]
		}
	}
}
