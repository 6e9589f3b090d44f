package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/internal/freeport"
)

// The disk-full scenario of the storage issue, with the real binary: `txncoord
// up` with its data dir on a 40 MB tmpfs, most of it taken by a filler file,
// four kgo TV2 transactional producers (20 KB values, every 5th transaction
// aborted) until the disk is full. Required from that moment: no further
// acknowledgement; pending and new requests answered KAFKA_STORAGE_ERROR
// within a second (a client sees an error, not a hang); /readyz 503 with the
// reason; one error log line naming the file and the errno; the metric
// txncoord_store_write_failures_total at 1. Then the filler is deleted
// ("space freed"), SIGTERM (exit within 15 s), a restart on the same dir, and
// the recovered cluster must hold every acknowledged commit, no record of an
// aborted transaction, every transaction whose commit failed all or nothing,
// and no transaction in Prepare* once the markers had their round trip.
//
// How the test tells: /readyz is polled every 5 ms, and its first 503 is
// the failure's time. Every client call (produce, commit, abort) is timed:
// one pending at that time or started later must end within a second, and
// no produce or commit started later may succeed. Clients that never saw
// the failure then send a produce to each leader and an InitProducerId,
// which must be answered KAFKA_STORAGE_ERROR within a second. The recovered
// data is judged by the history checker (values are compared by the key
// before their '|').
//
// It needs root (mount); CI runs as root. Elsewhere it skips, saying why.

const (
	dfTopic      = "diskfull"
	dfPartitions = 6 // on 3 leaders: partitions p and p+1 are on different ones
	dfValueSize  = 20 << 10
	dfProducers  = 4
	// dfHeadroom is the space left free beside the filler: a few hundred
	// 20 KB values (each is written to the log and to bbolt).
	dfHeadroom = 12 << 20
	// dfErrorWithin is how soon after the failure every request must
	// have been answered with an error.
	dfErrorWithin = time.Second
	// dfAfterFull is how long the producers go on after the failure
	// (the "wait 30 s", shortened).
	dfAfterFull = 3 * time.Second
)

// dfOp is one client call as the client saw it.
type dfOp struct {
	producer   string
	kind       string // produce, commit, abort
	start, end time.Time
	err        error
}

// dfRun is the state of the producers.
type dfRun struct {
	mu      sync.Mutex
	ops     []dfOp
	history checker.History
	// acks are the commits acknowledged, with when.
	acks map[string]time.Time
}

func (r *dfRun) op(producer, kind string, start time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, dfOp{producer: producer, kind: kind, start: start, end: time.Now(), err: err})
}

// dfValue is a 20 KB value whose key (what the checker compares) is before
// the '|'; the rest is random, so that the client's compression (kgo
// snappy by default) leaves it 20 KB.
func dfValue(rng *rand.Rand, key string) []byte {
	v := make([]byte, dfValueSize)
	n := copy(v, key+"|")
	rng.Read(v[n:])
	return v
}

func dfKey(v string) string {
	k, _, _ := strings.Cut(v, "|")
	return k
}

