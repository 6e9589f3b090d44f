package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// A failing or stopping disk under one TV2 transaction, at every record
// boundary and at byte offsets of the records the transaction appends to
// the process log: a fresh `txncoord up` cluster (coordinator and two
// leaders, in-process) runs one committed warm-up transaction, then one
// transaction (a record to orders/0 on leader 1, one to orders/1 on
// leader 2, commit) with a fault armed in the log's file layer
// (EmbeddedConfig.WALFS). The cluster is stopped and started again on the
// same data dir with a healthy file layer, and the recovered state is
// checked:
//   - the warm-up transaction, acknowledged before the fault, is visible;
//   - if the commit was acknowledged, both of its records are visible
//     read_committed; in any case never one without the other;
//   - the coordinator holds the id in no Prepare* state 5 s after the
//     restart (the markers' round trip), and last stable offset == high
//     watermark on both partitions (an Ongoing transaction whose client
//     is gone is first ended as an application restart ends it: an
//     InitProducerId with its id);
//   - while the fault stops the process's writes the client gets
//     KAFKA_STORAGE_ERROR, and its transaction ends within 2 s.
//
// The transaction appends 8 records (in a recording: 1,250 bytes): per
// partition the coordinator's registration and the leader's data, the
// PrepareCommit, a marker per partition, CompleteCommit.
//
// TestEmbeddedTxnWALFaultAtEveryOffset, on the real file system:
//   - the disk fills up at a byte offset of those bytes (every byte of
//     every frame header, a byte either side of every frame's end, every
//     8th byte): the write crossing it writes what fits and fails with
//     ENOSPC, the bytes before stay in the file as a torn tail for the
//     restart to cut;
//   - waltest.FaultFS: the n-th write fails at every frame boundary in it,
//     and the n-th fdatasync fails with EIO (the batch's bytes stay in the
//     page cache and are read back at the restart: records never
//     acknowledged become durable then, which must still be all or
//     nothing). Write indices come from the recording; group commit splits
//     the bytes into writes differently from run to run, so some of these
//     cases do not fire (counted in the log).
//
// The process then runs on in fail-stop mode and is stopped gracefully.
//
// TestEmbeddedTxnPowerLossAtEveryRecord runs the log on waltest.CrashFS:
// when the bytes reach a record's start, its header's end or its last
// byte, or at the n-th fdatasync, or once the transaction settled, the
// machine loses power (CrashFS.Crash: every byte not fdatasync'd is
// gone); the nodes are stopped and started again on what survived.

const wfTxnID = "wal-fault"

// wfPartitions are orders/0 and orders/1: on different leaders in
// twoLeaderFile's cluster (cluster.LeaderIndex is consecutive in the
// partition).
var wfPartitions = []checker.Partition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}}

// wfRecorded is what a clean run of the armed transaction wrote: the size
// of each write, the fdatasyncs, and its frames, as offsets in the bytes
// the transaction appended to the log (the same from run to run, while
// their split into writes is not).
type wfRecorded struct {
	writes []int
	syncs  int
	frames [][2]int // start, end
	total  int
}

// writeBoundaries are the frame boundaries inside write i (offsets
// relative to the write), its start and end included.
func (r wfRecorded) writeBoundaries(i int) []int {
	start := 0
	for _, w := range r.writes[:i] {
		start += w
	}
	at := []int{0, r.writes[i]}
	for _, f := range r.frames {
		for _, b := range []int{f[0], f[0] + 16, f[1]} {
			if b > start && b < start+r.writes[i] {
				at = append(at, b-start)
			}
		}
	}
	slices.Sort(at)
	return slices.Compact(at)
}

// wfOutcome is how one case went.
type wfOutcome struct {
	fired       bool // the fault fired (the store failed)
	acked       bool // EndTxn(commit) returned nil
	commitTried bool
	fenced      bool // the recovered Ongoing transaction was ended by InitProducerId
	clientErr   string
	resolved    string // "committed" or "aborted" after recovery
}

