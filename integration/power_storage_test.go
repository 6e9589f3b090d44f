package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// A simulated power loss of `txncoord up` (node.StartEmbedded) under TV2
// load. The process log is on a waltest.CrashFS, the bbolt file on the
// real disk in the data dir. A power loss keeps, of each file, what was
// fsync'd:
//   - the log: what CrashFS.Crash keeps (every segment as of its last
//     fdatasync, the directory as of its last fsync);
//   - bbolt: a quiescent copy taken during the run and put back after the
//     stop. In sync mode every bbolt commit is fsync'd, so a copy taken
//     between commits is a state the disk can hold after a power loss (an
//     applier that did not run since); the log must then hold every record
//     acknowledged since. With NoSync bbolt never fsyncs either, so the
//     copy is one of the states it may be left in.
//
// The crashed process must not change the post-crash state: waltest.Machine
// fails every call of a process that lost power (CrashFS alone fails only
// the files opened before Crash, so the old process's applier could still
// remove segments and sync the directory), and bbolt is overwritten by
// the copy after the old process stopped.

const powerTopic, powerPartitions = "power", 6

// powerOpts is one power-loss run.
type powerOpts struct {
	noSync bool
	// leaders are the leaders' Kafka versions (default 4.2, 4.2, 4.2).
	leaders []string
	// before is how many commits are acknowledged when bbolt is copied,
	// after how many more before the power loss.
	before, after int64
	// whenCompleting, once the commits are in, loses power as soon as
	// an id's next transaction is Ongoing while the previous one's
	// markers are still being written (txnlog.Completion), waiting for
	// that at most this long.
	whenCompleting time.Duration
}

// startPowerCluster starts `txncoord up`'s cluster (a 4.2 coordinator,
// leaders of the given versions) on fresh loopback ports, its log on fs.
func startPowerCluster(t *testing.T, dataDir string, fs wal.FS, noSync bool, leaders []string, log *logtest.Buffer) *node.Embedded {
	t.Helper()
	listeners := map[int32]net.Listener{}
	listen := func(id int32) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id] = ln
		return ln.Addr().String()
	}
	f := &cluster.File{ClusterID: cluster.DefaultClusterID, DefaultPartitions: 3, Topics: map[string]int32{powerTopic: powerPartitions},
		Coordinator: &cluster.Node{NodeID: 0, Addr: listen(0), KafkaVersion: "4.2"}}
	for i, v := range leaders {
		id := int32(i + 1)
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: listen(id), KafkaVersion: v})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: f, DataDir: dataDir, WALFS: fs, UnsafeNoSync: noSync,
		MarkerVersionDiscovery: true, Listeners: listeners, Log: zerolog.New(log).Level(zerolog.InfoLevel).With().Timestamp().Logger()})
	if err != nil {
		for _, ln := range listeners {
			ln.Close()
		}
		t.Fatalf("start: %v\n%s", err, log)
	}
	return e
}

// quiescentCopy copies path to dst once two reads in a row are equal: no
// bbolt commit ran between them, so the copy is a committed state.
func quiescentCopy(t *testing.T, path, dst string) {
	t.Helper()
	prev, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		time.Sleep(time.Millisecond)
		cur, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(prev, cur) {
			if err := os.WriteFile(dst, cur, 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
		prev = cur
	}
	t.Fatalf("%s never stood still for 1 ms", path)
}

// powerProducer commits (and sometimes aborts) transactions of one
// record per partition until ctx ends or an operation fails, and returns
// their history. acked (all producers') and mine count acknowledged
// commits.
func powerProducer(ctx context.Context, bootstrap, id string, seed int64, acked, mine *atomic.Int64) (checker.History, error) {
	var h checker.History
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second))
	if err != nil {
		return h, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewSource(seed))
	for i := 0; ctx.Err() == nil; i++ {
		abort := rng.Float64() < 0.2
		txn := checker.Txn{ID: fmt.Sprintf("%s/%d", id, i), Producer: id, Outcome: checker.Open}
		var recs []*kgo.Record
		for p := range int32(powerPartitions) {
			v := fmt.Sprintf("%s-%d-p%d", id, i, p)
			txn.Writes = append(txn.Writes, checker.Write{Value: v, Partition: checker.Partition{Topic: powerTopic, Partition: p}})
			recs = append(recs, &kgo.Record{Topic: powerTopic, Partition: p, Value: []byte(v)})
		}
		if err := cl.BeginTransaction(); err != nil {
			return h, err
		}
		opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		produceErr := cl.ProduceSync(opCtx, recs...).FirstErr()
		cancel()
		if produceErr != nil || abort {
			// Never asked to commit: it can only be aborted.
			abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			err := cl.EndTransaction(abortCtx, kgo.TryAbort)
			cancel()
			txn.Outcome = checker.Aborted
			h.Txns = append(h.Txns, txn)
			if err = errors.Join(produceErr, err); err != nil {
				return h, err
			}
			continue
		}
		commitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.EndTransaction(commitCtx, kgo.TryCommit)
		cancel()
		if err != nil {
			txn.Outcome = checker.Unknown
			h.Txns = append(h.Txns, txn)
			return h, err
		}
		txn.Outcome = checker.Committed
		h.Txns = append(h.Txns, txn)
		mine.Add(1)
		acked.Add(1)
	}
	return h, nil
}

