package wal

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrCorrupt is in the chain of Open's error when a file is damaged other
// than by a torn tail.
var ErrCorrupt = errors.New("wal: corrupt")

// corruption is damage found at open: "wal: FILE: offset N: what".
type corruption struct {
	file   string
	offset int
	what   string
}

func (c *corruption) Error() string {
	return fmt.Sprintf("wal: %s: offset %d: %s", c.file, c.offset, c.what)
}
func (c *corruption) Unwrap() error { return ErrCorrupt }

// Open opens the log in dir, creating dir if missing: an empty dir is a new
// log whose first Pos is 1. It reads every segment and checks every frame.
// A bad frame in the last segment with no valid later frame after it is a
// torn write (the process or machine stopped mid-write): it is cut, with
// one Warn line (a tail of zeros, the unwritten rest of a segment filled
// ahead, is cut without one). Any other damage is refused with an ErrCorrupt error
// naming the file and offset: cutting there could drop records that were
// reported durable.
//
// Every segment is fdatasync'd before the log calls its records durable:
// a process that died between its write and its fdatasync left records in
// the page cache only.
func Open(dir string, opts Options) (*Log, error) {
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	if opts.LazyDelay <= 0 {
		opts.LazyDelay = defaultLazyDelay
	}
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = defaultSegmentSize
	}
	l := &Log{dir: dir, fs: opts.FS, opts: opts, log: opts.Log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), filledCh: make(chan filled, 1)}
	if opts.NoSync {
		l.log.Warn().Str("dir", dir).Msg("wal: NoSync: fdatasync is skipped, a power loss can lose records reported durable")
	}
	if err := l.fs.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	// A segment being filled or kept for recycling when the last process
	// stopped: not part of the log (neither has a segment's name), and
	// filled again if needed.
	for _, name := range []string{preallocName, recycledName} {
		if err := l.fs.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("wal: %w", err)
		}
	}
	segs, err := l.listSegments()
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		path := filepath.Join(dir, segmentName(1))
		f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("wal: create: %w", err)
		}
		segs = []segment{{first: 1, path: path}}
		l.active, l.activePath = f, path
	} else if err := l.scan(segs); err != nil {
		return nil, err
	}
	if !opts.NoSync {
		if err := l.fs.SyncDir(dir); err != nil {
			l.active.Close()
			return nil, fmt.Errorf("wal: sync dir: %w", err)
		}
	}
	l.segs = segs
	l.durable = l.last
	l.log.Debug().Str("dir", dir).Int("segments", len(segs)).Uint64("last", uint64(l.last)).Msg("wal: opened")
	go l.run()
	return l, nil
}

// listSegments returns dir's segments, oldest first. Other files are
// ignored.
func (l *Log) listSegments() ([]segment, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var segs []segment
	for _, name := range names {
		hex, ok := strings.CutSuffix(name, ".wal")
		if !ok || len(hex) != 16 {
			continue
		}
		first, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		path := filepath.Join(l.dir, name)
		if first == 0 {
			return nil, &corruption{path, 0, "segment named for Pos 0"}
		}
		segs = append(segs, segment{first: Pos(first), path: path})
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmp.Compare(a.first, b.first) })
	return segs, nil
}

// scan checks every segment, cuts a torn tail off the last, syncs them
// all, and leaves the last open for appending; it sets l.last.
func (l *Log) scan(segs []segment) error {
	next := segs[0].first
	for i, s := range segs {
		if s.first != next {
			return &corruption{s.path, 0, fmt.Sprintf("segment starts at Pos %d, want %d: a segment is missing or misnamed", s.first, next)}
		}
		last := i == len(segs)-1
		flag := os.O_RDONLY
		if last {
			flag = os.O_RDWR | os.O_APPEND
		}
		f, err := l.fs.OpenFile(s.path, flag, 0o600)
		if err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		var end Pos // the last record of s, known when a segment follows
		if !last {
			end = segs[i+1].first - 1
		}
		size, err := l.checkSegment(f, s, end, &next)
		if err == nil && !l.opts.NoSync {
			if err = f.Sync(); err != nil {
				err = fmt.Errorf("wal: %w", err)
			}
		}
		if err != nil || !last {
			f.Close()
		}
		if err != nil {
			return err
		}
		if last {
			l.active, l.activePath, l.activeSize = f, s.path, size
		}
	}
	l.last = next - 1
	return nil
}

