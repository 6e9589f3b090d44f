package integration

import (
	"context"
	bin "encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/internal/freeport"
	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/storage"
)

// Damaged data dirs of `txncoord up`, with the real binary: "a record or
// page that fails its checksum, a truncated bbolt file, a zero-length or
// missing store in a data dir that has a cluster.yaml → refuse to start
// with one line on stderr naming the file and what is wrong, exit 1, never
// a Go panic or stack trace, never a silent empty cluster (an explicit
// --force-new-cluster flag may start over, saying what it discards). A
// second process on the same data dir gets 'data dir DIR is in use by
// pid N'."

const damagedTopic, damagedPartitions = "dmg", 3

// upListen returns a --listen address whose port and the next three are
// free (up puts leader i on port+i).
func upListen(t *testing.T) string {
	t.Helper()
	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", base)
}

// commitTxns commits n transactions of one record per partition of topic
// (a TV2 kgo producer).
func commitTxns(t *testing.T, bootstrap, txnID, topic string, partitions int32, n int) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range partitions {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-p%d", txnID, i, p)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// committedCounts counts the records of topic visible read_committed, per
// partition (after every transaction ended: LSO == HW).
func committedCounts(t *testing.T, bootstrap, topic string, partitions int32) map[int32]int {
	t.Helper()
	var ps []checker.Partition
	for p := range partitions {
		ps = append(ps, checker.Partition{Topic: topic, Partition: p})
	}
	reads, err := workload.ReadCommitted(testCtx(t, 60*time.Second), []string{bootstrap}, ps)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int32]int{}
	for p, recs := range reads {
		counts[p.Partition] = len(recs)
	}
	return counts
}

// bootstrapOf parses the ready line of `txncoord up`.
func bootstrapOf(t *testing.T, ready string) string {
	t.Helper()
	m := regexp.MustCompile(`bootstrap=(\S+)`).FindStringSubmatch(ready)
	if m == nil {
		t.Fatalf("ready line %q has no bootstrap", ready)
	}
	return m[1]
}

// damageFixture runs `txncoord up` on a new data dir, commits 10
// transactions, stops it with SIGTERM, and returns the data dir.
func damageFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	p := startProc(t, "fixture-up", t.TempDir(), txncoordBinary(t), "up", "--data-dir", dir, "--listen", upListen(t),
		"--admin-listen=", "--topics", fmt.Sprintf("%s:%d", damagedTopic, damagedPartitions))
	commitTxns(t, bootstrapOf(t, p.ready), "damage", damagedTopic, damagedPartitions, 10)
	p.stop(t)
	return dir
}

// copyTree copies the data dir src to a new dir.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// runUp runs `txncoord up` on dir to its end (a refusal) or for at most
// 30 s, with info logs as JSON on stderr, and returns stdout, stderr and
// the exit code (-1: still running, killed).
func runUp(t *testing.T, dir string, extra ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"up", "--data-dir", dir, "--listen", upListen(t), "--admin-listen=",
		"--topics", fmt.Sprintf("%s:%d", damagedTopic, damagedPartitions)}, extra...)
	cmd := exec.CommandContext(ctx, txncoordBinary(t), args...)
	cmd.Env = append(os.Environ(), "TXNCOORD_LOG_LEVEL=info", "TXNCOORD_LOG_FORMAT=json")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ctx.Err() != nil {
		code = -1
	} else if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// errorLines are the lines of stderr that are not JSON log lines.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "{") {
			out = append(out, l)
		}
	}
	return out
}

// wantRefused asserts a refusal: exit 1, no ready line, one error line
// "txncoord: ..." on stderr that says every one of says (the file and
// what is wrong), no panic or stack trace anywhere.
func wantRefused(t *testing.T, stdout, stderr string, code int, says ...string) {
	t.Helper()
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if strings.Contains(stdout, "txncoord ready") {
		t.Errorf("it started: %s", stdout)
	}
	for _, bad := range []string{"panic", "goroutine ", "runtime/", ".go:"} {
		if strings.Contains(stdout+stderr, bad) {
			t.Errorf("output has %q (a panic or stack trace):\n%s%s", bad, stdout, stderr)
		}
	}
	lines := errorLines(stderr)
	if len(lines) != 1 {
		t.Fatalf("%d error lines on stderr, want 1:\n%s", len(lines), stderr)
	}
	if !strings.HasPrefix(lines[0], "txncoord: ") {
		t.Errorf("error line %q does not start with \"txncoord: \"", lines[0])
	}
	for _, s := range says {
		if !strings.Contains(lines[0], s) {
			t.Errorf("error line %q does not say %q", lines[0], s)
		}
	}
	t.Logf("refused: %s", lines[0])
}

