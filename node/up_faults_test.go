package node

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/internal/historytest"
)

// ownerOf is the running coordinator serving id's partition, and its
// coordinator epoch (-1 when none serves it).
func ownerOf(e *Embedded, id string) (node, epoch int32) {
	p := e.Coordinators[0].Router.PartitionFor(id)
	e.coordsMu.Lock()
	defer e.coordsMu.Unlock()
	for _, co := range e.Coordinators {
		if ep, ok := co.Router.Serving()[p]; ok {
			return co.Node.NodeID, ep
		}
	}
	return -1, 0
}

// idOwnedBy is a transactional id whose partition coordinator node serves.
func idOwnedBy(t *testing.T, e *Embedded, node int32) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("fault-%d", i)
		if n, _ := ownerOf(e, id); n == node {
			return id
		}
	}
	t.Fatalf("no id owned by coordinator %d", node)
	return ""
}

// TestFaultsCoordinatorPauseAndKill: faults on demand against the
// coordinators of `up` in the etcd mode, from kgo's side. A paused
// coordinator (it reads no request and its etcd keepalives stop, as a
// SIGSTOPped process) loses its partitions when its lease lapses, and the
// producer whose id it owned commits through the coordinator that took
// the partition over, at a higher coordinator epoch; resumed, it rejoins.
// A killed coordinator refuses connections; the producer commits through
// its successor; restarted, it serves partitions again. Each phase also
// aborts a transaction; the history checker finds 0 anomalies in the
// final read_committed read (every committed value once, in order, no
// aborted one).
func TestFaultsCoordinatorPauseAndKill(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	paused := idOwnedBy(t, e, 2)
	killed := idOwnedBy(t, e, 1)
	var h checker.History
	run := func(id string, txns int) { runRecorded(t, e.Bootstrap(), id, txns, &h) }
	run(paused, 2)
	run(killed, 2)

	_, epoch := ownerOf(e, paused)
	f, err := e.Faults.Add(faults.Spec{Kind: faults.Pause, Node: 2})
	if err != nil {
		t.Fatal(err)
	}
	// kgo keeps a coordinator that times out (it forgets one only on
	// NOT_COORDINATOR and the like), as it would a stopped Kafka broker:
	// the application's next client finds the new owner.
	waitTakeover(t, e, paused, 2, epoch)
	run(paused, 3)
	if err := e.Faults.Remove(f.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, 2)

	// The epoch before the kill: the takeover may be done before the
	// next line after it runs.
	_, epoch = ownerOf(e, killed)
	k := killCoordinator(t, e, 1)
	waitTakeover(t, e, killed, 1, epoch)
	run(killed, 3)
	if err := e.Faults.Remove(k.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, 1)
	waitOwned(t, e, 12)
	run(paused, 2)
	run(killed, 2)
	checkHistory(t, e.Bootstrap(), h)
}

// killCoordinator adds the up faults' Kill of coordinator id and checks
// that its address refuses connections.
func killCoordinator(t *testing.T, e *Embedded, id int32) faults.Fault {
	t.Helper()
	addr := e.coordinatorByID(id).Node.Addr
	k, err := e.Faults.Add(faults.Spec{Kind: faults.Kill, Node: id})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("killed coordinator %d still accepts connections on %s", id, addr)
	}
	return k
}

// runRecorded runs txns transactions of producer id, each writing one
// value to every partition of orders; every second one is aborted. Each
// goes into h with its outcome as the client saw it.
func runRecorded(t *testing.T, bootstrap, id string, txns int, h *checker.History) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range txns {
		txn := checker.Txn{ID: fmt.Sprintf("%s/%d", id, len(h.Txns)), Producer: id}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(4) {
			v := fmt.Sprintf("%s-%d", txn.ID, p)
			txn.Writes = append(txn.Writes, checker.Write{Value: v, Partition: checker.Partition{Topic: "orders", Partition: p}})
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("%s: %v", txn.ID, err)
			}
		}
		commit := len(h.Txns)%2 == 0
		err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		switch {
		case err != nil && commit:
			txn.Outcome = checker.Unknown
		case err != nil:
			t.Fatalf("%s abort: %v", txn.ID, err)
		case commit:
			txn.Outcome = checker.Committed
		default:
			txn.Outcome = checker.Aborted
		}
		h.Txns = append(h.Txns, txn)
		if err != nil {
			t.Fatalf("%s commit: %v", txn.ID, err)
		}
	}
}

// checkHistory reads every partition of orders read_committed to its end
// and fails on any anomaly the history checker finds.
func checkHistory(t *testing.T, bootstrap string, h checker.History) {
	t.Helper()
	historytest.Check(t, bootstrap, h)
}

// waitTakeover waits until a coordinator other than from serves id's
// partition at an epoch above epoch.
func waitTakeover(t *testing.T, e *Embedded, id string, from, epoch int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, ep := ownerOf(e, id)
		if n >= 0 && n != from && ep > epoch {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: owner %d at epoch %d, want a coordinator other than %d above epoch %d", id, n, ep, from, epoch)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitServes waits until coordinator node serves some partition.
func waitServes(t *testing.T, e *Embedded, node int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if co := e.coordinatorByID(node); co != nil && len(co.Router.Serving()) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator %d serves no partition again", node)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsumerLagMetric: txncoord_consumer_group_lag is a group's lag per
// partition as kafka-consumer-groups.sh computes it: 5 records produced,
// offset 2 committed, lag 3 (the etcd mode: the group coordinator runs on
// its lease's holder, the end offset comes from the leader).
func TestConsumerLagMetric(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 2, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "lagging", offsets); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"group": "lagging", "topic": "orders", "partition": "1"}
	if lag := gatherSum(t, e, "txncoord_consumer_group_lag", want); lag != 3 {
		t.Fatalf("txncoord_consumer_group_lag%v = %v, want 3", want, lag)
	}
}

// TestFaultsLeaderHistory: a kgo transactional producer through faults at
// a leader of `up` (etcd mode): a Produce answered NOT_LEADER_OR_FOLLOWER
// three times (the client retries), then leader 4 killed for two seconds
// while the producer's transactions write to it (its produces are retried
// until it is back on its state, the coordinator's markers too). The
// history checker finds 0 anomalies, and the faults acted.
func TestFaultsLeaderHistory(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	var h checker.History
	produce := int16(0)
	injected, err := e.Faults.Add(faults.Spec{Kind: faults.Error, Node: 3, APIKey: &produce, ErrorCode: 6, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	runRecorded(t, e.Bootstrap(), "leader-faults", 4, &h)
	if n := gatherSum(t, e, "txncoord_faults_injected_total", map[string]string{"kind": "error", "node": "3"}); n != 3 {
		t.Fatalf("the error fault %d acted %v times, want 3", injected.ID, n)
	}
	if _, err := e.Faults.Add(faults.Spec{Kind: faults.Kill, Node: 4, For: faults.Duration(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runRecorded(t, e.Bootstrap(), "leader-faults", 4, &h)
	if took := time.Since(start); took < time.Second {
		t.Fatalf("4 transactions through leader 4 took %s while it was killed for 2s: the kill did not act", took)
	}
	if n := gatherSum(t, e, "txncoord_request_errors_total", map[string]string{"api": "Produce", "error": "NOT_LEADER_FOR_PARTITION"}); n != 3 {
		t.Errorf("txncoord_request_errors_total{api=Produce,error=NOT_LEADER_FOR_PARTITION} (kerr names code 6 so) %v, want the 3 injected", n)
	}
	checkHistory(t, e.Bootstrap(), h)
}
