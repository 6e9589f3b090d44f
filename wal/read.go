package wal

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
)

// Read calls fn for every durable record from Pos from on, in order, and
// stops at fn's first error, which it returns. Records before First() are
// gone: Read starts at First() if from is earlier, so a caller that needs
// from itself checks First(). rec is fn's to keep. fn must not call
// TruncateFront.
func (l *Log) Read(from Pos, fn func(p Pos, rec []byte) error) error {
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	l.mu.Lock()
	segs, durable := slices.Clone(l.segs), l.durable
	l.mu.Unlock()

	from = max(from, segs[0].first)
	// The segment holding from: the last one starting at or before it.
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first > from }) - 1
	for ; i < len(segs) && from <= durable; i++ {
		end := durable
		if i+1 < len(segs) {
			end = min(end, segs[i+1].first-1)
		}
		if err := l.readSegment(segs[i], from, end, fn); err != nil {
			return err
		}
		from = end + 1
	}
	return nil
}

// readSegment calls fn for the records from..end of s. The writer may be
// appending to s: Read never looks past end, which is durable.
func (l *Log) readSegment(s segment, from, end Pos, fn func(Pos, []byte) error) error {
	if from > end {
		return nil
	}
	f, err := l.fs.OpenFile(s.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var h [headerSize]byte
	off := 0
	for p := s.first; p <= end; p++ {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return &corruption{s.path, off, fmt.Sprintf("reading record Pos %d: %v", p, err)}
		}
		n := frameLen(h[:])
		if n > maxRecord {
			return &corruption{s.path, off, fmt.Sprintf("frame length %d is over the limit", n)}
		}
		if p < from {
			// Skipped records are checked at open; just step over.
			if _, err := r.Discard(n); err != nil {
				return &corruption{s.path, off, fmt.Sprintf("reading record Pos %d: %v", p, err)}
			}
			off += headerSize + n
			continue
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return &corruption{s.path, off, fmt.Sprintf("reading record Pos %d: %v", p, err)}
		}
		problem := checkFrame(h[:], data)
		if got := framePos(h[:]); problem == "" && got != p {
			problem = fmt.Sprintf("record Pos %d where %d was expected", got, p)
		}
		if problem != "" {
			return &corruption{s.path, off, problem}
		}
		if err := fn(p, data); err != nil {
			return err
		}
		off += headerSize + n
	}
	return nil
}

// TruncateFront removes the segment files all of whose records are before
// before: what the applier no longer needs. It never removes the segment
// being written, so it may keep records before before. A filled segment
// may be kept, renamed, as the next fill (recycle, prealloc.go).
func (l *Log) TruncateFront(before Pos) error {
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	// Segment i holds segs[i].first .. segs[i+1].first-1.
	var drop []segment
	for i := 0; i+1 < len(l.segs) && l.segs[i+1].first <= before; i++ {
		drop = append(drop, l.segs[i])
	}
	l.mu.Unlock()
	if len(drop) == 0 {
		return nil
	}
	removed := 0
	var err error
	for _, s := range drop { // oldest first: a crash midway leaves no hole
		var kept bool
		if kept, err = l.recycle(s); !kept && err == nil {
			err = l.fs.Remove(s.path)
		}
		if err != nil {
			err = fmt.Errorf("wal: truncate front: %w", err)
			break
		}
		removed++
	}
	l.mu.Lock()
	l.segs = slices.Delete(l.segs, 0, removed)
	l.mu.Unlock()
	if err == nil && !l.opts.NoSync {
		// Not for safety (a removal undone by a crash only brings old
		// records back) but so the space is reclaimed for good.
		if err = l.fs.SyncDir(l.dir); err != nil {
			err = fmt.Errorf("wal: truncate front: sync dir: %w", err)
		}
	}
	return err
}
