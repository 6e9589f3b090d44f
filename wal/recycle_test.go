package wal_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
)

// TestRecycledSegments: a filled segment TruncateFront drops becomes the
// next fill (the same file, renamed: no zeros written), and its old
// frames stay behind the new ones. A reopen reads every record kept, with
// no Warn line, both when the recycled segment is the last one (its old
// frames are cut as the unwritten rest) and when the log left it for the
// next while old frames still followed its last record (a middle segment
// whose tail is not zeros); appends go on after the last record.
func TestRecycledSegments(t *testing.T) {
	const segSize = 4096
	dir := t.TempDir()
	var logs logBuffer
	opts := wal.Options{SegmentSize: segSize, Preallocate: true, Log: logs.logger()}
	l := openLog(t, dir, opts)
	n := 0

	// The records of a segment's first use are shorter than those of its
	// second, so the second's last frame ends inside one of the first's.
	l = recycleOnce(t, dir, opts, l, &n, false)
	checkKept(t, l, n)
	if warns := logs.lines(t, "warn"); len(warns) != 0 {
		t.Fatalf("reopening a log whose last segment was recycled logged %v", warns)
	}
	if debugs := logLinesWith(t, &logs, "debug", "recycled"); len(debugs) != 1 {
		t.Fatalf("debug lines about a recycled segment's rest: %v, want one; all: %s", debugs, logs.buf.String())
	}

	l = recycleOnce(t, dir, opts, l, &n, true)
	checkKept(t, l, n)
	if warns := logs.lines(t, "warn"); len(warns) != 0 {
		t.Fatalf("reopening a log with a recycled middle segment logged %v", warns)
	}
	n++
	if p := appendDurable(t, l, sized(n, 40)); p != wal.Pos(n) {
		t.Fatalf("Append after the reopen: Pos %d, want %d", p, n)
	}
	l.Close()
	checkKept(t, openLog(t, dir, wal.Options{SegmentSize: segSize}), n)
}

// recycleOnce fills segments with short records, dropping them as it goes,
// until a dropped one was kept for reuse; then appends longer records
// until the log writes in that file, and, with leave, until it left it for
// the next segment. It closes l and returns the log reopened on dir with
// opts.
func recycleOnce(t *testing.T, dir string, opts wal.Options, l *wal.Log, n *int, leave bool) *wal.Log {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for start := l.Stats().Recycled; l.Stats().Recycled == start; {
		if time.Now().After(deadline) {
			t.Fatalf("no segment recycled after %d records: %v", *n, segmentFiles(t, dir))
		}
		*n++
		appendDurable(t, l, sized(*n, 60))
		if *n%5 == 0 {
			if err := l.TruncateFront(l.Durable()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The recycled file is the next fill: the next segment to appear.
	before := map[string]bool{}
	for _, path := range segmentFiles(t, dir) {
		before[path] = true
	}
	var reused string
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the recycled segment was not written (leave %v) after %d records: %v", leave, *n, segmentFiles(t, dir))
		}
		*n++
		appendDurable(t, l, sized(*n, 150))
		segs := segmentFiles(t, dir)
		if reused == "" {
			for _, path := range segs {
				if !before[path] {
					reused = path
				}
			}
		}
		if reused != "" && (!leave || segs[len(segs)-1] != reused) {
			break
		}
	}
	if leave {
		// What makes the middle case: its tail holds old frames, not zeros.
		b := readFile(t, reused)
		if end := framesEnd(t, reused, b); len(bytes.Trim(b[end:], "\x00")) == 0 {
			t.Fatalf("%s: nothing but zeros after its records (offset %d of %d): the test would not test a recycled tail", reused, end, len(b))
		}
	}
	*n++
	appendDurable(t, l, sized(*n, 150))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return openLog(t, dir, opts)
}

// sized is record i padded to size bytes.
func sized(i, size int) []byte {
	s := fmt.Sprintf("record-%d-", i)
	return []byte(s + strings.Repeat("y", size-len(s)))
}

// checkKept reads every record l holds and checks each is the one
// appended at its Pos (sized, whatever its length), up to n.
func checkKept(t *testing.T, l *wal.Log, n int) {
	t.Helper()
	if got := l.Last(); got != wal.Pos(n) {
		t.Fatalf("Last %d, want %d", got, n)
	}
	first := l.First()
	count := 0
	if err := l.Read(first, func(p wal.Pos, rec []byte) error {
		if want := fmt.Sprintf("record-%d-", p); !strings.HasPrefix(string(rec), want) {
			return fmt.Errorf("Pos %d holds %q", p, rec)
		}
		count++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := n - int(first) + 1; count != want {
		t.Fatalf("read %d records from %d, want %d", count, first, want)
	}
}

// framesEnd is the offset after the frames of segment file path (b) whose
// Pos run on from the Pos in its name.
func framesEnd(t *testing.T, path string, b []byte) int {
	t.Helper()
	var next uint64
	if _, err := fmt.Sscanf(filepath.Base(path), "%016x.wal", &next); err != nil {
		t.Fatal(err)
	}
	off := 0
	for off+headerSize <= len(b) && binary.LittleEndian.Uint64(b[off+8:]) == next {
		off += headerSize + int(binary.LittleEndian.Uint32(b[off+4:]))
		next++
	}
	return off
}

// logLinesWith returns the lines logged at level whose message holds s.
func logLinesWith(t *testing.T, logs *logBuffer, level, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range logs.lines(t, level) {
		if msg, _ := m["message"].(string); strings.Contains(msg, s) {
			out = append(out, m)
		}
	}
	return out
}

// TestRecycleAfterFillFails: once a fill fails the log fills no more (one
// Warn line), but it goes on reusing the segments it had filled: they need
// no room and no write.
func TestRecycleAfterFillFails(t *testing.T) {
	const segSize = 4096
	dir := t.TempDir()
	var logs logBuffer
	fs := failFillsFS{ok: 2, fills: new(atomic.Int64)}
	l := openLog(t, dir, wal.Options{FS: fs, SegmentSize: segSize, Preallocate: true, Log: logs.logger()})
	n := 0
	for deadline := time.Now().Add(20 * time.Second); l.Stats().Recycled < 5; {
		if time.Now().After(deadline) {
			t.Fatalf("after %d records: %+v, %d fills asked for", n, l.Stats(), fs.fills.Load())
		}
		n++
		appendDurable(t, l, record(n))
		if n%5 == 0 {
			if err := l.TruncateFront(l.Durable()); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := l.Stats()
	if st.Filled != 2 || fs.fills.Load() <= 2 {
		t.Fatalf("%d segments filled, %d fills asked for: want 2 filled and a refused one after them", st.Filled, fs.fills.Load())
	}
	if warns := logs.lines(t, "warn"); len(warns) != 1 {
		t.Fatalf("Warn lines %v, want the one failed fill", warns)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkKept(t, openLog(t, dir, wal.Options{SegmentSize: segSize}), n)
}
