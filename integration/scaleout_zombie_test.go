package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/markersender"
)

// TestScaleoutZombie is the zombie coordinator: the owner of busy
// partitions is SIGSTOPped with commit markers to leader 3 in flight (held
// by the proxy in front of leader 3 that only this coordinator uses: the
// requests that carry a probe's marker, below), past its lease (TTL + 2 s). The others take its partitions at higher
// coordinator epochs, finish its Prepare transactions and serve its ids.
// Then its held markers are delivered late, and the leader's answer is the
// one Kafka's order of checks gives (ProducerAppendInfo.appendEndTxnMarker:
// the producer epoch first, then the coordinator epoch):
//
//   - fenced (52): three probe producers the zombie owns (one TV2, two
//     TV1), each committed one transaction to a leader-3 partition whose
//     marker the zombie holds; the new owner finished it (its marker
//     raised the partition's coordinator epoch for the producer) and the
//     probes stay idle. The zombie's marker passes the epoch check (TV2:
//     the same epoch and no open transaction is KAFKA-19999's idempotent
//     retry; TV1: the legacy >=) and fails the coordinator epoch: 52.
//   - the other order (47 first): the TV2 probe opens its next
//     transaction on the partition, at the marker's epoch (the one its
//     EndTxn bumped to), and a new client of the first TV1 probe's id
//     takes over its producer (InitProducerId: the epoch moves past the
//     marker's) and opens one too. Both markers fail the producer epoch
//     check, INVALID_PRODUCER_EPOCH (47), though their coordinator epoch
//     is stale as well; the idle TV1 probe still gets 52.
//
// Holding the new owner's markers instead would not make the case: the
// leader would not know the new coordinator epoch and would accept the
// zombie's marker (the same decision, so harmless, as in Kafka).
//
// Then the held markers are released on the zombie's own connection and
// the zombie gets SIGCONT: it must change nothing (0 anomalies, every
// transaction finished), its marker sender sees the leader's 52 (its
// /metrics: the idle TV1 probe's marker is fenced whatever the timing,
// and the zombie still waits for it however long it was stopped, its
// --marker-request-timeout being longer than the test), and it rejoins
// as a follower: it owns partitions again, at new epochs, and serves
// them.
func TestScaleoutZombie(t *testing.T) {
	const topic, partitions = "scale-zombie", 6
	// The probes write a topic of their own: the workload's checker
	// knows only the workload's values.
	const probeTopic = "scale-zombie-probes"
	const ttl = 2 * time.Second
	// The zombie's held markers must still be waited for when it wakes,
	// however long the takeover took: a marker request timeout past the
	// test's own.
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions, probeTopic: 3}, LeaseTTL: ttl, ProxyLeader: 3,
		MarkerRequestTimeout: 5 * time.Minute})
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

	// The probes: ids the zombie owns, one record each to a partition of
	// leader 3, committed while the zombie's markers to leader 3 are held.
	part := sc.partitionLedBy(probeTopic, 3, 3)
	probes := []*zombieProbe{
		sc.newZombieProbe(before, zombie, "zombie-probe-tv2", 2, probeTopic, part),
		sc.newZombieProbe(before, zombie, "zombie-probe-tv1", 1, probeTopic, part),
		sc.newZombieProbe(before, zombie, "zombie-probe-tv1-idle", 1, probeTopic, part),
	}
	tv2, tv1 := probes[0], probes[1]
	// Only the zombie's requests that carry a probe's marker are held:
	// held whole, the first of the workload's would keep the probes'
	// queued behind it on the zombie's one connection to leader 3.
	wtm := int16(kmsg.WriteTxnMarkers)
	proxy := sc.Proxies[zombie]
	pids := map[int64]bool{}
	for _, p := range probes {
		p.produce(ctx, "first")
		pid, _, err := p.cl.ProducerID(ctx)
		if err != nil {
			t.Fatalf("%s: producer id: %v", p.id, err)
		}
		p.pid, pids[pid] = pid, true
	}
	proxy.HoldIf(wtm, func(r kmsg.Request) bool {
		return slices.ContainsFunc(r.(*kmsg.WriteTxnMarkersRequest).Markers, func(m kmsg.WriteTxnMarkersRequestMarker) bool { return pids[m.ProducerID] })
	})
	// The idle TV1 probe commits first: its marker is in the held
	// request, the one the zombie is answered for when it wakes (the
	// others queued behind it are forgotten with the partitions it lost).
	idle := probes[2]
	for _, p := range []*zombieProbe{idle, tv2, tv1} {
		if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("%s: commit: %v", p.id, err)
		}
		if p == idle {
			if _, err := proxy.WaitCaptured(ctx, wtm, 1); err != nil {
				t.Fatalf("waiting for %s's marker to be held: %v", p.id, err)
			}
		}
	}
	sc.waitHeldMarkers(ctx, zombie, proxy, probes)
	if !slices.ContainsFunc(idle.held.Request.(*kmsg.WriteTxnMarkersRequest).Markers, func(m kmsg.WriteTxnMarkersRequestMarker) bool { return m.ProducerID == idle.pid }) {
		t.Fatalf("the held request %+v has no marker of %s (pid %d)", idle.held.Request, idle.id, idle.pid)
	}
	stopAt := time.Now()
	sc.signal(zombie, syscall.SIGSTOP)
	t.Logf("SIGSTOP of coordinator %d (owner of %d partitions and of ids %v), its markers to leader 3 held (the probes': %s, %s, %s)",
		zombie, len(before.byNode[zombie]), zombieIDs, describeMarker(probes[0].marker), describeMarker(probes[1].marker), describeMarker(probes[2].marker))

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

	// Fenced: the new owner finished the probes' transactions; the
	// leader holds its coordinator epoch for them, no transaction open.
	for _, p := range probes {
		sc.waitTxnState(ctx, other, p.id, "CompleteCommit")
		p.state = p.stateAtLeader(ctx, t, adm)
		if p.state.CoordinatorEpoch <= p.marker.CoordinatorEpoch || p.state.CurrentTxnStartOffset != -1 || p.state.ProducerEpoch != p.marker.ProducerEpoch {
			t.Fatalf("%s at leader 3 before the replay: %+v; want the new owner's coordinator epoch (above the zombie's %d), epoch %d, no open transaction",
				p.id, p.state, p.marker.CoordinatorEpoch, p.marker.ProducerEpoch)
		}
	}
	t.Logf("the probes' transactions finished by their new owners at +%v", time.Since(stopAt).Round(time.Millisecond))
	fenced52, epoch47 := kerr.TransactionCoordinatorFenced.Code, kerr.InvalidProducerEpoch.Code
	replayProbes(ctx, t, proxy, probes, map[*zombieProbe]int16{probes[0]: fenced52, probes[1]: fenced52, probes[2]: fenced52})

	// The other order: a transaction open on the partition at the
	// marker's epoch (TV2), and past it (TV1, a new client of the id).
	tv1.renew()
	for _, p := range []*zombieProbe{tv2, tv1} {
		p.produce(ctx, "second")
		t.Logf("%s: next transaction open at +%v", p.id, time.Since(stopAt).Round(time.Millisecond))
		st := p.stateAtLeader(ctx, t, adm)
		if st.CurrentTxnStartOffset < 0 || (p == tv2) != (st.ProducerEpoch == p.marker.ProducerEpoch) || st.ProducerEpoch < p.marker.ProducerEpoch {
			t.Fatalf("%s at leader 3 after its next produce: %+v; want a transaction open at epoch %d (TV2) or above (TV1 after InitProducerId)",
				p.id, st, p.marker.ProducerEpoch)
		}
		p.state = st
	}
	replayProbes(ctx, t, proxy, probes, map[*zombieProbe]int16{tv2: epoch47, tv1: epoch47, probes[2]: fenced52})

	// SIGCONT, with the held markers released on its own connection.
	proxy.Release(wtm)
	contAt := time.Now()
	sc.signal(zombie, syscall.SIGCONT)
	t.Logf("SIGCONT of coordinator %d after %v stopped", zombie, contAt.Sub(stopAt).Round(time.Millisecond))
	rejoined := sc.waitBalanced(ctx, 0, 1, 2)
	// The probes' second transactions end now: the TV2 client still
	// knows the zombie as its coordinator, which answers again (and
	// sends it to the owner).
	for _, p := range []*zombieProbe{tv2, tv1} {
		if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("%s: second commit: %v", p.id, err)
		}
	}
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

	// What the zombie saw of its late markers: the idle TV1 probe's is
	// fenced (52) whatever the timing, the others 52 or 47.
	fenced, err := sc.waitMetricAbove(ctx, zombie, fencedMetric, fencedBefore, 15*time.Second)
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
	// coordinator resigns it (removeMarkersForTxnTopicPartition).
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

