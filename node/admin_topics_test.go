package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
)

// TestTopicOffsetsAdmin: GET /v1/topics/{name}/offsets answers each
// partition's leader, high watermark and last stable offset as the leaders
// answer ListOffsets: while a kgo transaction is open on partition 0 its
// LSO stays at the transaction's first offset below the HW; after the
// commit (its marker written) LSO and HW are equal past the marker.
func TestTopicOffsetsAdmin(t *testing.T) {
	_, e := startTwoLeadersAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.TransactionalID("offsets-txn"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("plain")}).FirstErr(); err == nil {
		t.Fatal("a transactional client produced outside a transaction")
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	api := admin.NewClient(e.Admin.URL())
	offsets, err := api.TopicOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(offsets) != 4 {
		t.Fatalf("offsets of orders: %+v, want 4 partitions", offsets)
	}
	p0 := offsets[0]
	if p0.Partition != 0 || p0.HighWatermark != 3 || p0.LastStableOffset != 0 || p0.Leader < 1 {
		t.Fatalf("partition 0 with a transaction open: %+v, want HW 3, LSO 0 and its leader", p0)
	}
	if p1 := offsets[1]; p1.HighWatermark != 0 || p1.LastStableOffset != 0 {
		t.Fatalf("partition 1, empty: %+v", p1)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The commit's answer precedes its marker at the leader: wait for it
	// (bounded), the LSO moves past the marker.
	deadline := time.Now().Add(20 * time.Second)
	for {
		offsets, err = api.TopicOffsets(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if p0 = offsets[0]; p0.HighWatermark == 4 && p0.LastStableOffset == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 after the commit: %+v, want HW = LSO = 4 (3 records and the marker)", p0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := api.TopicOffsets(ctx, "missing"); err == nil {
		t.Fatal("offsets of a missing topic: no error, want 404")
	}
}
