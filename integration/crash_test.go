package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
)

// Crash suites with separate processes (procs_test.go): SIGKILL the
// coordinator during commits and a leader, restart each on its data dir,
// and check the whole history with zero anomalies (unknown-outcome
// transactions may resolve either way, all or nothing). And the old
// coordinator's delayed marker, fenced by the new coordinator epoch (52).

// crashRun is a workload of several producers running until stopped, with
// bounces in between, and the final check.
type crashRun struct {
	pc         *procCluster
	topic      string
	partitions int32
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	history    checker.History
	errs       []error
}

// startCrashWorkload starts one producer per driver name. txns = 0 runs
// until stop.
func startCrashWorkload(t testing.TB, pc *procCluster, topic string, partitions int32, drivers []string, txnSize, txns int) *crashRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &crashRun{pc: pc, topic: topic, partitions: partitions, cancel: cancel}
	var ps []checker.Partition
	for p := int32(0); p < partitions; p++ {
		ps = append(ps, checker.Partition{Topic: topic, Partition: p})
	}
	for i, d := range drivers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			id := fmt.Sprintf("crash-%s-%d", d, i)
			h, err := workload.Drivers[d](ctx, workload.Config{
				Bootstrap: pc.Bootstrap(), TransactionalID: id, Partitions: ps,
				TxnSize: txnSize, Txns: txns, AbortP: 0.33, Seed: int64(i + 11),
				// Short enough that an operation caught by a crash
				// gives up and the loop starts over with a new client.
				OpTimeout: 15 * time.Second, TxnTimeout: 20 * time.Second, MaxFailures: 1000,
				Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel),
			})
			r.mu.Lock()
			r.history.Merge(h)
			if err != nil {
				r.errs = append(r.errs, fmt.Errorf("%s: %w", id, err))
			}
			r.mu.Unlock()
		}()
	}
	t.Cleanup(func() { r.cancel(); r.wg.Wait() })
	return r
}

// stopAndCheck stops the producers, checks the history and fails on any
// anomaly, or unless both commits and aborts happened; after names the
// faults injected, for the log.
func (r *crashRun) stopAndCheck(t testing.TB, after string) {
	t.Helper()
	rep := r.finish(t, true)
	t.Logf("after %s:\n%s", after, rep.Table())
	if rep.Anomalies() != 0 {
		t.Fatalf("anomalies after recovery: %s", rep.Summary())
	}
	if rep.TxnsCommitted == 0 || rep.TxnsAborted == 0 {
		t.Fatalf("want commits and aborts: %s", rep.Summary())
	}
}

// finish stops the producers (waits for them when they run a fixed number
// of transactions), reads everything back and checks it.
func (r *crashRun) finish(t testing.TB, stop bool) *checker.Report {
	t.Helper()
	if stop {
		r.cancel()
	}
	r.wg.Wait()
	r.cancel()
	for _, err := range r.errs {
		t.Errorf("workload: %v", err)
	}
	var ps []checker.Partition
	for p := int32(0); p < r.partitions; p++ {
		ps = append(ps, checker.Partition{Topic: r.topic, Partition: p})
	}
	ctx := testCtx(t, 2*time.Minute)
	reads, err := workload.ReadCommitted(ctx, r.pc.Bootstrap(), ps)
	if err != nil {
		t.Fatalf("final read: %v", err)
	}
	rep, err := checker.Check(r.history, reads)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCrashCoordinatorAndLeader: producers commit and abort continuously
// while the coordinator is SIGKILLed during a commit (a transaction in
// PrepareCommit, its markers slowed down by the proxy in front of leader 1)
// and restarted, then a leader; zero anomalies, and the coordinator epoch
// the leaders hold grows.
func TestCrashCoordinatorAndLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	const topic, partitions = "crash", 6
	pc := startProcCluster(t, "4.2", []string{"4.2", "4.2"}, map[string]int32{topic: partitions}, 1)
	adm := pc.admin()
	ctx := testCtx(t, 3*time.Minute)
	drivers := []string{"kgo-tv2", "kgo-tv2", "kgo-tv1"}
	run := startCrashWorkload(t, pc, topic, partitions, drivers, 8, 0)

	waitProgress(ctx, t, adm, 150, topic)
	epochBefore := coordinatorEpochs(ctx, t, adm, topic, partitions)
	wtm := int16(kmsg.WriteTxnMarkers)
	pc.Proxies[1].Delay(wtm, 300*time.Millisecond)
	var ids []string
	for i, d := range drivers {
		ids = append(ids, fmt.Sprintf("crash-%s-%d", d, i))
	}
	prepared := waitPrepareCommit(ctx, t, adm, ids)
	pc.BounceCoordinator()
	pc.Proxies[1].Clear(wtm)
	t.Logf("SIGKILLed the coordinator with %s in PrepareCommit", prepared)
	progress := endOffsets(ctx, adm, topic)
	waitProgress(ctx, t, adm, progress+150, topic)
	epochAfter := coordinatorEpochs(ctx, t, adm, topic, partitions)
	t.Logf("coordinator epoch at the leaders: %d before the SIGKILL, %d after the restart", epochBefore, epochAfter)
	if epochAfter <= epochBefore {
		t.Errorf("coordinator epoch did not grow across the restart: %d → %d", epochBefore, epochAfter)
	}

	pc.BounceLeader(1)
	progress = endOffsets(ctx, adm, topic)
	waitProgress(ctx, t, adm, progress+150, topic)

	run.stopAndCheck(t, "1 coordinator and 1 leader SIGKILL")
}