// checkSegment reads one segment whose first record is *next and advances
// *next past its records. end is its last record when a segment follows
// it (0: s is the last): what follows that record in the file is the
// unused rest of a filled or recycled segment, never read. It returns the
// size of its valid frames, after cutting a torn tail (last segment only).
func (l *Log) checkSegment(f File, s segment, end Pos, next *Pos) (int64, error) {
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	last := end == 0
	off := 0
	var problem string
	for off < len(b) && (last || *next <= end) {
		var p Pos
		var size int
		if p, _, size, problem = decodeFrame(b[off:]); problem == "" && p != *next {
			problem = fmt.Sprintf("record Pos %d where %d was expected", p, *next)
		}
		if problem != "" {
			break
		}
		off += size
		*next++
	}
	if off == len(b) || !last && *next > end {
		return int64(off), nil
	}
	if allZero(b[off:]) {
		// The unwritten rest of a filled segment (prealloc.go). Cut
		// from the last segment, which is appended to from here on.
		if last {
			if err := f.Truncate(int64(off)); err != nil {
				return 0, fmt.Errorf("wal: cut a filled segment's zeros: %w", err)
			}
		}
		return int64(off), nil
	}
	if !last {
		return 0, &corruption{s.path, off, problem}
	}
	if at, p, ok := laterFrame(b, off, *next); ok {
		return 0, &corruption{s.path, off, fmt.Sprintf("%s, and record Pos %d follows at offset %d: not a torn write", problem, p, at)}
	}
	if staleFrame(b, off, s.first) {
		// The rest of a recycled segment: its earlier use's frames, and
		// maybe a torn frame before them; nothing at or past *next.
		l.log.Debug().Str("file", s.path).Int("offset", off).Int("cut_bytes", len(b)-off).
			Msg("wal: the unwritten rest of a recycled segment cut")
	} else {
		l.log.Warn().Str("file", s.path).Int("offset", off).Int("cut_bytes", len(b)-off).Str("reason", problem).
			Msg("wal: torn tail cut")
	}
	if err := f.Truncate(int64(off)); err != nil {
		return 0, fmt.Errorf("wal: cut torn tail: %w", err)
	}
	return int64(off), nil
}

// staleFrame says whether b holds, from offset from on, a valid frame
// whose Pos is below first, the first Pos of the segment b is: a frame of
// the file's use before it was recycled (prealloc.go).
func staleFrame(b []byte, from int, first Pos) bool {
	_, _, ok := findFrame(b, from, func(at int, p Pos) bool { return p != 0 && p < first })
	return ok
}

// laterFrame looks, from offset from on, for a valid frame with a Pos of
// next or later: proof that the bad frame before it is not a torn tail.
// Only a Pos that could fit in the bytes left is checksummed, so the
// search is about linear in the bytes.
func laterFrame(b []byte, from int, next Pos) (at int, p Pos, ok bool) {
	return findFrame(b, from, func(at int, p Pos) bool {
		return p >= next && uint64(p-next) <= uint64(len(b)-at)/headerSize
	})
}

// findFrame returns the first valid frame in b from offset from on whose
// header's Pos maybe accepts (a cheap filter before the checksum).
func findFrame(b []byte, from int, maybe func(at int, p Pos) bool) (at int, p Pos, ok bool) {
	for at = from; at+headerSize <= len(b); at++ {
		if p = framePos(b[at:]); !maybe(at, p) {
			continue
		}
		if q, _, _, problem := decodeFrame(b[at:]); problem == "" && q == p {
			return at, p, true
		}
	}
	return 0, 0, false
}