// powerLossRun runs the load, takes the bbolt copy after o.before acked
// commits, loses power after o.after more, restarts on what the power
// loss kept and returns the checker's report, the commits acknowledged
// after the copy, and the restarted cluster (stopped at the end of the
// test).
func powerLossRun(t *testing.T, o powerOpts) (rep *checker.Report, ackedAfterCopy int64, e *node.Embedded, log *logtest.Buffer) {
	t.Helper()
	if o.leaders == nil {
		o.leaders = []string{"4.2", "4.2", "4.2"}
	}
	noSync, before, after := o.noSync, o.before, o.after
	const producers = 3
	dataDir := t.TempDir()
	dbPath := filepath.Join(dataDir, node.SharedStoreFile)
	m := waltest.NewMachine()
	log = &logtest.Buffer{}
	defer func() {
		if t.Failed() {
			t.Logf("cluster log:\n%s", log)
		}
	}()
	e = startPowerCluster(t, dataDir, m.Process(), noSync, o.leaders, log)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int64
	perProducer := make([]*atomic.Int64, producers) // acked commits of each
	var wg sync.WaitGroup
	var mu sync.Mutex
	var history checker.History
	var ids []string
	for i := range producers {
		id := fmt.Sprintf("power-%d", i)
		ids = append(ids, id)
		perProducer[i] = &atomic.Int64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := powerProducer(ctx, e.Bootstrap(), id, int64(i+1), &acked, perProducer[i])
			if err != nil {
				t.Logf("%s stopped: %v", id, err)
			}
			mu.Lock()
			history.Merge(h)
			mu.Unlock()
		}()
	}
	waitAcked := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for acked.Load() < n || slices.ContainsFunc(perProducer, func(a *atomic.Int64) bool { return a.Load() == 0 }) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d commits acknowledged in 60 s", acked.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitAcked(before) // and one of each producer at least
	for _, id := range ids {
		if d, ok := e.Coordinator.Coordinator.Describe(id); !ok || d.ClientTransactionVersion != 2 {
			t.Fatalf("%s: %+v (found %v): want a TV2 transaction", id, d, ok)
		}
	}
	// bbolt holds part of the state (the applier ran), the log the rest.
	if err := e.Shared.Apply(); err != nil {
		t.Fatal(err)
	}
	if e.Shared.Applied() == 0 {
		t.Fatal("nothing applied to bbolt")
	}
	quiescentCopy(t, dbPath, dbPath+".powerloss")
	atCopy := acked.Load()
	waitAcked(atCopy + after)
	if o.whenCompleting > 0 && !waitCompleting(e, ids, o.whenCompleting) {
		t.Logf("no transaction overlapped its predecessor's markers in %v: power lost anyway", o.whenCompleting)
	}
	m.Crash() // producers still running
	ackedAtCrash := acked.Load()
	cancel()
	wg.Wait()
	ackedAfterCopy = ackedAtCrash - atCopy
	if n := acked.Load(); n != ackedAtCrash {
		// Answers in flight at the power loss: their commits were
		// durable before it (the checker finds them, or fails).
		t.Logf("%d commits acknowledged after the power loss", n-ackedAtCrash)
	}

	stopCtx, cancelStop := context.WithTimeout(context.Background(), 15*time.Second)
	stopErr := e.Stop(stopCtx)
	cancelStop()
	t.Logf("%d commits acknowledged, %d after the bbolt copy; stop after the power loss: %v", ackedAtCrash, ackedAfterCopy, stopErr)
	if err := os.Rename(dbPath+".powerloss", dbPath); err != nil {
		t.Fatal(err)
	}

	e = startPowerCluster(t, dataDir, m.Process(), noSync, o.leaders, log)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		e.Stop(ctx)
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	// A new producer per id fences the old one: its open transaction is
	// aborted (markers written) before InitProducerId answers.
	for _, id := range ids {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.TransactionalID(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := cl.ProducerID(rctx); err != nil {
			t.Fatalf("%s: InitProducerId after the restart: %v", id, err)
		}
		cl.Close()
	}
	// The marker round trip ends every transaction: no id stays in
	// Prepare*.
	for _, id := range ids {
		for {
			d, ok := e.Coordinator.Coordinator.Describe(id)
			if ok && !d.Pending && !strings.HasPrefix(d.State, "Prepare") {
				break
			}
			if rctx.Err() != nil {
				t.Fatalf("%s stuck after the restart: %+v (found %v)", id, d, ok)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var ps []checker.Partition
	for p := range int32(powerPartitions) {
		ps = append(ps, checker.Partition{Topic: powerTopic, Partition: p})
	}
	reads, err := workload.ReadCommitted(rctx, []string{e.Bootstrap()}, ps)
	if err != nil {
		t.Fatalf("read_committed after the restart: %v", err)
	}
	checkStable(rctx, t, e.Bootstrap())
	rep, err = checker.Check(history, reads)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the power loss:\n%s", rep.Table())
	return rep, ackedAfterCopy, e, log
}

// checkStable asserts LSO == HW on every partition of the topic:
// ListOffsets latest at read_committed and read_uncommitted.
func checkStable(ctx context.Context, t *testing.T, bootstrap string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lso, err := adm.ListCommittedOffsets(ctx, powerTopic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	hw, err := adm.ListEndOffsets(ctx, powerTopic)
	if err == nil {
		err = hw.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(powerPartitions) {
		l, _ := lso.Lookup(powerTopic, p)
		h, _ := hw.Lookup(powerTopic, p)
		if l.Offset != h.Offset || h.Offset == 0 {
			t.Errorf("%s/%d: LSO %d, HW %d", powerTopic, p, l.Offset, h.Offset)
		}
	}
}

// waitCompleting polls until one of ids has its next transaction Ongoing
// while the previous one's markers are being written, for at most d;
// false if none did.
func waitCompleting(e *node.Embedded, ids []string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, id := range ids {
			if d, ok := e.Coordinator.Coordinator.Describe(id); ok && d.Completing != nil && d.State == "Ongoing" {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// TestPowerLossEmbedded: `txncoord up` loses power (its log on a CrashFS)
// while three TV2 producers commit and abort; restarted on what the power
// loss kept (the bbolt file as of a moment before, the log as CrashFS
// keeps it), every acknowledged commit is visible read_committed, no
// transaction is torn or an aborted one visible (the history checker finds
// no anomaly), LSO == HW on every partition, and no transactional id stays
// in Prepare*. The leaders are 4.2 (WriteTxnMarkers v2): with a 4.1 leader
// `up`'s default fails for a reason outside storage (see
// TestPowerLossLegacyLeader).
func TestPowerLossEmbedded(t *testing.T) {
	// The power loss at a few points: a little or a lot of the state in
	// bbolt, a little or a lot in the log only.
	for _, n := range [][2]int64{{5, 10}, {20, 30}, {60, 5}, {10, 80}} {
		t.Run(fmt.Sprintf("copy-after-%d-crash-%d-later", n[0], n[1]), func(t *testing.T) {
			rep, ackedAfterCopy, _, log := powerLossRun(t, powerOpts{before: n[0], after: n[1]})
			if rep.Anomalies() != 0 {
				t.Fatalf("anomalies after the power loss: %s", rep.Summary())
			}
			if ackedAfterCopy < n[1] || int64(rep.TxnsCommitted) < n[0]+n[1] {
				t.Fatalf("%d commits after the bbolt copy, %d in all: the log had too little to prove", ackedAfterCopy, rep.TxnsCommitted)
			}
			if !strings.Contains(log.String(), "storage: log replayed") {
				t.Fatal("the restart replayed nothing from the log")
			}
		})
	}
	// Power lost while an id's next transaction is Ongoing and the
	// previous one's markers are being written: the restart resends
	// them, and the leaders must not take them for the next one's.
	t.Run("while-completing", func(t *testing.T) {
		for range 2 {
			rep, _, _, _ := powerLossRun(t, powerOpts{before: 5, after: 10, whenCompleting: 2 * time.Second})
			if rep.Anomalies() != 0 {
				t.Fatalf("anomalies after the power loss: %s", rep.Summary())
			}
		}
	})
}

// TestPowerLossEmbeddedNoSync is the same run with --unsafe-no-fsync: the
// power loss takes the log back to nothing synced, and the commits
// acknowledged after the bbolt copy are lost. The proof that
// TestPowerLossEmbedded fails when fdatasync is turned off. The store
// says so when it opens, and goes on from what bbolt holds.
func TestPowerLossEmbeddedNoSync(t *testing.T) {
	rep, ackedAfterCopy, _, log := powerLossRun(t, powerOpts{noSync: true, before: 20, after: 30})
	if rep.Counts[checker.LostWrite] == 0 {
		t.Fatalf("with NoSync no acknowledged commit was lost (%d made after the bbolt copy): %s", ackedAfterCopy, rep.Summary())
	}
	t.Logf("NoSync: %d values of acknowledged commits lost, as expected", rep.Counts[checker.LostWrite])
	if !strings.Contains(log.String(), "the log ends before the store's applied position") {
		t.Error("the restart did not say that the log lost records bbolt had")
	}
}