// dfProducer runs transactions of two records (partitions p and p+1, on
// different leaders) until stop is closed; every 5th is aborted. After an
// error the client is closed and a new one made with the same id, as an
// application restart would. RecordRetries(0): kgo retries
// KAFKA_STORAGE_ERROR (a retriable code) on produce, and held the batch
// until its delivery timeout in our runs; the 56 then reaches the caller.
func dfProducer(t *testing.T, bootstrap []string, idx int, stop <-chan struct{}, r *dfRun) {
	id := fmt.Sprintf("diskfull-%d", idx)
	rng := rand.New(rand.NewSource(int64(idx)))
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.TransactionalID(id),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second),
			kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(10*time.Second))
		if err != nil {
			t.Error(err)
			return nil
		}
		return cl
	}
	cl := newClient()
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		if cl == nil {
			if cl = newClient(); cl == nil {
				return
			}
		}
		p := int32(rng.Intn(dfPartitions))
		txn := checker.Txn{ID: fmt.Sprintf("%s/%d", id, n), Producer: id, Outcome: checker.Aborted}
		for j, part := range []int32{p, (p + 1) % dfPartitions} {
			txn.Writes = append(txn.Writes, checker.Write{Value: fmt.Sprintf("%s-%d-%d", id, n, j),
				Partition: checker.Partition{Topic: dfTopic, Partition: part}})
		}
		commit := n%5 != 4
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		if err = cl.BeginTransaction(); err == nil {
			var recs []*kgo.Record
			for _, w := range txn.Writes {
				recs = append(recs, &kgo.Record{Topic: dfTopic, Partition: w.Partition.Partition, Value: dfValue(rng, w.Value)})
			}
			start := time.Now()
			err = cl.ProduceSync(ctx, recs...).FirstErr()
			r.op(id, "produce", start, err)
		}
		switch {
		case err != nil:
			// Never asked to commit: it must never become visible.
			start := time.Now()
			aerr := cl.AbortBufferedRecords(ctx)
			if aerr == nil {
				aerr = cl.EndTransaction(ctx, kgo.TryAbort)
			}
			r.op(id, "abort", start, aerr)
			cl.Close()
			cl = nil
		case commit:
			start := time.Now()
			err = cl.EndTransaction(ctx, kgo.TryCommit)
			r.op(id, "commit", start, err)
			if err == nil {
				txn.Outcome = checker.Committed
				r.mu.Lock()
				r.acks[txn.ID] = time.Now()
				r.mu.Unlock()
			} else {
				txn.Outcome = checker.Unknown
				cl.Close()
				cl = nil
			}
		default:
			start := time.Now()
			err = cl.EndTransaction(ctx, kgo.TryAbort)
			r.op(id, "abort", start, err)
			if err != nil {
				cl.Close()
				cl = nil
			}
		}
		cancel()
		r.mu.Lock()
		r.history.Txns = append(r.history.Txns, txn)
		r.mu.Unlock()
	}
}

