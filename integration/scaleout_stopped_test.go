package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScaleoutStoppedOwnerRegistration: how long a leader keeps waiting on
// a coordinator that stopped answering (SIGSTOP: its connections stay open,
// nothing answers) after its partitions moved.
//
// A kgo producer commits once through its id's owner, so the leader of the
// topic's partition knows that owner. The owner is SIGSTOPped; once
// another coordinator owns the id's partition (about the lease TTL, 2 s),
// the producer begins a new transaction and produces one record, which
// must succeed within 10 s of the SIGSTOP (issue 19's takeover bound).
//
// At e845650 the produce succeeded 27 s after the SIGSTOP: the leader sent
// the registration to the owner it knew and waited for it until the
// registrar's timeout (15 s), and kgo's metadata refresh could then ask
// the stopped node, listed in Metadata although it held no lease (kgo's
// 10 s request overhead). Now a leader bounds each send to one
// coordinator (4 s, coordclient.Routed), asks another one as well when a
// FindCoordinator is not answered within 2 s, and Metadata lists only the
// coordinators holding a lease: at 3b0ab73 the record was produced 6.1 s
// after the SIGSTOP (the partition moved after 2.1 s).
func TestScaleoutStoppedOwnerRegistration(t *testing.T) {
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
