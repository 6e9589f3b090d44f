package wal_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestRoundTripAcrossSegments(t *testing.T) {
	big := bytes.Repeat([]byte("b"), 300)
	for _, tc := range []struct {
		name        string
		segmentSize int64
		recs        [][]byte
		perAppend   int
		minSegments int
	}{
		{"one segment", 0, [][]byte{record(1), record(2), record(3)}, 1, 1},
		{"empty records", 0, [][]byte{{}, record(2), {}}, 3, 1},
		{"a roll every few records", 128, recordsN(40), 1, 10},
		{"rolls inside one Append", 128, recordsN(40), 40, 10},
		{"records larger than a segment", 100, [][]byte{big, record(2), big, big}, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, wal.Options{SegmentSize: tc.segmentSize})
			if l.First() != 0 || l.Last() != 0 || l.Durable() != 0 {
				t.Fatalf("new log: First %d Last %d Durable %d, want 0 0 0", l.First(), l.Last(), l.Durable())
			}
			for i := 0; i < len(tc.recs); i += tc.perAppend {
				p := appendDurable(t, l, tc.recs[i:min(i+tc.perAppend, len(tc.recs))]...)
				if want := wal.Pos(min(i+tc.perAppend, len(tc.recs))); p != want {
					t.Fatalf("Append returned Pos %d, want %d", p, want)
				}
			}
			check := func(l *wal.Log) {
				t.Helper()
				n := wal.Pos(len(tc.recs))
				if l.First() != 1 || l.Last() != n || l.Durable() != n {
					t.Fatalf("First %d Last %d Durable %d, want 1 %d %d", l.First(), l.Last(), l.Durable(), n, n)
				}
				got := readAll(t, l)
				if len(got) != len(tc.recs) {
					t.Fatalf("read %d records, want %d", len(got), len(tc.recs))
				}
				for i, want := range tc.recs {
					if !bytes.Equal(got[wal.Pos(i+1)], want) {
						t.Fatalf("record %d = %q, want %q", i+1, got[wal.Pos(i+1)], want)
					}
				}
				// Read from the middle starts there.
				from := n/2 + 1
				first := wal.Pos(0)
				if err := l.Read(from, func(p wal.Pos, _ []byte) error {
					if first == 0 {
						first = p
					}
					return nil
				}); err != nil || first != from {
					t.Fatalf("Read(%d) started at %d, err %v", from, first, err)
				}
			}
			check(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if n := len(segmentFiles(t, dir)); n < tc.minSegments {
				t.Fatalf("%d segment files, want at least %d", n, tc.minSegments)
			}
			reopened := openLog(t, dir, wal.Options{SegmentSize: tc.segmentSize})
			check(reopened)
			// It goes on where it stopped.
			if p := appendDurable(t, reopened, record(99)); p != wal.Pos(len(tc.recs)+1) {
				t.Fatalf("first Append after reopen: Pos %d, want %d", p, len(tc.recs)+1)
			}
		})
	}
}

func recordsN(n int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = record(i + 1)
	}
	return recs
}

