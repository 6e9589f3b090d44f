package coordinator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/txncoord/txncoord/txnlog"
)

// TestMillionIdleIDs measures what an idle transactional id costs the
// coordinator: it writes TXNCOORD_MILLION_IDS (default 1,000,000) Empty and
// CompleteCommit records to a bbolt store, then times Open (load + epoch
// bump) and the heap it keeps, per id. It reports figures and fails only if
// Open fails or loses ids, never on a number. It takes about a minute, so
// it runs only when TXNCOORD_MILLION_IDS is set:
//
//	TXNCOORD_MILLION_IDS=1000000 go test ./coordinator -run MillionIdleIDs -v
func TestMillionIdleIDs(t *testing.T) {
	raw := os.Getenv("TXNCOORD_MILLION_IDS")
	if raw == "" {
		t.Skip("set TXNCOORD_MILLION_IDS=1000000 to run")
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n <= 0 {
		t.Fatalf("TXNCOORD_MILLION_IDS=%q", raw)
	}
	path := filepath.Join(t.TempDir(), "txnlog.db")
	store, err := txnlog.OpenBolt(path, txnlog.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const perBatch = 10000
	now := time.Now().UnixMilli()
	for base := 0; base < n; base += perBatch {
		b := txnlog.Batch{}
		for i := base; i < min(n, base+perBatch); i++ {
			state := txnlog.CompleteCommit
			if i%2 == 0 {
				state = txnlog.Empty
			}
			b.Puts = append(b.Puts, txnlog.TxnMetadata{TransactionalID: fmt.Sprintf("app-%08d", i),
				ProducerID: int64(i), PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 3, LastProducerEpoch: 2,
				TimeoutMs: 60000, State: state, StartTimestamp: now, LastUpdateTimestamp: now, ClientTransactionVersion: 2})
		}
		if err := txnlog.Apply(context.Background(), store, b); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d ids in %v", n, time.Since(start).Round(time.Millisecond))
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil {
		t.Logf("store file: %.1f MiB", float64(fi.Size())/(1<<20))
	}

	before := heapInUse()
	start = time.Now()
	store, err = txnlog.OpenBolt(path, txnlog.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, _ := openTest(t, testView("127.0.0.1:1"), store, false)
	openTime := time.Since(start)
	after := heapInUse()
	c.mu.Lock()
	loaded := len(c.txns)
	c.mu.Unlock()
	if loaded != n {
		t.Fatalf("loaded %d ids, want %d", loaded, n)
	}
	perID := float64(after-before) / float64(n)
	t.Logf("restart (OpenBolt + coordinator.Open) of %d ids: %v; heap kept: %.1f MiB, %.0f bytes per idle id",
		n, openTime.Round(time.Millisecond), float64(after-before)/(1<<20), perID)
	runtime.KeepAlive(c)
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