// TestCrashEmbedded: the same for `txncoord up`, where the coordinator and
// the leaders append to one process log and a group commit carries writes
// that rest on each other (a registration and its data, markers and their
// Complete record, durable together by the log's order): the whole process is SIGKILLed three
// times under load and restarted on its data dir; zero anomalies.
func TestCrashEmbedded(t *testing.T) {
	restartEmbeddedUnderLoad(t, "crash", []string{"kgo-tv2", "kgo-tv2", "kgo-tv2", "kgo-tv2", "kgo-tv1"}, 3,
		(*procCluster).BounceCoordinator, "3 SIGKILLs of txncoord up")
}

// TestStopEmbeddedUnderLoad: `txncoord up` stopped gracefully (SIGTERM)
// twice while TV2 and TV1 producers run exits 0 within 15 s each time
// (in-process registrations and markers in flight end with it), and the
// history checker finds no anomaly.
func TestStopEmbeddedUnderLoad(t *testing.T) {
	restartEmbeddedUnderLoad(t, "stop", []string{"kgo-tv2", "kgo-tv2", "kgo-tv2", "kgo-tv1"}, 2,
		(*procCluster).RestartCoordinator, "2 graceful stops of txncoord up under load")
}

// restartEmbeddedUnderLoad runs drivers against one `txncoord up` process
// on a 6-partition topic, restarts it with restart times times, each after
// 300 more records, and checks the history.
func restartEmbeddedUnderLoad(t *testing.T, topic string, drivers []string, times int, restart func(*procCluster), what string) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	const partitions = 6
	pc := startUpProcess(t, map[string]int32{topic: partitions})
	adm := pc.admin()
	ctx := testCtx(t, 3*time.Minute)
	run := startCrashWorkload(t, pc, topic, partitions, drivers, 8, 0)
	waitProgress(ctx, t, adm, 300, topic)
	for range times {
		restart(pc) // the one `txncoord up` process
		progress := endOffsets(ctx, adm, topic)
		waitProgress(ctx, t, adm, progress+300, topic)
	}
	run.stopAndCheck(t, what)
}

// waitPrepareCommit polls DescribeTransactions until one of ids is in
// PrepareCommit and returns it.
func waitPrepareCommit(ctx context.Context, t testing.TB, adm *kadm.Client, ids []string) string {
	t.Helper()
	for {
		d, err := adm.DescribeTransactions(ctx, ids...)
		if err == nil {
			for _, id := range ids {
				if dt, ok := d[id]; ok && dt.Err == nil && dt.State == "PrepareCommit" {
					return id
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no transaction of %v reached PrepareCommit: %v", ids, ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCrashOldCoordinatorMarkerFenced: a commit marker of the old
// coordinator (epoch C) is held by the proxy while the coordinator is
// SIGKILLed; the restarted coordinator (epoch C+1) resends the marker from
// its PrepareCommit record and completes the transaction; the old marker,
// delivered late, is fenced: TRANSACTION_COORDINATOR_FENCED (52), and it
// changes nothing at the leader.
func TestCrashOldCoordinatorMarkerFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	const topic = "fenced"
	pc := startProcCluster(t, "4.2", []string{"4.2"}, map[string]int32{topic: 1}, 1)
	proxy := pc.Proxies[1]
	ctx := testCtx(t, 2*time.Minute)
	wtm := int16(kmsg.WriteTxnMarkers)
	proxy.Hold(wtm)

	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.Bootstrap()...), kgo.TransactionalID("fenced-app"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// EndTxn is answered once PrepareCommit is durable, before markers.
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := proxy.WaitCaptured(ctx, wtm, 1)
	if err != nil {
		t.Fatal(err)
	}
	old := held[0]
	oldReq := old.Request.(*kmsg.WriteTxnMarkersRequest)
	oldEpoch := oldReq.Markers[0].CoordinatorEpoch

	pc.Coord.kill()
	proxy.CutConnections() // the dead coordinator's connection, held marker and all
	proxy.Clear(wtm)
	pc.StartCoordinator()

	// The new coordinator resends the marker and completes.
	adm := pc.admin()
	for {
		d, err := adm.DescribeTransactions(ctx, "fenced-app")
		if err == nil {
			if dt, ok := d["fenced-app"]; ok && dt.Err == nil && dt.State == "CompleteCommit" {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("transaction never completed after the restart: %v %+v", err, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	newEpoch := coordinatorEpochs(ctx, t, adm, topic, 1)
	t.Logf("old coordinator epoch %d (held marker), new coordinator epoch %d", oldEpoch, newEpoch)
	if newEpoch <= oldEpoch {
		t.Fatalf("coordinator epoch did not grow: %d → %d", oldEpoch, newEpoch)
	}

	resp, err := proxy.Replay(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if code := markerCode(t, resp, pid, topic, 0); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("old coordinator's marker (epoch %d) answered %d, want TRANSACTION_COORDINATOR_FENCED (52)", oldEpoch, code)
	}
	if e := coordinatorEpochs(ctx, t, adm, topic, 1); e != newEpoch {
		t.Fatalf("the fenced marker changed the leader's coordinator epoch: %d → %d", newEpoch, e)
	}
	reads, err := workload.ReadCommitted(ctx, pc.Bootstrap(), []checker.Partition{{Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	if rs := reads[checker.Partition{Topic: topic}]; len(rs) != 1 || rs[0].Value != "v1" {
		t.Fatalf("read_committed after the fenced marker: %+v, want v1 once", rs)
	}
}
