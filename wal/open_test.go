package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// The on-disk frame, as doc'd in frame.go: crc, length, pos, data.
const headerSize = 16

// frameStarts returns the offset of each frame of a valid segment.
func frameStarts(b []byte) []int {
	var starts []int
	for off := 0; off < len(b); off += headerSize + int(binary.LittleEndian.Uint32(b[off+4:])) {
		starts = append(starts, off)
	}
	return starts
}

// writeTestLog writes n records (record(1..n)) with 200-byte segments
// and returns the segment paths, oldest first.
func writeTestLog(t *testing.T, dir string, n int) []string {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{SegmentSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		appendDurable(t, l, record(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return segmentFiles(t, dir)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkRecords fails unless l holds exactly record(1..n).
func checkRecords(t *testing.T, l *wal.Log, n int) {
	t.Helper()
	got := readAll(t, l)
	if len(got) != n || l.Last() != wal.Pos(n) || l.Durable() != wal.Pos(n) {
		t.Fatalf("read %d records, Last %d, Durable %d; want %d", len(got), l.Last(), l.Durable(), n)
	}
	for p, rec := range got {
		if !bytes.Equal(rec, record(int(p))) {
			t.Fatalf("record %d = %q, want %q", p, rec, record(int(p)))
		}
	}
}

// TestTornTailEveryOffset cuts the last segment at every length, as a
// crash mid-write leaves it, and reopens: every whole frame is kept, the
// torn one is cut with one Warn line naming file and offset, and the log
// goes on from there.
func TestTornTailEveryOffset(t *testing.T) {
	dir := t.TempDir()
	const n = 14
	segs := writeTestLog(t, dir, n)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	lastSeg := segs[len(segs)-1]
	full := readFile(t, lastSeg)
	starts := frameStarts(full)
	before := n - len(starts) // records in earlier segments
	for size := 0; size < len(full); size++ {
		writeFile(t, lastSeg, full[:size])
		// Frames 0..whole-1 fit in size bytes; frame whole starts at
		// cut and is torn unless size is exactly there.
		whole := 0
		for whole+1 < len(starts) && starts[whole+1] <= size {
			whole++
		}
		cut := starts[whole]
		torn := size != cut

		var logs logBuffer
		l, err := wal.Open(dir, wal.Options{SegmentSize: 200, Log: logs.logger()})
		if err != nil {
			t.Fatalf("size %d: Open: %v", size, err)
		}
		checkRecords(t, l, before+whole)
		warns := logs.lines(t, "warn")
		switch {
		case torn && (len(warns) != 1 || warns[0]["file"] != lastSeg || warns[0]["offset"] != float64(cut)):
			t.Fatalf("size %d: Warn lines %v, want one with file %s offset %d", size, warns, lastSeg, cut)
		case !torn && len(warns) != 0:
			t.Fatalf("size %d, a frame boundary: Warn lines %v, want none", size, warns)
		}
		if got := len(readFile(t, lastSeg)); got != cut {
			t.Fatalf("size %d: %d bytes left after the cut, want %d", size, got, cut)
		}
		// The log goes on at the cut.
		if p := appendDurable(t, l, record(before+whole+1)); p != wal.Pos(before+whole+1) {
			t.Fatalf("size %d: Append after the cut: Pos %d, want %d", size, p, before+whole+1)
		}
		l.Close()
		checkRecords(t, openLog(t, dir, wal.Options{SegmentSize: 200}), before+whole+1)
	}
}

// TestTornTailShapes: what a crash can leave after the last whole frame is
// cut, whatever it looks like, as long as no valid later frame follows.
func TestTornTailShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name string
		// damage returns the last segment's new content and the offset
		// the cut must happen at.
		damage func(b []byte, starts []int) ([]byte, int)
		keep   int // records lost from the end
		// quiet: the tail is cut without a Warn line (zeros are the
		// unwritten rest of a segment filled ahead, not damage).
		quiet bool
	}{
		{"zeros (a preallocated or half-persisted tail)", func(b []byte, _ []int) ([]byte, int) {
			return append(b, make([]byte, 4096)...), len(b)
		}, 0, true},
		{"random bytes", func(b []byte, _ []int) ([]byte, int) { return append(b, random...), len(b) }, 0, false},
		{"a header announcing 1 GiB", func(b []byte, _ []int) ([]byte, int) {
			h := make([]byte, headerSize+10)
			binary.LittleEndian.PutUint32(h[4:], 1<<30)
			return append(b, h...), len(b)
		}, 0, false},
		{"a stale copy of an earlier frame", func(b []byte, starts []int) ([]byte, int) {
			return append(b, b[starts[0]:starts[1]]...), len(b)
		}, 0, false},
		{"the last frame's data zeroed", func(b []byte, starts []int) ([]byte, int) {
			last := starts[len(starts)-1]
			clear(b[last+headerSize:])
			return b, last
		}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := writeTestLog(t, dir, 14)
			lastSeg := segs[len(segs)-1]
			b := readFile(t, lastSeg)
			damaged, cut := tc.damage(b, frameStarts(b))
			writeFile(t, lastSeg, damaged)
			var logs logBuffer
			l := openLog(t, dir, wal.Options{SegmentSize: 200, Log: logs.logger()})
			checkRecords(t, l, 14-tc.keep)
			if size := int64(len(readFile(t, lastSeg))); size != int64(cut) {
				t.Fatalf("last segment is %d bytes after the cut, want %d", size, cut)
			}
			if warns := logs.lines(t, "warn"); tc.quiet && len(warns) != 0 {
				t.Fatalf("Warn lines %v for a tail of zeros, want none", warns)
			} else if !tc.quiet && (len(warns) != 1 || warns[0]["offset"] != float64(cut)) {
				t.Fatalf("Warn lines %v, want one at offset %d", warns, cut)
			}
		})
	}
}

// TestTornTailByteFlips: a flipped byte anywhere in the last frame is cut
// as a torn write (nothing valid follows it).
func TestTornTailByteFlips(t *testing.T) {
	dir := t.TempDir()
	segs := writeTestLog(t, dir, 14)
	lastSeg := segs[len(segs)-1]
	full := readFile(t, lastSeg)
	starts := frameStarts(full)
	last := starts[len(starts)-1]
	for i := last; i < len(full); i++ {
		b := bytes.Clone(full)
		b[i] ^= 0x40
		writeFile(t, lastSeg, b)
		l, err := wal.Open(dir, wal.Options{SegmentSize: 200})
		if err != nil {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
		checkRecords(t, l, 13)
		l.Close()
		writeFile(t, lastSeg, full)
	}
}

// TestCorruptionRefused: damage that is not a torn tail makes Open fail
// with an ErrCorrupt error naming the file and offset; no panic.
func TestCorruptionRefused(t *testing.T) {
	type logFiles struct {
		segs   []string
		starts [][]int // frame offsets per segment
	}
	for _, tc := range []struct {
		name string
		// damage returns the file and offset the error must name.
		damage func(t *testing.T, f logFiles) (string, int)
		what   string
	}{
		{"a middle segment cut short", func(t *testing.T, f logFiles) (string, int) {
			b := readFile(t, f.segs[1])
			writeFile(t, f.segs[1], b[:len(b)-1])
			return f.segs[1], f.starts[1][len(f.starts[1])-1]
		}, "runs past the end"},
		{"a middle segment missing", func(t *testing.T, f logFiles) (string, int) {
			os.Remove(f.segs[1])
			return f.segs[2], 0
		}, "a segment is missing"},
		{"a segment misnamed", func(t *testing.T, f logFiles) (string, int) {
			last := f.segs[len(f.segs)-1]
			renamed := filepath.Join(filepath.Dir(last), "00000000000000ff.wal")
			os.Rename(last, renamed)
			return renamed, 0
		}, "segment starts at Pos 255"},
		{"two frames swapped (valid checksums, wrong Pos)", func(t *testing.T, f logFiles) (string, int) {
			b, s := readFile(t, f.segs[1]), f.starts[1]
			first, second := bytes.Clone(b[s[0]:s[1]]), bytes.Clone(b[s[1]:s[2]])
			writeFile(t, f.segs[1], slicesConcat(second, first, b[s[2]:]))
			return f.segs[1], 0
		}, "where"},
		{"a bad frame in the last segment with a good one after it", func(t *testing.T, f logFiles) (string, int) {
			last := len(f.segs) - 1
			b := readFile(t, f.segs[last])
			b[f.starts[last][0]+headerSize] ^= 1
			writeFile(t, f.segs[last], b)
			return f.segs[last], f.starts[last][0]
		}, "not a torn write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var f logFiles
			f.segs = writeTestLog(t, dir, 14)
			for _, s := range f.segs {
				f.starts = append(f.starts, frameStarts(readFile(t, s)))
			}
			if len(f.segs) < 3 || len(f.starts[1]) < 3 || len(f.starts[len(f.segs)-1]) < 2 {
				t.Fatalf("test log has the wrong shape: %v", f.starts)
			}
			file, off := tc.damage(t, f)
			expectRefused(t, dir, file, off, tc.what)
		})
	}
}

// TestMiddleSegmentRestIgnored: what follows a middle segment's last
// record (the one before the next segment's first) is the unused rest of
// a filled or recycled segment: never read, whatever it holds (zeros, a
// recycled file's old frames, a torn old frame), so it is accepted, and
// every record is read back.
func TestMiddleSegmentRestIgnored(t *testing.T) {
	for name, rest := range map[string][]byte{
		"zeros":              make([]byte, 40),
		"part of a frame":    {0xff, 0, 0},
		"an old whole frame": frameAt(3, []byte("an old record")),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			segs := writeTestLog(t, dir, 14)
			writeFile(t, segs[1], append(readFile(t, segs[1]), rest...))
			checkRecords(t, openLog(t, dir, wal.Options{SegmentSize: 200}), 14)
		})
	}
}