// wfClient is the transactional producer. RecordRetries(0): kgo treats
// KAFKA_STORAGE_ERROR as retriable, and with retries left it held the
// batch until RecordDeliveryTimeout although the leader had answered 56
// at once; without retries the 56 reaches the caller.
func wfClient(t *testing.T, bootstrap string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(wfTxnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second),
		kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// wfTxn produces prefix-p0 and prefix-p1 (one after the other, so the
// split into writes varies little) and commits.
func wfTxn(ctx context.Context, cl *kgo.Client, prefix string) (out wfOutcome) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		out.clientErr = "begin: " + err.Error()
		return out
	}
	for _, p := range wfPartitions {
		rec := &kgo.Record{Topic: p.Topic, Partition: p.Partition, Value: fmt.Appendf(nil, "%s-p%d", prefix, p.Partition)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			out.clientErr = fmt.Sprintf("produce p%d: %v", p.Partition, err)
			cl.AbortBufferedRecords(ctx)
			cl.EndTransaction(ctx, kgo.TryAbort)
			return out
		}
	}
	out.commitTried = true
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		out.clientErr = "commit: " + err.Error()
		return out
	}
	out.acked = true
	return out
}

func wfStart(t *testing.T, dir string, fs wal.FS) *Embedded {
	t.Helper()
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, MarkerVersionDiscovery: true,
		WALFS: fs, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("start on %s: %v", dir, err)
	}
	return e
}

// wfStop stops e within 15 s; an error is expected (and returned) only
// when its store failed.
func wfStop(t *testing.T, e *Embedded) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	err := e.Stop(ctx)
	if time.Since(start) > 15*time.Second || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop took %v: %v", time.Since(start), err)
	}
	if err != nil && e.Shared.Err() == nil {
		t.Fatalf("stop: %v", err)
	}
}

