package integration

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/markersender"
)

// TestScaleoutZombie is issue 19's zombie: the owner of busy partitions is
// SIGSTOPped with a commit marker to leader 3 in flight (held by the proxy
// in front of leader 3 that only this coordinator uses), past its lease
// (TTL + 2 s). The others take its partitions at higher coordinator
// epochs, finish its Prepare transactions and serve its ids. Its held
// marker, sent to the leader now, is refused with
// TRANSACTION_COORDINATOR_FENCED (52). Then the held marker is released
// on the zombie's own connection and the zombie gets SIGCONT: it must
// change nothing (0 anomalies, every transaction finished), its marker
// sender sees the leader's 52 (its /metrics), and it rejoins as a
// follower: it owns partitions again, at new epochs, and serves them.
func TestScaleoutZombie(t *testing.T) {
	const topic, partitions = "scale-zombie", 6
	const ttl = 2 * time.Second
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions}, LeaseTTL: ttl, ProxyLeader: 3})
	pc := sc.target()
	adm := pc.admin()
	ctx := testCtx(t, 3*time.Minute)
	drivers := []string{"kgo-tv2", "kgo-tv2", "kgo-tv2", "sarama", "sarama"}
	var ids []string
	for i, d := range drivers {
		ids = append(ids, fmt.Sprintf("crash-%s-%d", d, i))
	}
	run := startCrashWorkload(t, pc, topic, partitions, drivers, 8, 0)
	waitProgress(ctx, t, adm, 150, topic)

	// The zombie: the coordinator of the most workload ids.
	before := sc.waitBalanced(ctx, 0, 1, 2)
	perNode := map[int32][]string{}
	for _, id := range ids {
		n := before.nodeOf[sc.partitionOf(id)]
		perNode[n] = append(perNode[n], id)
	}
	zombie := int32(0)
	for n := range int32(scaleCoordinators) {
		if len(perNode[n]) > len(perNode[zombie]) {
			zombie = n
		}
	}
	other := (zombie + 1) % scaleCoordinators
	zombieIDs := perNode[zombie]
	fencedMetric := `txncoord_marker_errors_total{error="TRANSACTION_COORDINATOR_FENCED"}`
	fencedBefore, err := sc.metric(ctx, zombie, fencedMetric)
	if err != nil {
		t.Fatal(err)
	}

	// Hold the zombie's markers to leader 3 until one is caught.
	wtm := int16(kmsg.WriteTxnMarkers)
	proxy := sc.Proxies[zombie]
	proxy.Hold(wtm)
	held, err := proxy.WaitCaptured(ctx, wtm, 1)
	if err != nil {
		t.Fatal(err)
	}
	heldReq := held[0].Request.(*kmsg.WriteTxnMarkersRequest)
	stopAt := time.Now()
	sc.signal(zombie, syscall.SIGSTOP)
	t.Logf("SIGSTOP of coordinator %d (owner of %d partitions and of ids %v), its marker to leader 3 held: %s",
		zombie, len(before.byNode[zombie]), zombieIDs, describeMarkers(heldReq))

	// The others take its partitions, at higher epochs; the ids of the
	// other coordinators go on committing meanwhile.
	watch := sc.watchCommits(ctx, adm, topic)
	movedAt := sc.waitMoved(ctx, other, zombie, before)
	after, err := sc.ownershipAt(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(after.live, zombie) {
		t.Errorf("coordinator %d still listed live by %d after its partitions moved", zombie, other)
	}
	t.Logf("zombie's partitions owned by others after %v (%s, were %s)", movedAt.Sub(stopAt).Round(time.Millisecond),
		epochsOf(after, before.byNode[zombie]), epochsOf(before, before.byNode[zombie]))
	var othersIDs []string
	for _, id := range ids {
		if !slices.Contains(zombieIDs, id) {
			othersIDs = append(othersIDs, id)
		}
	}
	goOn := watch.waitFor(ctx, othersIDs...)
	t.Logf("while the zombie is stopped, the other coordinators' ids committed new transactions: %s", since(goOn, stopAt))
	// Stopped past its lease in any case (TTL + 2 s).
	if d := ttl + 2*time.Second - time.Since(stopAt); d > 0 {
		time.Sleep(d)
	}

	// The zombie's marker, delivered now, is fenced by the new epoch.
	resp, err := proxy.Replay(ctx, held[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range heldReq.Markers {
		for _, tp := range m.Topics {
			for _, p := range tp.Partitions {
				if code := markerCode(t, resp, m.ProducerID, tp.Topic, p); code != kerr.TransactionCoordinatorFenced.Code {
					t.Errorf("the zombie's marker (pid %d, %s/%d, coordinator epoch %d) answered %d (%v), want TRANSACTION_COORDINATOR_FENCED (52)",
						m.ProducerID, tp.Topic, p, m.CoordinatorEpoch, code, kerr.ErrorForCode(code))
				}
			}
		}
	}

	// SIGCONT, with the held marker released on its own connection.
	proxy.Release(wtm)
	contAt := time.Now()
	sc.signal(zombie, syscall.SIGCONT)
	t.Logf("SIGCONT of coordinator %d after %v stopped", zombie, contAt.Sub(stopAt).Round(time.Millisecond))
	rejoined := sc.waitBalanced(ctx, 0, 1, 2)
	back := watch.waitFor(ctx, zombieIDs...)
	t.Logf("the zombie's ids committed new transactions: %s (SIGCONT at +%v)", since(back, stopAt), contAt.Sub(stopAt).Round(time.Millisecond))
	t.Logf("coordinator %d rejoined after %v: owns %s", zombie, time.Since(contAt).Round(time.Millisecond), epochsOf(rejoined, rejoined.byNode[zombie]))
	for _, p := range rejoined.byNode[zombie] {
		if was := before.owner[p].Epoch; rejoined.owner[p].Epoch <= was {
			t.Errorf("partition %d owned again by the zombie at epoch %d, not above its epoch before the SIGSTOP (%d)", p, rejoined.owner[p].Epoch, was)
		}
	}
	progress := endOffsets(ctx, adm, topic)
	waitProgress(ctx, t, adm, progress+150, topic)

	// What the zombie saw of its late marker.
	fenced, err := sc.metric(ctx, zombie, fencedMetric)
	if err != nil {
		t.Fatal(err)
	}
	var markers []markersender.PendingTxn
	if err := sc.getJSON(ctx, zombie, "/v1/markers", &markers); err != nil {
		t.Fatal(err)
	}
	t.Logf("zombie after SIGCONT: %s %v (was %v); proxy %+v; its pending markers: %+v", fencedMetric, fenced, fencedBefore, proxy.Counts(wtm), markers)
	// Writes it had in flight at the SIGSTOP, if any, were refused by
	// etcd's fence (the log line of coordinator.finish).
	zlog, _ := os.ReadFile(sc.Coords[zombie].log)
	t.Logf("zombie's log: %d transaction log writes refused as another coordinator's, %d lines 'ownership: dropped every partition'",
		strings.Count(string(zlog), "transaction log write refused"), strings.Count(string(zlog), "ownership: dropped every partition"))
	if fenced <= fencedBefore {
		t.Errorf("the zombie's marker sender saw no TRANSACTION_COORDINATOR_FENCED (%s: %v)", fencedMetric, fenced)
	}
	// Its fenced markers must not stay listed as stuck (and counted in
	// txncoord_marker_stuck_transactions) once the new owner finished
	// those transactions: a coordinator that loses a partition forgets its
	// markers, as Kafka drops a partition's queued markers when the
	// coordinator resigns it (removeMarkersForTxnTopicPartition; 92dfc22).
	for _, m := range markers {
		if !m.Stuck {
			continue
		}
		p := sc.partitionOf(m.TransactionalID)
		t.Errorf("the zombie still lists %s (coordinator epoch %d) as stuck after SIGCONT, its partition %d now at epoch %d: %s",
			m.TransactionalID, m.CoordinatorEpoch, p, rejoined.owner[p].Epoch, m.Reason)
	}

	run.stopAndFinish(t, sc, "a SIGSTOP past the lease and SIGCONT of the owning coordinator")
}

// describeMarkers is a WriteTxnMarkers request in one line.
func describeMarkers(req *kmsg.WriteTxnMarkersRequest) string {
	s := ""
	for _, m := range req.Markers {
		for _, tp := range m.Topics {
			s += fmt.Sprintf("[pid %d epoch %d commit=%v coordinator epoch %d %s %v] ", m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, tp.Topic, tp.Partitions)
		}
	}
	return s
}