func TestReadStopsAtFnError(t *testing.T) {
	l := openLog(t, t.TempDir(), wal.Options{})
	appendDurable(t, l, recordsN(5)...)
	stop := errors.New("stop")
	calls := 0
	err := l.Read(1, func(p wal.Pos, _ []byte) error {
		calls++
		if p == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("Read returned %v after %d calls, want stop after 3", err, calls)
	}
}

// TestConcurrentAppendOrder: the log's order is the order of Append calls,
// each call's records are contiguous, and Append returns their Pos.
func TestConcurrentAppendOrder(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, wal.Options{SegmentSize: 4096})
	const writers, appends = 8, 150
	var mu sync.Mutex
	appended := map[wal.Pos][]byte{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := wal.Pos(0)
			for i := range appends {
				recs := make([][]byte, 1+i%3)
				for k := range recs {
					recs[k] = []byte{byte(w), byte(i), byte(i >> 8), byte(k)}
				}
				last, err := l.Append(recs...)
				if err != nil {
					t.Error(err)
					return
				}
				first := last - wal.Pos(len(recs)) + 1
				if first <= prev {
					t.Errorf("writer %d: Append returned %d..%d after %d", w, first, last, prev)
				}
				prev = last
				mu.Lock()
				for k, rec := range recs {
					appended[first+wal.Pos(k)] = rec
				}
				mu.Unlock()
				if i%10 == 0 {
					if err := l.WaitDurable(context.Background(), last); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, openLog(t, dir, wal.Options{SegmentSize: 4096}))
	if len(got) != len(appended) {
		t.Fatalf("read %d records, appended %d", len(got), len(appended))
	}
	for p, want := range appended {
		if !bytes.Equal(got[p], want) {
			t.Fatalf("Pos %d = %v, Append had it as %v", p, got[p], want)
		}
	}
}

// slowSyncFS makes every fdatasync take a while, like a disk: appends that
// arrive meanwhile must share the next one.
type slowSyncFS struct{ wal.FS }
type slowSyncFile struct{ wal.File }

func (f slowSyncFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	return slowSyncFile{file}, err
}

func (f slowSyncFile) Sync() error {
	time.Sleep(2 * time.Millisecond)
	return f.File.Sync()
}

func TestGroupCommitBatches(t *testing.T) {
	var mu sync.Mutex
	var commits []wal.SyncStats
	l := openLog(t, "/wal", wal.Options{FS: slowSyncFS{waltest.NewCrashFS()},
		OnSync: func(s wal.SyncStats) { mu.Lock(); commits = append(commits, s); mu.Unlock() }})
	const writers, appends = 32, 20
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				p, err := l.Append(record(i))
				if err == nil {
					err = l.WaitDurable(context.Background(), p)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// A waiter is woken before its commit's OnSync runs: Close waits for
	// the writer, so every commit has been reported.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Records != writers*appends || st.Appends != writers*appends {
		t.Fatalf("Stats %+v, want %d appends and records", st, writers*appends)
	}
	// Each writer waits for its record before the next, so a commit
	// carries at most 32 records; with a 2 ms fdatasync they pile up.
	if st.Syncs*4 > st.Records {
		t.Fatalf("%d fdatasyncs for %d records: group commit does not batch", st.Syncs, st.Records)
	}
	mu.Lock()
	defer mu.Unlock()
	records, most := 0, 0
	for _, c := range commits {
		records += c.Records
		most = max(most, c.Records)
	}
	if int64(len(commits)) != st.Syncs || records != writers*appends || most < 2 {
		t.Fatalf("OnSync saw %d commits of %d records (at most %d in one); Stats %+v", len(commits), records, most, st)
	}
}

// gateFS holds every fdatasync until released: the test decides when a
// record becomes durable.
type gateFS struct {
	wal.FS
	gate chan struct{}
}
type gateFile struct {
	wal.File
	gate chan struct{}
}

func (f gateFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	return gateFile{file, f.gate}, err
}

func (f gateFile) Sync() error {
	<-f.gate
	return f.File.Sync()
}

// openGated opens a log whose fdatasyncs wait until release is called.
func openGated(t *testing.T) (l *wal.Log, release func()) {
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	l = openLog(t, "/wal", wal.Options{FS: gateFS{waltest.NewCrashFS(), gate}})
	t.Cleanup(release) // before Close, which syncs (cleanups run last first)
	return l, release
}

func TestWaitDurable(t *testing.T) {
	l, release := openGated(t)
	p, err := l.Append(record(1))
	if err != nil {
		t.Fatal(err)
	}
	if l.Last() != 1 || l.Durable() != 0 {
		t.Fatalf("before the sync: Last %d Durable %d, want 1 0", l.Last(), l.Durable())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.WaitDurable(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDurable before the sync: %v, want the context's error", err)
	}
	release()
	if err := l.WaitDurable(waitCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if l.Durable() != 1 {
		t.Fatalf("Durable %d after the sync, want 1", l.Durable())
	}
	if err := l.WaitDurable(context.Background(), 0); err != nil {
		t.Fatalf("WaitDurable(0): %v", err)
	}
}

func TestOnDurableOrder(t *testing.T) {
	l, release := openGated(t)
	var mu sync.Mutex
	var order []wal.Pos
	var errs []error
	record := func(p wal.Pos) func(error) {
		return func(err error) { mu.Lock(); order = append(order, p); errs = append(errs, err); mu.Unlock() }
	}
	last, err := l.Append(recordsN(20)...)
	if err != nil {
		t.Fatal(err)
	}
	// Registered out of order, due together: run in order of Pos.
	for _, p := range rand.Perm(int(last)) {
		l.OnDurable(wal.Pos(p+1), record(wal.Pos(p+1)))
	}
	mu.Lock()
	if len(order) != 0 {
		t.Fatalf("callbacks ran before any sync: %v", order)
	}
	mu.Unlock()
	// Registered after 1..20, before any is durable: runs after them.
	l.OnDurable(20, record(20))
	release()
	if err := l.WaitDurable(waitCtx(t), 20); err != nil {
		t.Fatal(err)
	}
	// Already durable: at once on this goroutine, or queued behind the
	// callbacks the writer is still running (WaitDurable returns when the
	// position is durable, not when its callbacks have run).
	l.OnDurable(5, record(5))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n >= 22 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 22 {
		t.Fatalf("%d callbacks ran, want 22: %v", len(order), order)
	}
	for i := 1; i < len(order)-1; i++ {
		if order[i] < order[i-1] {
			t.Fatalf("callbacks out of order: %v", order)
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatalf("callback got %v", err)
		}
	}
}

func TestClose(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var last wal.Pos
	for i := 1; i <= 100; i++ {
		if last, err = l.Append(record(i)); err != nil {
			t.Fatal(err)
		}
	}
	calledWith := make(chan error, 2)
	l.OnDurable(last, func(err error) { calledWith <- err })
	l.OnDurable(last+1, func(err error) { calledWith <- err }) // never appended
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l.Durable() != last {
		t.Fatalf("after Close: Durable %d, want %d: Close must flush what was queued", l.Durable(), last)
	}
	if err := <-calledWith; err != nil {
		t.Fatalf("OnDurable(%d): %v, want nil", last, err)
	}
	if err := <-calledWith; !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("OnDurable(%d), never appended: %v, want ErrClosed", last+1, err)
	}
	if _, err := l.Append(record(1)); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if err := l.WaitDurable(context.Background(), last); err != nil {
		t.Fatalf("WaitDurable(%d) after Close: %v, want nil", last, err)
	}
	if err := l.WaitDurable(context.Background(), last+1); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("WaitDurable(%d) after Close: %v, want ErrClosed", last+1, err)
	}
	if err := l.TruncateFront(last); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("TruncateFront after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if l.Err() != nil {
		t.Fatalf("Err after a clean Close: %v", l.Err())
	}
	if got := readAll(t, openLog(t, dir, wal.Options{})); len(got) != 100 {
		t.Fatalf("reopened: %d records, want 100", len(got))
	}
}

func TestCloseWakesWaiters(t *testing.T) {
	l := openLog(t, t.TempDir(), wal.Options{})
	done := make(chan error)
	go func() { done <- l.WaitDurable(context.Background(), 5) }() // never appended
	time.Sleep(10 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, wal.ErrClosed) {
			t.Fatalf("WaitDurable: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitDurable still waits after Close")
	}
}

func TestNoSyncWarns(t *testing.T) {
	var logs logBuffer
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), NoSync: true, Log: logs.logger()})
	appendDurable(t, l, record(1))
	if n := len(logs.lines(t, "warn")); n != 1 {
		t.Fatalf("%d Warn lines at a NoSync open, want 1", n)
	}
	if st := l.Stats(); st.Syncs != 0 {
		t.Fatalf("NoSync made %d fdatasyncs", st.Syncs)
	}
}