// zombieProbe is a transactional producer the test drives step by step:
// an id of the zombie's, writing to one partition of leader 3.
type zombieProbe struct {
	t         testing.TB
	id        string
	pid       int64
	opts      []kgo.Opt
	cl        *kgo.Client
	topic     string
	partition int32
	// held is the zombie's first held request, the header its marker is
	// replayed under; marker is the zombie's marker of the probe's first
	// transaction.
	held   faultproxy.Captured
	marker kmsg.WriteTxnMarkersRequestMarker
	state  kadm.DescribedProducer
}

// newZombieProbe makes a probe of transaction version tv (1: kgo capped
// at Kafka 3.9, which sends EndTxn v4) under an id prefix-N whose
// __transaction_state partition node owns.
func (sc *scaleCluster) newZombieProbe(o owners, node int32, prefix string, tv int, topic string, partition int32) *zombieProbe {
	sc.t.Helper()
	id := ""
	for n := 0; id == ""; n++ {
		if c := fmt.Sprintf("%s-%d", prefix, n); o.nodeOf[sc.partitionOf(c)] == node {
			id = c
		}
	}
	p := &zombieProbe{t: sc.t, id: id, topic: topic, partition: partition,
		opts: []kgo.Opt{kgo.SeedBrokers(sc.Bootstrap()...), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionTimeout(60 * time.Second)}}
	if tv == 1 {
		p.opts = append(p.opts, kgo.MaxVersions(kversion.V3_9_0()))
	}
	p.renew()
	sc.t.Cleanup(func() { p.cl.Close() })
	return p
}

