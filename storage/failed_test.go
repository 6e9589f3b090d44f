package storage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// TestFailedClosesOnLogFailure: Failed is closed once the log fails (so a
// request waiting for a write that can never come gives up at once), and
// stays open when the store merely closes.
func TestFailedClosesOnLogFailure(t *testing.T) {
	fs := waltest.NewFaultFS(wal.OSFS{})
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{FS: fs})
	sp := space(t, st, "a", kindA)
	select {
	case <-st.Failed():
		t.Fatal("Failed closed before any failure")
	default:
	}
	fs.FailSync(fs.Syncs() + 1)
	if _, done := sp.Submit([]byte("k=v"), nil); <-done == nil {
		t.Fatal("a record whose fdatasync failed was reported durable")
	}
	select {
	case <-st.Failed():
	case <-time.After(time.Second):
		t.Fatal("Failed not closed within a second of the log's failure")
	}
	st.Close()

	healthy := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	if err := healthy.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-healthy.Failed():
		t.Fatal("Failed closed by a plain Close")
	case <-time.After(100 * time.Millisecond):
	}
}