// frames returns the offsets of the frames of a log segment (16-byte
// header: crc, length, pos; then the data).
func frames(t *testing.T, seg []byte) []int {
	t.Helper()
	var offs []int
	for off := 0; off+16 <= len(seg); {
		offs = append(offs, off)
		off += 16 + int(bin.LittleEndian.Uint32(seg[off+4:]))
	}
	return offs
}

func segmentOf(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, storage.WALDir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments of %s: %v %v, want one", dir, segs, err)
	}
	return segs[0]
}

func TestDamagedDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	fixture := damageFixture(t)
	seg := segmentOf(t, fixture)
	segBytes, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	offs := frames(t, segBytes)
	if len(offs) < 4 {
		t.Fatalf("the log holds %d records, want some to damage", len(offs))
	}

	// (a) A byte of a record in the middle of the log, with valid
	// records after it: not a torn write.
	t.Run("wal-record-checksum", func(t *testing.T) {
		dir := copyTree(t, fixture)
		seg := segmentOf(t, dir)
		b, _ := os.ReadFile(seg)
		at := offs[len(offs)/2] + 16 + 1 // in the data of a middle record
		b[at] ^= 0x40
		os.WriteFile(seg, b, 0o600)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, seg, "checksum mismatch", fmt.Sprintf("offset %d", offs[len(offs)/2]))
		if got, _ := os.ReadFile(seg); string(got) != string(b) {
			t.Error("the refused start changed the damaged segment")
		}
	})
	// (a') The same in a frame header's length field.
	t.Run("wal-record-length", func(t *testing.T) {
		dir := copyTree(t, fixture)
		seg := segmentOf(t, dir)
		b, _ := os.ReadFile(seg)
		b[offs[1]+4] ^= 0x01
		os.WriteFile(seg, b, 0o600)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, seg)
	})
	// (b) The bbolt file cut to half of what its pages use (the file is
	// longer: bbolt grows it ahead of its pages, so a cut within that
	// tail loses nothing).
	t.Run("db-truncated-half", func(t *testing.T) {
		dir := copyTree(t, fixture)
		db := filepath.Join(dir, node.SharedStoreFile)
		os.Truncate(db, bboltUsedBytes(t, db)/2)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, db)
	})
	// (b') Cut to less than its two meta pages.
	t.Run("db-truncated-short", func(t *testing.T) {
		dir := copyTree(t, fixture)
		db := filepath.Join(dir, node.SharedStoreFile)
		os.Truncate(db, 3000)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, db)
	})
	// (b'') Both meta pages fail their checksum.
	t.Run("db-meta-checksums", func(t *testing.T) {
		dir := copyTree(t, fixture)
		db := filepath.Join(dir, node.SharedStoreFile)
		b, _ := os.ReadFile(db)
		pageSize := int(bin.LittleEndian.Uint32(b[16+8:])) // meta: magic, version, page size
		for _, page := range []int{0, 1} {
			b[page*pageSize+16+40] ^= 0xff // the meta's high water mark (pgid)
		}
		os.WriteFile(db, b, 0o600)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, db)
	})
	// Pages of the tree zeroed (bbolt pages carry no checksum, but each
	// names itself: a zeroed page is not the page it should be).
	t.Run("db-pages-zeroed", func(t *testing.T) {
		dir := copyTree(t, fixture)
		db := filepath.Join(dir, node.SharedStoreFile)
		b, _ := os.ReadFile(db)
		pageSize := int(bin.LittleEndian.Uint32(b[16+8:]))
		hw := int(bin.LittleEndian.Uint64(b[16+40:])) // meta 0: its high water mark (pgid)
		clear(b[2*pageSize : min(hw*pageSize, len(b))])
		os.WriteFile(db, b, 0o600)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, db, "damaged")
	})
	// (c) The bbolt file empty beside cluster.yaml.
	t.Run("db-zero-length", func(t *testing.T) {
		dir := copyTree(t, fixture)
		db := filepath.Join(dir, node.SharedStoreFile)
		os.Truncate(db, 0)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, db, "empty", "--force-new-cluster")
	})
	// (d) The bbolt file missing beside cluster.yaml.
	t.Run("db-missing", func(t *testing.T) {
		dir := copyTree(t, fixture)
		db := filepath.Join(dir, node.SharedStoreFile)
		os.Remove(db)
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, db, "missing", "--force-new-cluster")
		if _, err := os.Stat(db); err == nil {
			t.Error("the refused start created the store")
		}
	})
	// The log's segments removed: bbolt was applied from a log that is
	// gone.
	t.Run("wal-segments-removed", func(t *testing.T) {
		dir := copyTree(t, fixture)
		os.Remove(segmentOf(t, dir))
		stdout, stderr, code := runUp(t, dir)
		wantRefused(t, stdout, stderr, code, filepath.Join(dir, node.SharedStoreFile), filepath.Join(dir, storage.WALDir))
	})
	// (f) --force-new-cluster on a damaged dir starts an empty cluster
	// and logs what it moved aside, which is kept.
	t.Run("force-new-cluster", func(t *testing.T) {
		dir := copyTree(t, fixture)
		seg := segmentOf(t, dir)
		b, _ := os.ReadFile(seg)
		b[offs[len(offs)/2]+16+1] ^= 0x40
		os.WriteFile(seg, b, 0o600)
		p := startProc(t, "force-new", t.TempDir(), txncoordBinary(t), "up", "--data-dir", dir, "--listen", upListen(t),
			"--admin-listen=", "--topics", fmt.Sprintf("%s:%d", damagedTopic, damagedPartitions), "--force-new-cluster")
		bootstrap := bootstrapOf(t, p.ready)
		if got := committedCounts(t, bootstrap, damagedTopic, damagedPartitions); got[0]+got[1]+got[2] != 0 {
			t.Errorf("the new cluster has records: %v", got)
		}
		commitTxns(t, bootstrap, "after-force", damagedTopic, damagedPartitions, 1)
		p.stop(t)
		log, _ := os.ReadFile(p.log)
		for _, what := range []string{filepath.Join(dir, node.SharedStoreFile), filepath.Join(dir, storage.WALDir)} {
			re := regexp.MustCompile(regexp.QuoteMeta(what+" -> "+what) + `\.discarded-[0-9TZ-]+`)
			moved := re.FindString(string(log))
			if moved == "" || !strings.Contains(string(log), "--force-new-cluster") {
				t.Errorf("no log line says %s was moved aside:\n%s", what, log)
				continue
			}
			if _, err := os.Stat(strings.SplitN(moved, " -> ", 2)[1]); err != nil {
				t.Errorf("the discarded copy: %v", err)
			}
		}
	})
}