func TestTruncateFront(t *testing.T) {
	// 48-byte frames, 5 per segment: segments start at 1, 6, 11, 16.
	rec := bytes.Repeat([]byte("t"), 32)
	for _, tc := range []struct {
		before    wal.Pos
		wantFirst wal.Pos
	}{
		{0, 1}, {1, 1}, {5, 1}, {6, 6}, {7, 6}, {11, 11}, {15, 11},
		{16, 16}, {18, 16}, {100, 16}, // never the segment being written
	} {
		dir := t.TempDir()
		l := openLog(t, dir, wal.Options{SegmentSize: 5 * 48})
		for range 18 {
			appendDurable(t, l, rec)
		}
		if err := l.TruncateFront(tc.before); err != nil {
			t.Fatal(err)
		}
		if l.First() != tc.wantFirst {
			t.Errorf("TruncateFront(%d): First %d, want %d", tc.before, l.First(), tc.wantFirst)
		}
		if n, want := len(segmentFiles(t, dir)), int(16-tc.wantFirst)/5+1; n != want {
			t.Errorf("TruncateFront(%d): %d segment files, want %d", tc.before, n, want)
		}
		got := readAll(t, l)
		if len(got) != int(18-tc.wantFirst+1) || got[tc.wantFirst] == nil {
			t.Errorf("TruncateFront(%d): Read gave %d records, want %d..18", tc.before, len(got), tc.wantFirst)
		}
		// Appending goes on, and a reopen sees the same range.
		appendDurable(t, l, rec)
		l.Close()
		r := openLog(t, dir, wal.Options{SegmentSize: 5 * 48})
		if r.First() != tc.wantFirst || r.Last() != 19 {
			t.Errorf("TruncateFront(%d), reopened: First %d Last %d, want %d 19", tc.before, r.First(), r.Last(), tc.wantFirst)
		}
	}
}
