package integration

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/freeport"
)

// "A data dir written by the current release opens after the redesign:
// migrated on first start with one log line saying so (and tested with a
// data dir produced by today's binary, not rebuilt by the new code)."
// The data dirs in testdata/migration were written by the release before
// the write-ahead log (commit 28e9227); testdata/migration/README.md says
// how, and what they hold.

// migratedLine is the log line of storage.Open taking over a bbolt file
// written before the log.
const migratedLine = "storage: data written before the write-ahead log"

// migrationBench are the records of topic bench visible read_committed in
// the fixtures, per partition (bench has 4; nothing was written to 3).
var migrationBench = map[string]map[int32]int{
	"up":  {0: 77, 1: 38, 2: 39, 3: 0},
	"sep": {0: 313, 1: 152, 2: 161, 3: 0},
}

// extractFixture unpacks testdata/migration/NAME-28e9227.tar.gz into a new
// dir.
func extractFixture(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "migration", name+"-28e9227.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Fatalf("%s: entry %q outside the dir", name, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(path, b, 0o600)
				}
			}
		default:
			t.Fatalf("%s: entry %q of type %c", name, h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// countLines counts the lines of the log at path that contain s.
func countLines(t *testing.T, path, s string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), s)
}

func wantCounts(t *testing.T, when string, got, want map[int32]int) {
	t.Helper()
	for p, n := range want {
		if got[p] != n {
			t.Errorf("%s: bench/%d has %d committed records, want %d (all: %v)", when, p, got[p], n, got)
		}
	}
}

func plusOne(m map[int32]int) map[int32]int {
	out := map[int32]int{}
	for p, n := range m {
		out[p] = n + 1
	}
	return out
}

// TestMigrateUpDataDir: a `txncoord up` data dir of commit 28e9227
// (cluster.yaml and txncoord.db, no log) starts with the new binary, which
// says once that it took the file over, and serves every committed record;
// a new transaction commits, and after a restart (no migration line) all
// are there.
func TestMigrateUpDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	dir := extractFixture(t, "up")
	logs := t.TempDir()
	args := []string{"up", "--data-dir", dir, "--listen", upListen(t), "--admin-listen=",
		"--topics", "bench:4,orders:3", "--log-level", "info"}
	up := startProc(t, "up-1", logs, txncoordBinary(t), args...)
	bootstrap := bootstrapOf(t, up.ready)
	if n := countLines(t, up.log, migratedLine); n != 1 {
		t.Errorf("the first start logged %q %d times, want once:\n%s", migratedLine, n, tail(up.log))
	}
	want := migrationBench["up"]
	wantCounts(t, "after the migration", committedCounts(t, bootstrap, "bench", 4), want)
	commitTxns(t, bootstrap, "after-migration", "bench", 4, 1)
	up.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Errorf("no log beside the migrated file: %v", err)
	}

	args[4] = upListen(t)
	up = startProc(t, "up-2", logs, txncoordBinary(t), args...)
	if n := countLines(t, up.log, migratedLine); n != 0 {
		t.Errorf("the restart logged %q again", migratedLine)
	}
	wantCounts(t, "after the restart", committedCounts(t, bootstrapOf(t, up.ready), "bench", 4), plusOne(want))
	up.stop(t)
}

// sepCluster runs the separate-process fixture: leaders 1-3 and the
// coordinator, each on its own data dir of the fixture.
type sepCluster struct {
	t       *testing.T
	dir     string
	cf      string
	logs    string
	procs   []*proc
	started int
}

func (c *sepCluster) start() {
	c.t.Helper()
	c.started++
	bin := txncoordBinary(c.t)
	c.procs = nil
	for id := 1; id <= 3; id++ {
		c.procs = append(c.procs, startProc(c.t, fmt.Sprintf("leader-%d-run-%d", id, c.started), c.logs, bin, "leader",
			"--cluster", c.cf, "--node-id", fmt.Sprint(id), "--data-dir", filepath.Join(c.dir, fmt.Sprintf("leader%d", id)), "--log-level", "info"))
	}
	c.procs = append(c.procs, startProc(c.t, fmt.Sprintf("coordinator-run-%d", c.started), c.logs, bin, "coordinator",
		"--cluster", c.cf, "--data-dir", filepath.Join(c.dir, "coord"), "--admin-listen=", "--log-level", "info"))
}

func (c *sepCluster) stop() {
	c.t.Helper()
	for i := len(c.procs) - 1; i >= 0; i-- { // the coordinator first
		c.procs[i].stop(c.t)
	}
}

// migrated counts the migration lines per process of the last start.
func (c *sepCluster) migrated() map[string]int {
	out := map[string]int{}
	for _, p := range c.procs {
		out[p.name] = countLines(c.t, p.log, migratedLine)
	}
	return out
}

// TestMigrateSeparateProcessDataDirs: the data dirs of a coordinator and
// three leaders run as separate processes by commit 28e9227 (one bbolt
// file each, no log) start with the new binary, each process saying once
// that it took its file over; every committed record is served, a new
// transaction commits, and after a restart all are there.
func TestMigrateSeparateProcessDataDirs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	dir := extractFixture(t, "sep")
	// The cluster file holds the ports: move them to free ones.
	f, err := cluster.Load(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	f.Coordinator.Addr = fmt.Sprintf("127.0.0.1:%d", base)
	for i := range f.Leaders {
		f.Leaders[i].Addr = fmt.Sprintf("127.0.0.1:%d", base+int(f.Leaders[i].NodeID))
	}
	cf := filepath.Join(dir, "cluster.yaml")
	if err := f.Write(cf); err != nil {
		t.Fatal(err)
	}
	c := &sepCluster{t: t, dir: dir, cf: cf, logs: t.TempDir()}
	c.start()
	for name, n := range c.migrated() {
		if n != 1 {
			t.Errorf("%s logged %q %d times on its first start, want once", name, migratedLine, n)
		}
	}
	bootstrap := f.Coordinator.Addr
	want := migrationBench["sep"]
	wantCounts(t, "after the migration", committedCounts(t, bootstrap, "bench", 4), want)
	commitTxns(t, bootstrap, "after-migration", "bench", 4, 1)
	c.stop()

	c.start()
	for name, n := range c.migrated() {
		if n != 0 {
			t.Errorf("%s logged %q again on the restart", name, migratedLine)
		}
	}
	wantCounts(t, "after the restart", committedCounts(t, bootstrap, "bench", 4), plusOne(want))
	c.stop()
}
