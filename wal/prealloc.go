package wal

import (
	"os"
	"path/filepath"
)

// Preallocation (Options.Preallocate). Appending to a file changes its
// size, so each fdatasync of an appending log also commits the file
// system's journal; overwriting blocks that are already allocated and
// written flushes the data alone. On ext4 on this project's test machine
// an fdatasync after a 600-byte write took 127–136 µs of wall time and
// 67 µs of system CPU in place, against 185–206 µs and 101–104 µs at the
// end of the file. So, as etcd's WAL does, the log writes into segments
// filled with zeros ahead of need.
//
// A goroutine fills the next segment under preallocName (no ".wal"
// suffix: Open never takes it for a segment), writes SegmentSize zero
// bytes, syncs it and hands it to the writer, which renames it to the
// next segment's name when it rolls. A log starts filling only once its
// active segment holds preallocAfter bytes, so the many short-lived logs
// of tests and small deployments never write a segment of zeros; the
// writer then rolls to the filled segment early, at its next batch.
//
// A fill takes a segment's worth of the disk at once. On a nearly full
// file system it would run it out of space while the log writes, and the
// log's own write would fail (fail-stop) where appending to a plain
// segment still had room: so a fill starts only while the file system has
// room for it and for a segment of records besides (roomToFill); else the
// log appends, and looks again a little later.
//
// A filled segment ends in zeros after its last frame. No frame is all
// zeros (a Pos is never 0), so at open a tail of zeros is the unwritten
// rest of a filled segment, not a torn write: it is accepted without a
// warning, and cut from the last segment so that appends resume right
// after the last frame.
//
// Recycling. Writing a segment of zeros costs as many bytes on the disk
// as the records written over them, and a burst of them every segment.
// A filled segment TruncateFront drops (its records are in the applier's
// store) is already allocated and written: as RocksDB's recycled logs and
// PostgreSQL's recycled WAL segments are, it is kept under recycledName
// and becomes the next fill by a rename, with no byte written. Its old
// frames stay behind the new ones, and are told from them by their Pos,
// which is inside each frame's checksum: every old frame's Pos is below
// the first Pos of the segment it now serves. So at open the records of a
// segment that is not the last end where the next segment's first record
// continues them, whatever follows; in the last, the first frame that is
// torn, zero or not the next Pos ends the log, as for any torn tail, and
// a tail holding frames of the file's earlier use (laterFrame finding none
// at or after the next Pos) is the unwritten rest of a recycled segment,
// cut without a warning. One segment at most is kept; a second is removed
// as before. A crash while one is kept leaves recycledName, removed at
// open like an interrupted fill. A log whose fill failed (and that fills
// no more) still recycles the segments it had filled: that takes no room.
const (
	preallocName  = "next.wal.tmp"
	recycledName  = "recycled.wal.tmp"
	preallocAfter = 1 << 20
	zeroChunk     = 1 << 20
	// syncEveryChunks: the fill syncs after this many chunks.
	syncEveryChunks = 4
)

// filled is a segment of zeros ready to be renamed into the log, or why
// filling it failed.
type filled struct {
	path string
	err  error
}

// startFill prepares the next segment unless that is running or done: it
// reuses the kept one if there is one (a rename, at once: it takes
// neither room nor a fill, so a log whose fill failed goes on recycling
// the segments it had filled), else starts a fill while filling has not
// failed and the disk has room; writer goroutine only.
func (l *Log) startFill() {
	if l.opts.NoSync || l.filling || l.ready != "" || l.activeSize < l.noRoomUntil {
		return
	}
	path := filepath.Join(l.dir, preallocName)
	if l.takeRecycled(path) {
		l.recycledN.Add(1)
		l.ready = path
		return
	}
	if !l.opts.Preallocate {
		return
	}
	if !l.roomToFill() {
		l.noRoomUntil = l.activeSize + l.fillAfter()
		return
	}
	l.filling = true
	l.fillWG.Add(1)
	go func() {
		defer l.fillWG.Done()
		err := l.fill(path)
		if err != nil {
			l.fs.Remove(path)
		} else {
			l.filledN.Add(1)
		}
		l.filledCh <- filled{path, err}
	}()
}

