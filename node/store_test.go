package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/storage"
)

// twoLeaderFile is a cluster file (coordinator, two 4.2 leaders, topic
// orders with 4 partitions) on freshly bound loopback listeners.
func twoLeaderFile(t *testing.T) (*cluster.File, map[int32]net.Listener) {
	t.Helper()
	listeners := map[int32]net.Listener{}
	addr := func(id int32) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id] = ln
		return ln.Addr().String()
	}
	f := &cluster.File{ClusterID: "shared-log-test", DefaultPartitions: 2, Topics: map[string]int32{"orders": 4},
		Coordinator: &cluster.Node{NodeID: 0, Addr: addr(0), KafkaVersion: "4.2"}}
	for id := int32(1); id <= 2; id++ {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: addr(id), KafkaVersion: "4.2"})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f, listeners
}

// startTwoLeaders starts `txncoord up` on twoLeaderFile in a fresh data
// dir, stopped when the test ends.
func startTwoLeaders(t *testing.T) (*cluster.File, *Embedded) {
	t.Helper()
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWithin(t, e.Stop) })
	return f, e
}

// startTwoLeadersAdmin is startTwoLeaders with the admin API on a free
// loopback port and marker version discovery on.
func startTwoLeadersAdmin(t *testing.T) (*cluster.File, *Embedded) {
	t.Helper()
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, AdminListen: "127.0.0.1:0",
		MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWithin(t, e.Stop) })
	return f, e
}

func stopWithin(t *testing.T, stop func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// countCommitted reads orders from the start, read_committed, until want
// records arrived, then checks for a moment that no more come.
func countCommitted(t *testing.T, bootstrap string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := kgo.NewOffset().AtStart()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: start, 1: start, 2: start, 3: start}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records", got, want)
		}
		got += fs.NumRecords()
	}
	quiet, cancelQuiet := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelQuiet()
	got += cl.PollFetches(quiet).NumRecords()
	if got != want {
		t.Fatalf("read %d committed records, want %d", got, want)
	}
}

func topLevelBuckets(t *testing.T, path string) []string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names []string
	db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bbolt.Bucket) error { names = append(names, string(name)); return nil })
	})
	sort.Strings(names)
	return names
}

// `txncoord up` keeps every node in one file, each in its own bucket, with
// one process log beside it, and a restart on it loses nothing: the
// committed records and the coordinator's state are back.
func TestEmbeddedSharesOneFile(t *testing.T) {
	dir := t.TempDir()
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if e.Shared == nil {
		t.Fatal("a fresh data dir did not get the shared file")
	}
	runTV2Transactions(t, e.Bootstrap(), 3)
	stopWithin(t, e.Stop)

	if got := strings.Join(topLevelBuckets(t, filepath.Join(dir, SharedStoreFile)), ","); got != "_storage,authmeta,coordinator,groups,leader-0,leader-1,leader-2,topics" {
		t.Fatalf("buckets of %s: %s", SharedStoreFile, got)
	}
	if segs, err := filepath.Glob(filepath.Join(dir, storage.WALDir, "*.wal")); err != nil || len(segs) == 0 {
		t.Fatalf("no log segment in %s: %v %v", storage.WALDir, segs, err)
	}
	for _, old := range []string{"coordinator/txnlog.db", "leader-1/leader-1.db"} {
		if _, err := os.Stat(filepath.Join(dir, old)); err == nil {
			t.Fatalf("%s written next to the shared file", old)
		}
	}

	f, lns = twoLeaderFile(t)
	e, err = StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, e.Stop)
	countCommitted(t, e.Bootstrap(), 12)
	if d, ok := e.Coordinator.Coordinator.Describe("in-process"); !ok || d.State != "CompleteCommit" {
		t.Fatalf("after restart: %+v (found %v), want CompleteCommit", d, ok)
	}
}

// A data dir written before the shared file (one file per node, as the
// separate-process nodes still write) is refused by `up` with a message
// saying what to do, and left as it was.
func TestEmbeddedRefusesPerNodeLayout(t *testing.T) {
	dir := t.TempDir()
	f, lns := twoLeaderFile(t)
	view := cluster.NewView(f)
	var leaders []*Leader
	for _, n := range f.Leaders {
		l, err := StartLeader(LeaderConfig{View: view, NodeID: n.NodeID, DataDir: dir, Listener: lns[n.NodeID], Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		leaders = append(leaders, l)
	}
	c, err := StartCoordinator(CoordinatorConfig{View: view, DataDir: dir, MarkerVersionDiscovery: true, Listener: lns[0], Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runTV2Transactions(t, c.Server.Addr().String(), 3)
	stopWithin(t, c.Stop)
	for _, l := range leaders {
		stopWithin(t, l.Stop)
	}

	f, lns = twoLeaderFile(t)
	_, err = StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "per-node layout") {
		t.Fatalf("up on a per-node data dir: %v, want a refusal naming the layout", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SharedStoreFile)); err == nil {
		t.Fatalf("%s created in a per-node data dir", SharedStoreFile)
	}
}