// dfGet fetches an admin URL: status and body.
func dfGet(url string) (int, string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// dfMetric returns the value of an unlabelled metric from /metrics.
func dfMetric(t *testing.T, admin, name string) string {
	t.Helper()
	code, body, err := dfGet(admin + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	return m[1]
}

// dfStates returns GET /v1/transactions as id -> state.
func dfStates(t *testing.T, admin string) map[string]string {
	t.Helper()
	code, body, err := dfGet(admin + "/v1/transactions")
	if err != nil || code != 200 {
		t.Fatalf("GET /v1/transactions: %d %v %s", code, err, body)
	}
	var txns []struct {
		ID    string `json:"transactional_id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(body), &txns); err != nil {
		t.Fatalf("GET /v1/transactions: %v: %s", err, body)
	}
	out := map[string]string{}
	for _, tx := range txns {
		out[tx.ID] = tx.State
	}
	return out
}

func dfPrepared(states map[string]string) []string {
	var out []string
	for id, s := range states {
		if strings.HasPrefix(s, "Prepare") {
			out = append(out, id+"="+s)
		}
	}
	sort.Strings(out)
	return out
}

// dfLogLines returns the JSON log lines of a process at level.
func dfLogLines(t *testing.T, path, level string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["level"] == level {
			out = append(out, m)
		}
	}
	return out
}

// dfFill writes a file of size bytes (tmpfs allocates on write, not on
// truncate).
func dfFill(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		size -= n
	}
	return f.Close()
}

func dfFree(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

// dfStop sends SIGTERM and waits up to 15 s for the exit; it returns how
// the process ended.
func dfStop(t *testing.T, p *proc) string {
	t.Helper()
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return fmt.Sprintf("%s in %v", p.cmd.ProcessState, time.Since(start).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not exit within 15 s of SIGTERM\n%s", p.name, tail(p.log))
		return ""
	}
}

// dfFence sends InitProducerId for id, as a restarted application does:
// it ends the id's open transaction (answered CONCURRENT_TRANSACTIONS,
// retried, while the abort's markers are written).
func dfFence(ctx context.Context, cl *kgo.Client, id string) error {
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 30000, -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if resp.ErrorCode == 0 {
			return nil
		}
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestDiskFullFailStop(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and runs the binary twice per subtest")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting the 40 MB tmpfs needs root (CI runs as root)")
	}
	// The setup: the whole data dir on the tmpfs. The log is
	// written all the time and bbolt only by the applier, once a second,
	// so in practice the log is what hits ENOSPC first.
	t.Run("data dir full", func(t *testing.T) { runDiskFull(t, false) })
	// The log folder bind-mounted from the test's own disk: only bbolt,
	// written by the applier, can run out, so the applier's failure is
	// what has to stop the process's writes.
	t.Run("bbolt full, log elsewhere", func(t *testing.T) { runDiskFull(t, true) })
}

func dfMount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("skipped: mount %s: %v: %s", strings.Join(args, " "), err, out)
	}
	dir := args[len(args)-1]
	// Cleanups run last-in first-out: after the process is killed
	// (startProc registers later), before an outer mount's unmount and
	// the removal of TempDir (registered earlier).
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; lazy unmount", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
}

// runDiskFull is the scenario; walElsewhere puts the log folder on
// another file system than the tmpfs.
func runDiskFull(t *testing.T, walElsewhere bool) {
	mnt := t.TempDir()
	size := "size=40m"
	if walElsewhere {
		// Only bbolt fills up, at the applier's first bbolt commit
		// (once a second), which then holds a second of every
		// producer's 20 KB records: freed, the tmpfs must have room
		// for the restart to replay them (bbolt writes copies of the
		// pages it changes before it frees the old ones).
		size = "size=160m"
	}
	dfMount(t, "-t", "tmpfs", "-o", size, "tmpfs", mnt)
	dataDir := filepath.Join(mnt, "data")
	walFile := ""
	if walElsewhere {
		walDir := filepath.Join(dataDir, "wal")
		if err := os.MkdirAll(walDir, 0o755); err != nil {
			t.Fatal(err)
		}
		dfMount(t, "--bind", t.TempDir(), walDir)
		walFile = filepath.Join(dataDir, "txncoord.db") // the only file that can run out of space
	}
	logDir := t.TempDir() // not on the tmpfs: the logs must survive it filling up
	bin := txncoordBinary(t)
	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := []string{fmt.Sprintf("127.0.0.1:%d", base)}
	adminAddr := freeAddr(t)
	admin := "http://" + adminAddr
	args := []string{"up", "--data-dir", dataDir, "--listen", bootstrap[0], "--leaders", "4.2,4.2,4.2",
		"--topics", fmt.Sprintf("%s:%d", dfTopic, dfPartitions), "--admin-listen", adminAddr}
	p := startProc(t, "up", logDir, bin, args...)

	filler := filepath.Join(mnt, "filler")
	free := dfFree(mnt)
	if err := dfFill(filler, free-dfHeadroom); err != nil {
		t.Fatalf("filler: %v", err)
	}
	t.Logf("tmpfs %s: %d MiB free before the filler, %d MiB after", mnt, free>>20, dfFree(mnt)>>20)

	// Watch /readyz: the failure's time is its first 503.
	var (
		failedAt   time.Time
		readyBody  string
		healthCode int
		watchMu    sync.Mutex
	)
	failed := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		for watchCtx.Err() == nil {
			code, body, err := dfGet(admin + "/readyz")
			if err == nil && code != http.StatusOK {
				now := time.Now()
				hc, _, _ := dfGet(admin + "/healthz")
				watchMu.Lock()
				failedAt, readyBody, healthCode = now, fmt.Sprintf("%d %s", code, strings.TrimSpace(body)), hc
				watchMu.Unlock()
				close(failed)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	run := &dfRun{acks: map[string]time.Time{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range dfProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dfProducer(t, bootstrap, i, stop, run)
		}()
	}
	began := time.Now()
	select {
	case <-failed:
	case <-time.After(40 * time.Second):
		close(stop)
		wg.Wait()
		t.Fatalf("the disk never filled up in 40 s (%d MiB free)\n%s", dfFree(mnt)>>20, tail(p.log))
	}
	watchMu.Lock()
	t.Logf("store failed %v after the producers started; /readyz: %s; /healthz: %d", failedAt.Sub(began).Round(time.Millisecond), readyBody, healthCode)
	watchMu.Unlock()

	// New requests, from clients that never saw the failure: a plain
	// produce to a leader and an InitProducerId to the coordinator must
	// be answered KAFKA_STORAGE_ERROR within a second.
	probe, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if err := probe.Ping(context.Background()); err != nil { // metadata, not timed
		t.Fatalf("ping: %v", err)
	}
	for part := range int32(3) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := probe.ProduceSync(ctx, &kgo.Record{Topic: dfTopic, Partition: part, Value: []byte("probe")}).FirstErr()
		took := time.Since(start)
		cancel()
		if !errors.Is(err, kerr.KafkaStorageError) || took > dfErrorWithin {
			t.Errorf("new produce to %s/%d after the failure: %v after %v, want KAFKA_STORAGE_ERROR within %v", dfTopic, part, err, took, dfErrorWithin)
		}
	}
	{
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		id := "diskfull-probe"
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 30000, -1, -1
		start := time.Now()
		resp, err := req.RequestWith(ctx, probe)
		took := time.Since(start)
		cancel()
		if err != nil || resp.ErrorCode != kerr.KafkaStorageError.Code || took > dfErrorWithin {
			t.Errorf("new InitProducerId after the failure: %v, code %v after %v, want KAFKA_STORAGE_ERROR (56) within %v", err, resp, took, dfErrorWithin)
		}
	}

	// The producers go on for a while against the stopped store.
	time.Sleep(dfAfterFull)
	prepared := dfPrepared(dfStates(t, admin))
	close(stop)
	wg.Wait()
	stopWatch()

	// /readyz says why, the metric counts it, one error line names the
	// file and the errno.
	if !strings.HasPrefix(readyBody, "503 ") || !strings.Contains(readyBody, "no space left on device") {
		t.Errorf("/readyz after the failure: %s, want 503 with the reason", readyBody)
	}
	if code, body, _ := dfGet(admin + "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %v after the failure: %d %s", dfAfterFull, code, body)
	}
	if v := dfMetric(t, admin, "txncoord_store_write_failures_total"); v != "1" {
		t.Errorf("txncoord_store_write_failures_total = %s, want 1", v)
	}
	errLines := dfLogLines(t, p.log, "error")
	var lines []string
	for _, l := range errLines {
		b, _ := json.Marshal(l)
		lines = append(lines, string(b))
	}
	t.Logf("error log lines (%d):\n%s", len(errLines), strings.Join(lines, "\n"))
	if len(errLines) != 1 {
		t.Errorf("%d error log lines, want exactly 1", len(errLines))
	}
	if len(errLines) > 0 {
		l := errLines[0]
		file, _ := l["file"].(string)
		if !strings.HasPrefix(file, dataDir) || !strings.Contains(lines[0], "no space left on device") {
			t.Errorf("the error line does not name a file of the data dir and the errno: %s", lines[0])
		}
		if walFile != "" && file != walFile {
			t.Errorf("the error line names %s, want %s", file, walFile)
		}
		t.Logf("the first write to fail: %s", file)
	}

	// The clients: an error, never a hang; no acknowledgement after the
	// failure.
	run.mu.Lock()
	ops := append([]dfOp(nil), run.ops...)
	history := run.history
	acks := run.acks
	run.mu.Unlock()
	var late, slow []string
	errKinds := map[string]int{}
	for _, o := range ops {
		if o.end.Before(failedAt) {
			if o.err != nil {
				errKinds["before the failure: "+o.kind+": "+dfErrName(o.err)]++
			}
			continue
		}
		from := o.start
		if from.Before(failedAt) {
			from = failedAt // pending at the failure
		}
		if d := o.end.Sub(from); d > dfErrorWithin {
			slow = append(slow, fmt.Sprintf("%s %s started %v after the failure, ended %v later: %v",
				o.producer, o.kind, o.start.Sub(failedAt).Round(time.Millisecond), d.Round(time.Millisecond), o.err))
		}
		if o.err == nil {
			// An abort may end in the client without a request
			// (kgo, when nothing was produced): only produce and
			// commit are acknowledgements.
			if o.start.After(failedAt) && o.kind != "abort" {
				late = append(late, fmt.Sprintf("%s %s started %v after the failure succeeded", o.producer, o.kind, o.start.Sub(failedAt).Round(time.Millisecond)))
			}
		} else {
			errKinds["after the failure: "+o.kind+": "+dfErrName(o.err)]++
		}
	}
	var kinds []string
	for k, n := range errKinds {
		kinds = append(kinds, fmt.Sprintf("%4d  %s", n, k))
	}
	sort.Strings(kinds)
	t.Logf("%d client calls; errors:\n%s", len(ops), strings.Join(kinds, "\n"))
	for _, s := range slow {
		t.Errorf("not answered within %v of the failure: %s", dfErrorWithin, s)
	}
	for _, s := range late {
		t.Errorf("acknowledged after the failure: %s", s)
	}
	t.Logf("in Prepare* %v after the failure (markers cannot be written until a restart): %v", dfAfterFull, prepared)

	// Free the space, stop, restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM: %s; its last lines:\n%s", dfStop(t, p), dfTail(p.log, 3))
	p = startProc(t, "up-restarted", logDir, bin, args...)
	restarted := time.Now()
	for {
		prep := dfPrepared(dfStates(t, admin))
		if len(prep) == 0 {
			t.Logf("no transaction in Prepare* %v after the restart's ready line", time.Since(restarted).Round(time.Millisecond))
			break
		}
		if time.Since(restarted) > 5*time.Second {
			t.Fatalf("still in Prepare* 5 s after the restart: %v", prep)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body, _ := dfGet(admin + "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the restart: %d %s", code, body)
	}
	if v := dfMetric(t, admin, "txncoord_store_write_failures_total"); v != "0" {
		t.Errorf("txncoord_store_write_failures_total after the restart = %s, want 0", v)
	}
	for _, l := range dfLogLines(t, p.log, "warn") {
		b, _ := json.Marshal(l)
		t.Logf("restart: %s", b)
	}

	// The producers' applications restart: InitProducerId ends what
	// they left open (a transaction never asked to commit).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range dfProducers {
		if err := dfFence(ctx, cl, fmt.Sprintf("diskfull-%d", i)); err != nil {
			t.Fatalf("InitProducerId for diskfull-%d after the restart: %v", i, err)
		}
	}
	var parts []checker.Partition
	for part := range int32(dfPartitions) {
		parts = append(parts, checker.Partition{Topic: dfTopic, Partition: part})
	}
	reads, err := workload.ReadCommitted(ctx, bootstrap, parts)
	if err != nil {
		t.Fatalf("read_committed after the restart: %v", err)
	}
	for part, recs := range reads {
		for i := range recs {
			recs[i].Value = dfKey(recs[i].Value)
		}
		reads[part] = recs
	}
	rep, err := checker.Check(history, reads)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart (%d commits acknowledged):\n%s", len(acks), rep.Table())
	if rep.Anomalies() != 0 {
		t.Errorf("%d anomalies", rep.Anomalies())
	}
	if rep.TxnsCommitted == 0 || rep.TxnsAborted == 0 {
		t.Errorf("the run needs acknowledged commits and aborts: %d and %d", rep.TxnsCommitted, rep.TxnsAborted)
	}
	dfStop(t, p)
}

// dfErrName shortens a client error to its Kafka error name (or text).
func dfErrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// dfTail returns the last n lines of a file.
func dfTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