// recycle keeps the dropped segment s as the next one (renamed
// recycledName) when it was filled and none is kept yet; it says whether
// it did. TruncateFront's goroutine.
func (l *Log) recycle(s segment) (bool, error) {
	if !s.filled {
		return false, nil
	}
	l.recycleMu.Lock()
	defer l.recycleMu.Unlock()
	if l.kept {
		return false, nil
	}
	if err := l.fs.Rename(s.path, filepath.Join(l.dir, recycledName)); err != nil {
		return false, err
	}
	l.kept = true
	return true, nil
}

// takeRecycled renames the kept segment, if any, to path and says whether
// it did; the writer goroutine. One that cannot be renamed is removed,
// with a Warn line.
func (l *Log) takeRecycled(path string) bool {
	l.recycleMu.Lock()
	defer l.recycleMu.Unlock()
	if !l.kept {
		return false
	}
	l.kept = false
	old := filepath.Join(l.dir, recycledName)
	if err := l.fs.Rename(old, path); err != nil {
		l.log.Warn().Err(err).Str("file", old).Msg("wal: a recycled segment could not be reused; removed")
		l.fs.Remove(old)
		return false
	}
	return true
}

// fill writes SegmentSize zero bytes to path and syncs them, giving up
// when the log closes.
func (l *Log) fill(path string) error {
	f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = l.writeZeros(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeZeros fills f, synced.
func (l *Log) writeZeros(f File) error {
	zeros := make([]byte, zeroChunk)
	for i, left := 1, l.opts.SegmentSize; left > 0; i, left = i+1, left-int64(len(zeros)) {
		select {
		case <-l.stop:
			return ErrClosed
		default:
		}
		if _, err := f.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			return err
		}
		// A sync per few MiB: one of 64 MiB at the end held the log's own
		// fdatasyncs up to 26 ms here, a few MiB at a time up to 4–8 ms.
		if i%syncEveryChunks == 0 {
			if err := f.Sync(); err != nil {
				return err
			}
		}
	}
	return f.Sync()
}

// roomToFill says whether the log's file system has room for a filled
// segment and a segment of records besides; writer goroutine only. A
// change of answer is logged.
func (l *Log) roomToFill() bool {
	free, err := l.fs.Free(l.dir)
	room := err == nil && free >= 2*l.opts.SegmentSize
	if room == !l.noRoom {
		return room
	}
	l.noRoom = !room
	if room {
		l.log.Info().Str("dir", l.dir).Int64("free_bytes", free).Msg("wal: room on the disk again; segments are filled ahead again")
	} else {
		l.log.Warn().Err(err).Str("dir", l.dir).Int64("free_bytes", free).Int64("needs_bytes", 2*l.opts.SegmentSize).
			Msg("wal: not filling the next segment ahead: too little room on the disk; segments are appended to meanwhile")
	}
	return room
}

// takeFilled returns the path of a filled segment if one is ready, ""
// otherwise; writer goroutine only. A failed fill is logged once and not
// tried again: the log goes on appending to plain segments.
func (l *Log) takeFilled() string {
	if !l.filling {
		return ""
	}
	select {
	case r := <-l.filledCh:
		if r.err != nil {
			l.log.Warn().Err(r.err).Str("file", r.path).Msg("wal: preallocating the next segment failed; segments are appended to from now on, or recycled")
			l.opts.Preallocate = false
			l.filling = false
			return ""
		}
		l.filling = false
		return r.path
	default:
		return ""
	}
}

// fillAfter is how full a segment that was not filled ahead gets before
// the log starts filling the next one.
func (l *Log) fillAfter() int64 { return min(preallocAfter, l.opts.SegmentSize/2) }

// allZero says whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