// (e) A second `txncoord up` on a data dir in use is refused with "data
// dir DIR is in use by pid N", N the first process; the first goes on.
// So is --force-new-cluster: it moves nothing from under the first.
func TestDataDirInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	dir := filepath.Join(t.TempDir(), "data")
	first := startProc(t, "first-up", t.TempDir(), txncoordBinary(t), "up", "--data-dir", dir, "--listen", upListen(t),
		"--admin-listen=", "--topics", fmt.Sprintf("%s:%d", damagedTopic, damagedPartitions))
	bootstrap := bootstrapOf(t, first.ready)
	commitTxns(t, bootstrap, "first", damagedTopic, damagedPartitions, 3)
	want := fmt.Sprintf("data dir %s is in use by pid %d", dir, first.cmd.Process.Pid)

	stdout, stderr, code := runUp(t, dir)
	wantRefused(t, stdout, stderr, code, want)
	stdout, stderr, code = runUp(t, dir, "--force-new-cluster")
	wantRefused(t, stdout, stderr, code, want)
	if _, err := os.Stat(filepath.Join(dir, node.SharedStoreFile)); err != nil {
		t.Fatalf("the store of the running process: %v", err)
	}

	commitTxns(t, bootstrap, "first", damagedTopic, damagedPartitions, 2)
	if got := committedCounts(t, bootstrap, damagedTopic, damagedPartitions); got[0] != 5 || got[1] != 5 || got[2] != 5 {
		t.Errorf("the first process after the refused second: %v, want 5 per partition", got)
	}
	first.stop(t)
}

// bboltUsedBytes is how far the pages of the bbolt file at path reach (its
// high-water mark), read read-only.
func bboltUsedBytes(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var size int64
	db.View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil })
	return size
}