// renew replaces the probe's client with a new one of the same id, which
// takes the producer over with InitProducerId at its first transaction.
func (p *zombieProbe) renew() {
	p.t.Helper()
	if p.cl != nil {
		p.cl.Close()
	}
	cl, err := kgo.NewClient(p.opts...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cl = cl
}

// produce begins a transaction and writes one record to the probe's
// partition.
func (p *zombieProbe) produce(ctx context.Context, what string) {
	p.t.Helper()
	if err := p.cl.BeginTransaction(); err != nil {
		p.t.Fatalf("%s: begin: %v", p.id, err)
	}
	r := &kgo.Record{Topic: p.topic, Partition: p.partition, Value: []byte(p.id + "-" + what)}
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		p.t.Fatalf("%s: produce: %v", p.id, err)
	}
}

// stateAtLeader is the probe's producer state at its partition's leader
// (DescribeProducers).
func (p *zombieProbe) stateAtLeader(ctx context.Context, t testing.TB, adm *kadm.Client) kadm.DescribedProducer {
	t.Helper()
	d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{p.topic: {p.partition: {}}})
	if err != nil {
		t.Fatalf("DescribeProducers %s/%d: %v", p.topic, p.partition, err)
	}
	dpp := d[p.topic].Partitions[p.partition]
	dp, ok := dpp.ActiveProducers[p.marker.ProducerID]
	if !ok {
		t.Fatalf("DescribeProducers %s/%d: no producer %d (%s): %+v", p.topic, p.partition, p.marker.ProducerID, p.id, dpp)
	}
	return dp
}