// frameAt is rec's frame at Pos p, as frame.go lays it out.
func frameAt(p wal.Pos, rec []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(rec))
	binary.LittleEndian.PutUint32(b[4:], uint32(len(rec)))
	binary.LittleEndian.PutUint64(b[8:], uint64(p))
	b = append(b, rec...)
	// CRC-32C of the length, the data, then the Pos.
	sum := append(append(slices.Clone(b[4:8]), rec...), b[8:16]...)
	binary.LittleEndian.PutUint32(b[0:], crc32.Checksum(sum, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestMiddleSegmentByteFlips flips every byte of a middle segment in turn.
func TestMiddleSegmentByteFlips(t *testing.T) {
	dir := t.TempDir()
	segs := writeTestLog(t, dir, 14)
	middle := segs[1]
	full := readFile(t, middle)
	starts := frameStarts(full)
	for i := range full {
		b := bytes.Clone(full)
		b[i] ^= 0x01
		writeFile(t, middle, b)
		frame := 0
		for frame+1 < len(starts) && starts[frame+1] <= i {
			frame++
		}
		// A flipped length can move the end of the frame; the error
		// is still at the frame's start.
		expectRefused(t, dir, middle, starts[frame], "")
	}
	writeFile(t, middle, full)
	checkRecords(t, openLog(t, dir, wal.Options{SegmentSize: 200}), 14)
}

func expectRefused(t *testing.T, dir, file string, off int, what string) {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{SegmentSize: 200})
	if err == nil {
		l.Close()
		t.Fatalf("Open accepted a damaged log (%s offset %d)", file, off)
	}
	prefix := fmt.Sprintf("wal: %s: offset %d: ", file, off)
	if !errors.Is(err, wal.ErrCorrupt) || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), what) {
		t.Fatalf("Open: %v\nwant ErrCorrupt starting %q and containing %q", err, prefix, what)
	}
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// FuzzOpen: whatever two segment files hold, Open refuses or opens, never
// panics, and an opened log reads back exactly First()..Last().
func FuzzOpen(f *testing.F) {
	fs := waltest.NewCrashFS()
	l, err := wal.Open("/seed", wal.Options{FS: fs, SegmentSize: 120})
	if err != nil {
		f.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		appendDurable(f, l, record(i))
	}
	l.Close()
	names, _ := fs.ReadDir("/seed")
	var seeds [][]byte
	for _, name := range names {
		file, _ := fs.OpenFile("/seed/"+name, os.O_RDONLY, 0)
		b, _ := io.ReadAll(file)
		seeds = append(seeds, b)
	}
	f.Add(seeds[0], seeds[1])
	f.Add(seeds[0], seeds[1][:len(seeds[1])-3])
	f.Add(seeds[1], seeds[0])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, first, second []byte) {
		fs := waltest.NewCrashFS()
		fs.MkdirAll("/wal", 0o700)
		for name, b := range map[string][]byte{"0000000000000001.wal": first, "0000000000000003.wal": second} {
			file, _ := fs.OpenFile("/wal/"+name, os.O_WRONLY|os.O_CREATE, 0o600)
			file.Write(b)
			file.Close()
		}
		l, err := wal.Open("/wal", wal.Options{FS: fs})
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			return
		}
		defer l.Close()
		got := readAll(t, l)
		if want := int(l.Last()) - int(l.First()) + 1; l.First() == 0 && len(got) != 0 || l.First() != 0 && len(got) != want {
			t.Fatalf("read %d records, First %d Last %d", len(got), l.First(), l.Last())
		}
	})
}
