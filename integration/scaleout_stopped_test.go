package integration

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScaleoutStoppedOwnerRegistration reproduces how long a leader keeps
// waiting on a coordinator that stopped answering (SIGSTOP: its
// connections stay open, nothing answers) after its partitions moved.
//
// A kgo producer commits once through its id's owner, so the leader of the
// topic's partition knows that owner. The owner is SIGSTOPped; once
// another coordinator owns the id's partition (about the lease TTL, 2 s),
// the producer begins a new transaction and produces one record. Measured
// at e845650: the produce succeeds 27 s after the SIGSTOP (25 s for the
// produce itself), while the
// partition was served elsewhere after 2 s (issue 19 wants takeover within
// 10 s):
//   - 15 s: the leader sends the registration (AddPartitionsToTxn) to the
//     owner it knew and waits for it until the registrar's timeout
//     (leaderstub/coordinator.go, 15 s), then answers NOT_ENOUGH_REPLICAS;
//     it has then forgotten that owner and finds the new one at kgo's
//     retry;
//   - 10 s: kgo refreshes its metadata after the retriable error and may
//     ask the stopped node (every node of the cluster file is in Metadata,
//     live or not; Kafka leaves a fenced broker out), which times out
//     (kgo's 10 s request overhead).
//
// The same wait hits a client's FindCoordinator that a leader forwards to
// the stopped node (10 s, once the node's 5 s "suspect" mark has expired),
// and a client whose coordinator was the stopped node waits for its own
// timeouts (kgo retries EndTxn there: 4 x 10 s). With a SIGKILLed owner
// the connections are refused and none of this costs anything.
//
// Behind TXNCOORD_SCALEOUT_REPRO=1: it fails until leaders bound a request
// to one coordinator well below the registration timeout (or ask the
// others who owns the partition meanwhile), and Metadata leaves out
// coordinators that hold no lease.
func TestScaleoutStoppedOwnerRegistration(t *testing.T) {
	if os.Getenv("TXNCOORD_SCALEOUT_REPRO") != "1" {
		t.Skip("reproduction of an open product issue: set TXNCOORD_SCALEOUT_REPRO=1 to run (about 40 s)")
	}
	const topic = "scale-stopped"
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: 1}, LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 2*time.Minute)
	before := sc.waitBalanced(ctx, 0, 1, 2)
	const owner = 1
	var id string
	for i := 0; ; i++ {
		if id = fmt.Sprintf("stopped-%d", i); before.nodeOf[sc.partitionOf(id)] == owner {
			break
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.TransactionalID(id),
		kgo.TransactionTimeout(time.Minute), kgo.RecordDeliveryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Not closed: its last transaction's EndTxn would go to the stopped
	// node; the processes go at the end of the test.
	_ = cl
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	stopAt := time.Now()
	sc.signal(owner, syscall.SIGSTOP)
	t.Cleanup(func() { sc.Coords[owner].cmd.Process.Signal(syscall.SIGCONT) })
	movedAt := sc.waitMoved(ctx, 0, owner, before)
	t.Logf("%s's partition owned by another coordinator %v after the SIGSTOP of its owner %d", id, movedAt.Sub(stopAt).Round(time.Millisecond), owner)
	// Only the produce is timed: it succeeds once the leader has
	// registered the partition with the id's new owner. (The commit
	// would then go to the stopped node: kgo keeps the coordinator it
	// found until that one answers NOT_COORDINATOR.)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceAt := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	t.Logf("a record of %s produced %v after the SIGSTOP (the produce took %v)", id, time.Since(stopAt).Round(time.Millisecond), time.Since(produceAt).Round(time.Millisecond))
	if d := time.Since(stopAt); d > 10*time.Second {
		t.Errorf("the leader registered %s's partition only %v after the SIGSTOP of its owner (the partition moved after %v): it waited on the stopped coordinator", id, d.Round(time.Millisecond), movedAt.Sub(stopAt).Round(time.Millisecond))
	}
}