// waitHeldMarkers waits until the proxy holds the zombie's first request
// with a probe's marker and the zombie lists every probe's marker as
// pending. Each probe keeps that request (the header to replay under) and
// its marker: the one in the request if it is there, else the one the
// zombie would send, built from its /v1/markers; the zombie has one
// request in flight per leader, so the others queue behind the held one.
func (sc *scaleCluster) waitHeldMarkers(ctx context.Context, zombie int32, proxy *faultproxy.Proxy, probes []*zombieProbe) {
	t := sc.t
	t.Helper()
	held, err := proxy.WaitCaptured(ctx, int16(kmsg.WriteTxnMarkers), 1)
	if err != nil {
		t.Fatalf("waiting for the probes' held markers: %v", err)
	}
	first := held[0]
	inHeld := map[int64]kmsg.WriteTxnMarkersRequestMarker{}
	for _, m := range first.Request.(*kmsg.WriteTxnMarkersRequest).Markers {
		inHeld[m.ProducerID] = m
	}
	pending := map[int64]markersender.PendingTxn{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var markers []markersender.PendingTxn
		if err := sc.getJSON(ctx, zombie, "/v1/markers", &markers); err != nil {
			t.Fatal(err)
		}
		clear(pending)
		for _, m := range markers {
			pending[m.ProducerID] = m
		}
		all := true
		for _, p := range probes {
			_, ok := pending[p.pid]
			all = all && ok
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zombie never listed every probe's marker as pending: %+v", markers)
		}
	}
	for _, p := range probes {
		pt := pending[p.pid]
		built := kmsg.NewWriteTxnMarkersRequestMarker()
		built.ProducerID, built.ProducerEpoch = pt.ProducerID, pt.ProducerEpoch
		built.Committed = pt.Result == "COMMIT"
		built.CoordinatorEpoch = pt.CoordinatorEpoch
		built.TransactionVersion = pt.TransactionVersion
		if first.Version < 2 {
			built.TransactionVersion = 0
		}
		for _, pp := range pt.Partitions {
			if pp.Topic != p.topic || pp.Partition != p.partition {
				t.Fatalf("%s: the zombie's pending marker is for %s/%d, want %s/%d: %+v", p.id, pp.Topic, pp.Partition, p.topic, p.partition, pt)
			}
		}
		built.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: p.topic, Partitions: []int32{p.partition}}}
		if !built.Committed {
			t.Fatalf("%s: the zombie's pending marker is an abort: %+v", p.id, pt)
		}
		if m, ok := inHeld[p.pid]; ok && describeMarker(m) != describeMarker(built) {
			t.Fatalf("%s: the held marker %s is not the one the zombie lists as pending, %s", p.id, describeMarker(m), describeMarker(built))
		}
		p.held, p.marker = first, built
	}
}

// replayProbes delivers each probe's held marker alone (the zombie's
// request less the other producers') to leader 3, on a new connection,
// and checks the answer against want.
func replayProbes(ctx context.Context, t testing.TB, proxy *faultproxy.Proxy, probes []*zombieProbe, want map[*zombieProbe]int16) {
	t.Helper()
	for _, p := range probes {
		req := *p.held.Request.(*kmsg.WriteTxnMarkersRequest)
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{p.marker}
		one, err := p.held.WithRequest(&req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := proxy.Replay(ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		code := markerCode(t, resp, p.marker.ProducerID, p.topic, p.partition)
		t.Logf("%s: the zombie's marker %s delivered late (leader 3 had %+v) answered %d (%v)", p.id, describeMarker(p.marker), p.state, code, kerr.ErrorForCode(code))
		if code != want[p] {
			t.Errorf("%s: the zombie's marker %s answered %d (%v), want %d (%v)", p.id, describeMarker(p.marker), code, kerr.ErrorForCode(code), want[p], kerr.ErrorForCode(want[p]))
		}
	}
}

// partitionLedBy is a partition of topic whose leader is node.
func (sc *scaleCluster) partitionLedBy(topic string, partitions, node int32) int32 {
	sc.t.Helper()
	v := cluster.NewView(sc.file)
	for p := range partitions {
		if l, ok := v.LeaderOf(topic, p); ok && l.NodeID == node {
			return p
		}
	}
	sc.t.Fatalf("no partition of %s is led by node %d", topic, node)
	return -1
}

// waitTxnState waits until coordinator via's admin API shows id in state.
func (sc *scaleCluster) waitTxnState(ctx context.Context, via int32, id, state string) {
	sc.t.Helper()
	var last admin.Txn
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = sc.getJSON(ctx, via, "/v1/transactions/"+id, &last); err == nil && last.State == state {
			return
		}
	}
	sc.t.Fatalf("%s never reached %s at coordinator %d: last %+v, %v", id, state, via, last, err)
}

// waitMetricAbove waits up to d for node's metric to rise above was and
// returns its last value.
func (sc *scaleCluster) waitMetricAbove(ctx context.Context, node int32, metric string, was float64, d time.Duration) (float64, error) {
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		v, err := sc.metric(ctx, node, metric)
		if err != nil || v > was || time.Now().After(deadline) {
			return v, err
		}
	}
}

// describeMarker is one marker in one line.
func describeMarker(m kmsg.WriteTxnMarkersRequestMarker) string {
	s := fmt.Sprintf("[pid %d epoch %d commit=%v coordinator epoch %d tv %d", m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion)
	for _, tp := range m.Topics {
		s += fmt.Sprintf(" %s %v", tp.Topic, tp.Partitions)
	}
	return s + "]"
}
