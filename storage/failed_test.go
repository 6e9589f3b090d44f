package storage

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txncoord/txncoord/internal/logtest"
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

// TestOneErrorLinePerFailure: the log and the applier can hit the same
// full disk in the same millisecond; the store writes one error line for
// the failure however the two race, the later report a Warn line. The
// log's own failure goes through the store (wal.Options.OnFail), not
// straight to the logger.
func TestOneErrorLinePerFailure(t *testing.T) {
	for round := 0; round < 20; round++ {
		var buf logtest.Buffer
		fs := waltest.NewFaultFS(wal.OSFS{})
		st := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{FS: fs, Log: buf.Logger()})
		sp := space(t, st, "a", kindA)
		fs.FailSync(fs.Syncs() + 1)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-mustDone(sp.Submit([]byte("k=v"), nil))
		}()
		go func() {
			defer wg.Done()
			st.reportFailure(errors.New("no space left on device"), st.path, "storage: applying the log failed: every write of the process stops")
		}()
		wg.Wait()
		st.Close()
		errs, warns := strings.Count(buf.String(), `"level":"error"`), strings.Count(buf.String(), `"level":"warn"`)
		if errs != 1 || warns != 1 {
			t.Fatalf("round %d: %d error and %d warn lines, want 1 and 1:\n%s", round, errs, warns, buf.String())
		}
	}
}

// mustDone returns a Submit's completion channel.
func mustDone(_ wal.Pos, done <-chan error) <-chan error { return done }
