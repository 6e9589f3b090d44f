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
// its successor; restarted, it serves partitions again. Every committed
// record is read once, read_committed.
func TestFaultsCoordinatorPauseAndKill(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	paused := idOwnedBy(t, e, 2)
	killed := idOwnedBy(t, e, 1)
	commitAll(t, e.Bootstrap(), []string{paused, killed}, 1, 0)

	_, epoch := ownerOf(e, paused)
	f, err := e.Faults.Add(faults.Spec{Kind: faults.Pause, Node: 2})
	if err != nil {
		t.Fatal(err)
	}
	// kgo keeps a coordinator that times out (it forgets one only on
	// NOT_COORDINATOR and the like), as it would a stopped Kafka broker:
	// the application's next client finds the new owner.
	waitTakeover(t, e, paused, 2, epoch)
	commitAll(t, e.Bootstrap(), []string{paused}, 2, 1)
	if err := e.Faults.Remove(f.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, 2)

	addr := e.coordinatorByID(1).Node.Addr
	k, err := e.Faults.Add(faults.Spec{Kind: faults.Kill, Node: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("killed coordinator 1 still accepts connections on %s", addr)
	}
	_, epoch = ownerOf(e, killed)
	waitTakeover(t, e, killed, 1, epoch)
	commitAll(t, e.Bootstrap(), []string{killed}, 2, 1)
	if err := e.Faults.Remove(k.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, 1)
	waitOwned(t, e, 12)
	commitAll(t, e.Bootstrap(), []string{paused, killed}, 1, 3)
	readCommitted(t, e.Bootstrap(), (1+2+1)*2*4)
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