// wfSettled waits until the coordinator finished the id's last transition
// (not Prepare*, nothing pending) and the log holds every record durably,
// or the store failed.
func wfSettled(e *Embedded, d time.Duration) (state string, ok bool) {
	deadline := time.Now().Add(d)
	for {
		det, found := e.Coordinator.Coordinator.Describe(wfTxnID)
		state = det.State
		if e.Shared.Err() != nil {
			return state, false
		}
		if found && !det.Pending && det.Completing == nil && !strings.HasPrefix(state, "Prepare") &&
			e.Shared.Durable() == e.Shared.Last() {
			return state, true
		}
		if time.Now().After(deadline) {
			return state, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wfRecord runs the transaction on a clean FaultFS over the real file
// system and returns what it wrote, frame boundaries included (read back
// from the segment file).
func wfRecord(t *testing.T) wfRecorded {
	t.Helper()
	dir := t.TempDir()
	ffs := waltest.NewFaultFS(wal.OSFS{})
	e := wfStart(t, dir, ffs)
	defer wfStop(t, e)
	cl := wfClient(t, e.Bootstrap())
	defer cl.Close()
	ctx := context.Background()
	if out := wfTxn(ctx, cl, "warm"); !out.acked {
		t.Fatalf("warm-up transaction: %s", out.clientErr)
	}
	if st, ok := wfSettled(e, 5*time.Second); !ok {
		t.Fatalf("warm-up transaction not settled: %s", st)
	}
	seg := filepath.Join(dir, storage.WALDir, fmt.Sprintf("%016x.wal", 1))
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	before := fi.Size()
	ffs.Reset()
	if out := wfTxn(ctx, cl, "case"); !out.acked {
		t.Fatalf("recorded transaction: %s", out.clientErr)
	}
	if st, ok := wfSettled(e, 5*time.Second); !ok {
		t.Fatalf("recorded transaction not settled: %s", st)
	}
	rec := wfRecorded{writes: ffs.Writes(), syncs: ffs.Syncs()}
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data = data[before:]
	total := 0
	for _, w := range rec.writes {
		total += w
	}
	if total != len(data) {
		t.Fatalf("writes %v sum to %d bytes, the segment grew by %d", rec.writes, total, len(data))
	}
	for off := 0; off+16 <= len(data); {
		end := off + 16 + int(binary.LittleEndian.Uint32(data[off+4:off+8]))
		rec.frames = append(rec.frames, [2]int{off, end})
		off = end
	}
	rec.total = len(data)
	return rec
}

// wfFullAt are the byte offsets of the transaction's log bytes at which
// the disk fills up: every byte of every frame header (a cut there leaves
// a torn header), one byte on either side of every frame's end, and a
// stride through the data.
func wfFullAt(rec wfRecorded, stride int) []int {
	var at []int
	for _, f := range rec.frames {
		for o := f[0]; o <= f[0]+16; o++ {
			at = append(at, o)
		}
		at = append(at, f[1]-1, f[1], f[1]+1)
	}
	for o := 0; o < rec.total; o += stride {
		at = append(at, o)
	}
	// At total every byte fits: no fault.
	at = slices.DeleteFunc(at, func(o int) bool { return o < 0 || o >= rec.total })
	slices.Sort(at)
	return slices.Compact(at)
}

// diskFullFS is a disk that fills up: once armed with a budget, the write
// that crosses it writes what fits and fails with ENOSPC, as every later
// write does. Unlike FaultFS.FailWrite(n, at) it does not depend on how
// group commit split the bytes into writes.
type diskFullFS struct {
	wal.FS
	mu    sync.Mutex
	armed bool
	left  int
}

func (d *diskFullFS) arm(budget int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed, d.left = true, budget
}

func (d *diskFullFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &diskFullFile{File: f, fs: d, name: name}, nil
}

type diskFullFile struct {
	wal.File
	fs   *diskFullFS
	name string
}

func (f *diskFullFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if !f.fs.armed || f.fs.left >= len(p) {
		if f.fs.armed {
			f.fs.left -= len(p)
		}
		return f.File.Write(p)
	}
	n, err := f.File.Write(p[:f.fs.left])
	f.fs.left -= n
	if err == nil {
		err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return n, err
}

// crashingFS calls crash (once) as soon as a write or fdatasync fails: the
// machine loses power at the fault, before anything else reaches the disk.
type crashingFS struct {
	wal.FS
	crash func()
}

func (c crashingFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return crashingFile{File: f, crash: c.crash}, nil
}

type crashingFile struct {
	wal.File
	crash func()
}

func (f crashingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		f.crash()
	}
	return n, err
}

func (f crashingFile) Sync() error {
	err := f.File.Sync()
	if err != nil {
		f.crash()
	}
	return err
}

// wfCase runs one case: fault armed by arm, stop, restart on restartFS,
// check. It returns how the case went; problems are test errors. after,
// if set, runs once the transaction ended (and settled, if acknowledged).
func wfCase(t *testing.T, name string, ffs *waltest.FaultFS, fs, restartFS wal.FS, arm, after func()) wfOutcome {
	t.Helper()
	dir := t.TempDir()
	e := wfStart(t, dir, fs)
	cl := wfClient(t, e.Bootstrap())
	ctx := context.Background()
	if out := wfTxn(ctx, cl, "warm"); !out.acked {
		t.Fatalf("%s: warm-up transaction: %s", name, out.clientErr)
	}
	if st, ok := wfSettled(e, 5*time.Second); !ok {
		t.Fatalf("%s: warm-up transaction not settled: %s", name, st)
	}
	ffs.Reset()
	arm()
	began := time.Now()
	out := wfTxn(ctx, cl, "case")
	took := time.Since(began)
	if out.acked {
		// Let the markers go out (or fail on the stopped store).
		wfSettled(e, 3*time.Second)
	}
	if after != nil {
		after()
	}
	out.fired = e.Shared.Err() != nil
	if out.fired && out.clientErr == "" && !out.acked {
		t.Errorf("%s: store failed but the client saw no error", name)
	}
	// Fail-stop answers KAFKA_STORAGE_ERROR at once: the whole
	// transaction (begin, two produces, commit or abort) ends quickly,
	// never after a client timeout.
	if took > 2*time.Second {
		t.Errorf("%s: the transaction took %v to end (%s)", name, took, out.clientErr)
	}
	cl.Close()
	wfStop(t, e)

	e = wfStart(t, dir, restartFS)
	defer wfStop(t, e)
	out.resolved, out.fenced = wfCheck(t, name, e, out.acked)
	return out
}

// wfCheck checks the recovered cluster and says how the case transaction
// resolved.
func wfCheck(t *testing.T, name string, e *Embedded, acked bool) (resolved string, fenced bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	// The restarted coordinator resends the markers of a Prepare*
	// transaction: give that round trip 5 s.
	state := wfWaitState(e, 5*time.Second)
	if strings.HasPrefix(state, "Prepare") {
		t.Errorf("%s: after restart the transaction is still %s after 5 s", name, state)
		return "", false
	}
	if state == "Ongoing" {
		// The client is gone with its transaction open: its restart
		// (InitProducerId, same id) fences and aborts it. The
		// coordinator answers CONCURRENT_TRANSACTIONS until the abort's
		// markers are written, as Kafka does; a client retries.
		fenced = true
		if err := wfFence(ctx, adm); err != nil {
			t.Errorf("%s: fencing InitProducerId: %v", name, err)
			return "", true
		}
		if state = wfWaitState(e, 5*time.Second); strings.HasPrefix(state, "Prepare") {
			t.Errorf("%s: after the fence the transaction is still %s after 5 s", name, state)
			return "", true
		}
	}
	if !wfWaitLSO(ctx, kadm.NewClient(adm), 5*time.Second) {
		t.Errorf("%s: LSO != HW 5 s after recovery (transaction %s)", name, state)
		return "", fenced
	}
	reads, err := workload.ReadCommitted(ctx, []string{e.Bootstrap()}, wfPartitions)
	if err != nil {
		t.Errorf("%s: read_committed: %v", name, err)
		return "", fenced
	}
	count := map[string]int{}
	for _, recs := range reads {
		for _, r := range recs {
			count[r.Value]++
		}
	}
	for v, n := range count {
		if n > 1 {
			t.Errorf("%s: %s visible %d times", name, v, n)
		}
	}
	if count["warm-p0"] != 1 || count["warm-p1"] != 1 {
		t.Errorf("%s: the warm-up transaction, acknowledged before the fault, is lost: %v", name, count)
	}
	c0, c1 := count["case-p0"] > 0, count["case-p1"] > 0
	switch {
	case c0 != c1:
		t.Errorf("%s: torn transaction: case-p0 visible %v, case-p1 visible %v", name, c0, c1)
	case acked && !c0:
		t.Errorf("%s: acknowledged commit lost: neither record visible", name)
	case c0:
		resolved = "committed"
	default:
		resolved = "aborted"
	}
	return resolved, fenced
}

// wfWaitState waits up to d until the id is in no Prepare* state and
// nothing is pending, and returns its state.
func wfWaitState(e *Embedded, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		det, _ := e.Coordinator.Coordinator.Describe(wfTxnID)
		if (!strings.HasPrefix(det.State, "Prepare") && !det.Pending && det.Completing == nil) || time.Now().After(deadline) {
			return det.State
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wfFence sends InitProducerId for the id, as a restarted client does,
// retrying CONCURRENT_TRANSACTIONS.
func wfFence(ctx context.Context, cl *kgo.Client) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		id := wfTxnID
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if resp.ErrorCode == 0 {
			return nil
		}
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code || time.Now().After(deadline) {
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wfWaitLSO waits up to d until LSO == HW on both partitions.
func wfWaitLSO(ctx context.Context, adm *kadm.Client, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		lso, err1 := adm.ListCommittedOffsets(ctx, "orders")
		hw, err2 := adm.ListEndOffsets(ctx, "orders")
		if err1 == nil && err2 == nil && lso.Error() == nil && hw.Error() == nil {
			same := true
			for _, p := range wfPartitions {
				l, _ := lso.Lookup(p.Topic, p.Partition)
				h, _ := hw.Lookup(p.Topic, p.Partition)
				same = same && l.Offset == h.Offset
			}
			if same {
				return true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wfTally counts cases by how they went, for the log.
type wfTally struct {
	mu                                        sync.Mutex
	cases, fired, acked, unknown, failedEarly int
	committed, aborted, fenced                int
	errKinds                                  map[string]int
}

func (ty *wfTally) add(o wfOutcome) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.cases++
	if o.fired {
		ty.fired++
	}
	switch {
	case o.acked:
		ty.acked++
	case o.commitTried:
		ty.unknown++
	default:
		ty.failedEarly++
	}
	switch o.resolved {
	case "committed":
		ty.committed++
	case "aborted":
		ty.aborted++
	}
	if o.fenced {
		ty.fenced++
	}
	if o.clientErr != "" {
		if ty.errKinds == nil {
			ty.errKinds = map[string]int{}
		}
		ty.errKinds[wfErrKind(o.clientErr)]++
	}
}

func (ty *wfTally) String() string {
	var kinds []string
	for k, n := range ty.errKinds {
		kinds = append(kinds, fmt.Sprintf("%dx %s", n, k))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%d cases, fault fired in %d; client: %d commits acknowledged, %d commits failed (unknown), %d failed before commit; "+
		"after restart: %d committed, %d aborted, %d Ongoing ended by a fencing InitProducerId; client errors: %s",
		ty.cases, ty.fired, ty.acked, ty.unknown, ty.failedEarly, ty.committed, ty.aborted, ty.fenced, strings.Join(kinds, "; "))
}

// wfErrKind shortens a client error to its step and Kafka error name.
func wfErrKind(s string) string {
	step, rest, _ := strings.Cut(s, ": ")
	if i := strings.Index(rest, ":"); i > 0 {
		rest = rest[:i]
	}
	return step + ": " + rest
}

func TestEmbeddedTxnWALFaultAtEveryOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ~310 cluster restarts")
	}
	rec := wfRecord(t)
	t.Logf("recorded transaction: %d bytes in writes %v, frames %v, %d fdatasyncs", rec.total, rec.writes, rec.frames, rec.syncs)
	start := time.Now()
	// The disk fills up at every byte offset of interest.
	var full wfTally
	for _, at := range wfFullAt(rec, 8) {
		name := fmt.Sprintf("disk full at byte %d of %d", at, rec.total)
		ffs := waltest.NewFaultFS(wal.OSFS{})
		dfs := &diskFullFS{FS: ffs}
		full.add(wfCase(t, name, ffs, dfs, nil, func() { dfs.arm(at) }, nil))
	}
	t.Logf("disk full: %s; %v", &full, time.Since(start).Round(time.Millisecond))
	// FaultFS: the n-th write stops at every frame boundary in it (as
	// the recording split the bytes; a run split otherwise may not
	// fire), the n-th fdatasync fails.
	start = time.Now()
	var faults wfTally
	for i := range rec.writes {
		for _, at := range rec.writeBoundaries(i) {
			name := fmt.Sprintf("write %d fails at byte %d of %d", i+1, at, rec.writes[i])
			ffs := waltest.NewFaultFS(wal.OSFS{})
			faults.add(wfCase(t, name, ffs, ffs, nil, func() { ffs.FailWrite(i+1, at) }, nil))
		}
	}
	for n := 1; n <= rec.syncs; n++ {
		name := fmt.Sprintf("fdatasync %d fails", n)
		ffs := waltest.NewFaultFS(wal.OSFS{})
		faults.add(wfCase(t, name, ffs, ffs, nil, func() { ffs.FailSync(n) }, nil))
	}
	t.Logf("FaultFS: %s; %v", &faults, time.Since(start).Round(time.Millisecond))
}

func TestEmbeddedTxnPowerLossAtEveryRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster restart per record boundary")
	}
	rec := wfRecord(t)
	t.Logf("recorded transaction: %d bytes in writes %v, frames %v, %d fdatasyncs", rec.total, rec.writes, rec.frames, rec.syncs)
	var ty wfTally
	start := time.Now()
	// crashCase runs a case on a fresh CrashFS that loses power at the
	// armed fault (or, with no fault, once the transaction settled).
	crashCase := func(name string, arm func(*waltest.FaultFS, *diskFullFS), crashAfter bool) {
		cfs := waltest.NewCrashFS()
		crash := sync.OnceFunc(cfs.Crash)
		ffs := waltest.NewFaultFS(cfs)
		dfs := &diskFullFS{FS: ffs}
		var after func()
		if crashAfter {
			after = crash
		}
		o := wfCase(t, name, ffs, crashingFS{FS: dfs, crash: crash}, cfs, func() { arm(ffs, dfs) }, after)
		if crashAfter {
			o.fired = true
		}
		ty.add(o)
	}
	// The machine stops when the log's bytes reach a record's start, the
	// end of its header, or the byte before its end. Bytes not yet
	// fdatasync'd are lost whole, so where inside a record makes no
	// difference; which records' fdatasync completed does.
	for _, f := range rec.frames {
		for _, at := range []int{f[0], f[0] + 16, f[1] - 1} {
			crashCase(fmt.Sprintf("power loss at byte %d of %d", at, rec.total),
				func(_ *waltest.FaultFS, dfs *diskFullFS) { dfs.arm(at) }, false)
		}
	}
	for n := 1; n <= rec.syncs; n++ {
		crashCase(fmt.Sprintf("power loss in fdatasync %d", n), func(ffs *waltest.FaultFS, _ *diskFullFS) { ffs.FailSync(n) }, false)
	}
	crashCase("power loss after the last fdatasync", func(*waltest.FaultFS, *diskFullFS) {}, true)
	t.Logf("power loss: %s; %v", &ty, time.Since(start).Round(time.Millisecond))
}
