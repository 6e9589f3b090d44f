package wal_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
)

// TestPreallocatedSegments: with Preallocate the log writes into segments
// filled with zeros ahead (each segment after the first is the full
// segment size on disk), reads every record back after a reopen without
// a Warn line, cuts the active segment's zeros at open so that appends
// go on after its last frame, and removes a fill the last process left.
func TestPreallocatedSegments(t *testing.T) {
	const segSize = 4096
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: segSize, Preallocate: true}
	l := openLog(t, dir, opts)
	n := 0
	// Until the log has rolled into two filled segments: a fill runs in
	// the background, so the log may append to a plain segment a while.
	for deadline := time.Now().Add(20 * time.Second); ; {
		n++
		appendDurable(t, l, record(n))
		if filledSegments(t, dir, segSize) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d records no two segments were filled ahead: %v", n, segmentFiles(t, dir))
		}
	}
	for range 5 { // some records in the active, filled segment
		n++
		appendDurable(t, l, record(n))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A fill interrupted by the process's end.
	if err := os.WriteFile(filepath.Join(dir, "next.wal.tmp"), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	opts.Log = logs.logger()
	l = openLog(t, dir, opts)
	checkRecords(t, l, n)
	if warns := logs.lines(t, "warn"); len(warns) != 0 {
		t.Fatalf("reopening a log of filled segments logged %v", warns)
	}
	if _, err := os.Stat(filepath.Join(dir, "next.wal.tmp")); !os.IsNotExist(err) {
		t.Fatalf("the interrupted fill is still there after Open (stat: %v)", err)
	}
	n++
	if p := appendDurable(t, l, record(n)); p != wal.Pos(n) {
		t.Fatalf("Append after the reopen: Pos %d, want %d", p, n)
	}
	l.Close()
	checkRecords(t, openLog(t, dir, wal.Options{SegmentSize: segSize}), n)
}

// filledSegments counts dir's segments that are segSize bytes and end in
// a zero byte: filled ahead (a segment appended to ends with its last
// frame's data, never a zero byte in record()'s records).
func filledSegments(t *testing.T, dir string, segSize int) int {
	t.Helper()
	n := 0
	for _, path := range segmentFiles(t, dir) {
		if b := readFile(t, path); len(b) == segSize && b[len(b)-1] == 0 {
			n++
		}
	}
	return n
}

// failFillsFS lets the first ok fills create their file and refuses the
// others, as a disk that filled up would.
type failFillsFS struct {
	wal.OSFS
	ok    int64
	fills *atomic.Int64
}

func (f failFillsFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if filepath.Base(name) == "next.wal.tmp" && flag&os.O_CREATE != 0 && f.fills.Add(1) > f.ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	return f.OSFS.OpenFile(name, flag, perm)
}

// TestPreallocateFailureFallsBack: a fill that fails costs one Warn line
// and nothing else: the log goes on with segments it appends to, every
// record durable and read back.
func TestPreallocateFailureFallsBack(t *testing.T) {
	const segSize = 4096
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, wal.Options{FS: failFillsFS{fills: new(atomic.Int64)}, SegmentSize: segSize, Preallocate: true, Log: logs.logger()})
	const n = 400 // several segments
	for i := 1; i <= n; i++ {
		appendDurable(t, l, record(i))
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}
	if got := filledSegments(t, dir, segSize); got != 0 {
		t.Fatalf("%d segments filled though no fill could be created", got)
	}
	if segs := segmentFiles(t, dir); len(segs) < 3 {
		t.Fatalf("%d segments: the test did not roll", len(segs))
	}
	warns := logs.lines(t, "warn")
	if len(warns) != 1 {
		t.Fatalf("Warn lines %v, want the one failed fill", warns)
	}
	l.Close()
	checkRecords(t, openLog(t, dir, wal.Options{SegmentSize: segSize}), n)
}

// roomFS answers Free from free, and counts the fills it was asked to
// create.
type roomFS struct {
	wal.OSFS
	free  *atomic.Int64
	fills *atomic.Int64
}

func (f roomFS) Free(string) (int64, error) { return f.free.Load(), nil }

func (f roomFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if filepath.Base(name) == "next.wal.tmp" && flag&os.O_CREATE != 0 {
		f.fills.Add(1)
	}
	return f.OSFS.OpenFile(name, flag, perm)
}

// TestPreallocateNeedsRoom: a log whose disk has less room than a filled
// segment and a segment of records besides starts no fill (one would take
// the disk's last space while the log writes, and fail the log's own
// write): it appends, with one Warn line; once there is room again it
// fills ahead again, with one Info line.
func TestPreallocateNeedsRoom(t *testing.T) {
	const segSize = 4096
	dir := t.TempDir()
	var logs logBuffer
	fs := roomFS{free: new(atomic.Int64), fills: new(atomic.Int64)}
	fs.free.Store(2*segSize - 1)
	l := openLog(t, dir, wal.Options{FS: fs, SegmentSize: segSize, Preallocate: true, Log: logs.logger()})
	n := 0
	for ; n < 400; n++ { // several segments
		appendDurable(t, l, record(n+1))
	}
	if segs := segmentFiles(t, dir); len(segs) < 3 {
		t.Fatalf("%d segments: the test did not roll", len(segs))
	}
	if fills := fs.fills.Load(); fills != 0 {
		t.Fatalf("%d fills started with %d bytes free, segments of %d", fills, fs.free.Load(), segSize)
	}
	if warns := logs.lines(t, "warn"); len(warns) != 1 {
		t.Fatalf("Warn lines %v, want the one saying why nothing is filled", warns)
	}

	fs.free.Store(2 * segSize)
	for deadline := time.Now().Add(20 * time.Second); filledSegments(t, dir, segSize) == 0; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("no segment filled ahead %d records after the room came back", n-400)
		}
		appendDurable(t, l, record(n+1))
	}
	if infos := logs.lines(t, "info"); len(infos) != 1 {
		t.Errorf("Info lines %v, want the one saying segments are filled again", infos)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}
	l.Close()
	checkRecords(t, openLog(t, dir, wal.Options{SegmentSize: segSize}), n)
}
