package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestInProcessCallsCounted: in `txncoord up` the coordinator's markers
// reach the leaders in-process, never over a connection; a committed
// transaction still shows its WriteTxnMarkers in the leader's per-API
// series, as it would from a coordinator in a process of its own.
func TestInProcessCallsCounted(t *testing.T) {
	_, e := startTwoLeaders(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.TransactionalID("counted"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The markers are sent after EndTxn is answered: wait for the
	// transaction to complete at both leaders.
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := gatherSum(t, e, "txncoord_requests_total", map[string]string{"api": "WriteTxnMarkers", "node": "1"}) *
			gatherSum(t, e, "txncoord_requests_total", map[string]string{"api": "WriteTxnMarkers", "node": "2"})
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no WriteTxnMarkers counted at leaders 1 and 2 in txncoord_requests_total: the in-process markers are not counted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := gatherSum(t, e, "txncoord_request_duration_seconds", map[string]string{"api": "WriteTxnMarkers", "node": "1"}); n == 0 {
		t.Error("no WriteTxnMarkers latency sample at leader 1")
	}
}
