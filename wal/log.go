package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/durable"
)

// Pos is the index of a record: the first record ever appended is 1; 0
// means "nothing". It is durable.Pos: a Log is a durable.Log.
type Pos = durable.Pos

var _ durable.Log = (*Log)(nil)

// Options configures a Log.
type Options struct {
	FS          FS    // nil: the real OS (OSFS)
	SegmentSize int64 // roll to a new segment file when one would exceed it; default 64 MiB
	// NoSync skips fdatasync (and directory syncs): a record is called
	// durable once written. Benchmarks and the explicit unsafe opt-in
	// only; Open logs a Warn line.
	NoSync bool
	Log    zerolog.Logger
	// OnSync, if set, is called on the writer goroutine after each
	// successful group commit.
	OnSync func(SyncStats)
	// LazyDelay bounds how long a record appended with AppendLazy may
	// wait for a group commit another record starts; default 2 ms.
	LazyDelay time.Duration
	// CommitDelay is how long a writer woken from idle by a record
	// someone waits for gathers more records before it writes; 0 (the
	// default) writes at once.
	CommitDelay time.Duration
	// Preallocate has the log write into segments filled with zeros
	// ahead of need, so that an fdatasync flushes data without a change
	// of the file's size (prealloc.go). Ignored with NoSync.
	Preallocate bool
	// OnFail, if set, is called once, on the writer goroutine, when a
	// write fails and the log starts refusing writes, in place of the
	// log's own error line: an owner that writes elsewhere too (the
	// storage layer's applier) reports one failure once, whichever of
	// its writers hits it first.
	OnFail func(error)
}

// SyncStats describes one group commit.
type SyncStats struct {
	Records int
	Bytes   int
	Took    time.Duration // writes and fdatasyncs
	// First and Last are the positions of the batch's first and last
	// records.
	First, Last Pos
}

// Stats are counters since Open.
type Stats struct {
	Appends int64 // Append calls that queued records
	Records int64 // records queued
	Syncs   int64 // fdatasync calls on segment files
	Bytes   int64 // bytes written to segment files
	// Filled and Recycled count the segments prepared ahead
	// (Preallocate): written full of zeros, or reused from a segment
	// TruncateFront dropped.
	Filled, Recycled int64
	Failed           bool
}

var (
	// ErrClosed answers calls on a closed Log.
	ErrClosed = errors.New("wal: closed")
	// ErrFailed is in the chain of the sticky error of a failed Log.
	ErrFailed = errors.New("wal: failed")
)

const (
	defaultSegmentSize = 64 << 20
	defaultLazyDelay   = 2 * time.Millisecond
)

// failure is the sticky error: the operation, the file and the cause (the
// errno when there is one). Its chain holds ErrFailed and the cause.
type failure struct {
	op, file string
	err      error
}

func (f *failure) Error() string   { return "wal: " + f.op + " " + f.file + ": " + f.err.Error() }
func (f *failure) Unwrap() []error { return []error{ErrFailed, f.err} }

// fail builds the sticky error; an *os.PathError is unwrapped because the
// failure names the file itself.
func failed(op, file string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &failure{op: op, file: file, err: err}
}

// segment is one file of the log.
type segment struct {
	first Pos    // Pos of its first record (and its name)
	path  string // dir joined with the name
	// filled: the segment was filled ahead (Preallocate) when this
	// process rolled into it, so its file holds at least SegmentSize
	// written bytes and can be recycled as the next fill.
	filled bool
}

func segmentName(first Pos) string { return fmt.Sprintf("%016x.wal", uint64(first)) }

// pending is what Append queued and the writer has not taken yet: framed
// records, in order.
type pending struct {
	buf   []byte
	sizes []int // frame sizes, in order: where a segment may roll
	first Pos   // Pos of the first frame in buf
	// urgent: a record of it was appended by Append or AppendThen, or is
	// waited for (WaitDurable); else every record is lazy, and the
	// writer commits them only at lazySince + LazyDelay.
	urgent bool
	// now: an urgent record of it wants no gather (durable.Now).
	now       bool
	lazySince time.Time
}

// Log is a write-ahead log in one directory. Its methods are safe for
// concurrent use.
type Log struct {
	dir  string
	fs   FS
	opts Options
	log  zerolog.Logger

	// truncMu keeps TruncateFront from removing a file Read is reading.
	truncMu sync.RWMutex

	mu      sync.Mutex
	segs    []segment // oldest first; the last is being written
	last    Pos
	durable Pos
	err     error // sticky failure
	closing bool  // Close was called: Append refuses
	closed  bool  // the writer is gone: nothing more becomes durable
	queue   pending
	// waits: the waiters and callbacks for positions' outcomes.
	waits durable.Waits

	// committing is the last Pos of the batch the writer is committing,
	// 0 if none: a waiter for it needs no new group commit.
	committing Pos

	// Writer goroutine only.
	lazyTimer  *time.Timer
	active     File
	activePath string
	activeSize int64
	spare      pending
	// activeFilled: the active segment was filled with zeros ahead
	// (Preallocate), so writes overwrite and do not extend it.
	activeFilled bool
	filling      bool   // a fill was started and not taken yet
	ready        string // a filled segment taken from filledCh, not yet rolled into
	// noRoomUntil: after a look found no room for a fill (roomToFill),
	// the active segment's size at which to look again: every fillAfter
	// bytes, not at every commit.
	noRoomUntil int64
	noRoom      bool // the last look found no room (logged once)
	filledCh    chan filled
	fillWG      sync.WaitGroup

	// recycleMu guards kept: a filled segment TruncateFront dropped is
	// kept, as recycledName, for the writer to reuse as the next one.
	// TruncateFront runs on its caller's goroutine.
	recycleMu sync.Mutex
	kept      bool

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	appends, records, syncs, bytes atomic.Int64
	filledN, recycledN             atomic.Int64
}

// First is the first record still held, 0 if none.
func (l *Log) First() Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	if first := l.segs[0].first; l.last >= first {
		return first
	}
	return 0
}

// Last is the last record appended, durable or not.
func (l *Log) Last() Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Durable is the last record made durable.
func (l *Log) Durable() Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// Err is the sticky failure, nil if none; errors.Is(err, ErrFailed).
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Stats returns the counters.
func (l *Log) Stats() Stats {
	return Stats{Appends: l.appends.Load(), Records: l.records.Load(), Syncs: l.syncs.Load(),
		Bytes: l.bytes.Load(), Filled: l.filledN.Load(), Recycled: l.recycledN.Load(), Failed: l.Err() != nil}
}

// Append queues copies of recs, in order, and returns the Pos of the last.
// It never waits for the disk: WaitDurable or OnDurable does. The order of
// the log is the order of Append calls; the records of one call are
// contiguous. After a failure it returns the sticky error, after Close
// ErrClosed.
func (l *Log) Append(recs ...[]byte) (Pos, error) {
	return l.AppendThen(nil, recs...)
}

// AppendThen is Append that also registers fn for the outcome of the last
// record (as OnDurable does), in the same step: fn then always runs on the
// writer goroutine, never on the caller's, so the caller may hold a lock fn
// takes. (Append followed by OnDurable could find the record durable
// already and run fn at once, on the caller's goroutine.) fn is not called
// when AppendThen returns an error.
func (l *Log) AppendThen(fn func(error), recs ...[]byte) (Pos, error) {
	return l.append(fn, durable.Gather, recs)
}

// AppendLazy is AppendThen for records nobody waits for now: the writer
// starts no group commit for them alone, but takes them into the next one
// a record appended otherwise (or a WaitDurable) starts, and commits them
// by themselves only Options.LazyDelay after the first of them was
// queued. A caller that is answered at append because it appends to this
// log too (durable.Shares) and appends what it waits for next, and the
// writes that only record an outcome (a transaction's Complete, markers
// from the coordinator of the same log), so share the fdatasync of the
// next write someone waits for instead of costing one of their own.
// Order is unchanged: a lazy record is durable before every record
// appended after it.
func (l *Log) AppendLazy(fn func(error), recs ...[]byte) (Pos, error) {
	return l.append(fn, durable.Lazy, recs)
}

// AppendJoined appends one record, head followed by body, as AppendThen
// (durable.Gather or durable.Now) or AppendLazy (durable.Lazy) would
// append the two joined: a caller that frames its records with a head of
// its own appends them without copying each into a new buffer first. A
// record appended with durable.Now is committed without the gather
// (Options.CommitDelay).
func (l *Log) AppendJoined(fn func(error), u durable.Urgency, head, body []byte) (Pos, error) {
	return l.appendRecords(fn, u, head, [][]byte{body})
}

func (l *Log) append(fn func(error), u durable.Urgency, recs [][]byte) (Pos, error) {
	return l.appendRecords(fn, u, nil, recs)
}

// appendRecords appends recs, each preceded by head (nil but for
// AppendJoined's single record).
func (l *Log) appendRecords(fn func(error), u durable.Urgency, head []byte, recs [][]byte) (Pos, error) {
	// Checksum the data outside the lock; only the Pos is hashed under it.
	var small [8]uint32
	partial := small[:0]
	for _, rec := range recs {
		if n := len(head) + len(rec); n > maxRecord {
			return 0, fmt.Errorf("wal: record of %d bytes, the limit is %d", n, maxRecord)
		}
		partial = append(partial, joinedCRC(head, rec))
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return 0, l.err
	}
	if l.closing {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	if len(recs) == 0 {
		last := l.last
		l.mu.Unlock()
		return last, nil
	}
	q := &l.queue
	if len(q.sizes) == 0 {
		q.first = l.last + 1
	}
	for i, rec := range recs {
		l.last++
		q.buf = appendJoinedFrame(q.buf, l.last, head, rec, partial[i])
		q.sizes = append(q.sizes, headerSize+len(head)+len(rec))
	}
	last := l.last
	if fn != nil {
		l.waits.Then(last, fn)
	}
	wasUrgent, wasLazy := q.urgent, !q.lazySince.IsZero()
	lazy := u == durable.Lazy
	if !lazy {
		q.urgent = true
		q.now = q.now || u == durable.Now
	} else if !wasLazy {
		q.lazySince = time.Now()
	}
	l.mu.Unlock()

	l.appends.Add(1)
	l.records.Add(int64(len(recs)))
	if wasUrgent || (lazy && wasLazy) {
		return last, nil // the writer is woken already, or its timer runs
	}
	l.wakeWriter()
	return last, nil
}

func (l *Log) wakeWriter() {
	select {
	case l.wake <- struct{}{}:
	default: // the writer is already woken
	}
}

// WaitDurable returns nil once Durable() >= p, the sticky error if the log
// failed first, ErrClosed if it was closed before p was appended, and
// ctx.Err() if ctx ends first. The waiter is woken once, when its own
// outcome is known, not at every group commit: a waiter for a position
// beyond the last (one that watches for the log's failure) costs nothing
// while the log writes.
func (l *Log) WaitDurable(ctx context.Context, p Pos) error {
	l.mu.Lock()
	if err, known := l.outcomeLocked(p); known {
		l.mu.Unlock()
		return err
	}
	// A waiter for a lazy record still queued: commit it now. Only a
	// record appended already: a waiter for a position beyond the last
	// waits for no queued record, and hurrying for it would give every
	// lazy record a group commit of its own.
	hurry := p > l.committing && p <= l.last && len(l.queue.sizes) > 0 && !l.queue.urgent
	if hurry {
		l.queue.urgent = true
	}
	// A waiter that left (ctx) stays listed until p's outcome is known.
	outcome := l.waits.Wait(p)
	l.mu.Unlock()
	if hurry {
		l.wakeWriter()
	}
	return durable.Await(ctx, outcome)
}

// outcomeLocked is what a waiter for p is answered now; known is false
// while nothing is known yet.
func (l *Log) outcomeLocked(p Pos) (err error, known bool) {
	switch {
	case p <= l.durable:
		return nil, true
	case l.err != nil:
		return l.err, true
	case l.closed:
		return ErrClosed, true
	}
	return nil, false
}

// OnDurable calls fn(nil) once p is durable, fn(err) if the log fails
// first (fn(ErrClosed) if it is closed before p was appended). fn runs on
// the writer goroutine, so it must be short, or at once on the caller's
// if the outcome is already known. Callbacks registered for increasing p
// run in order of p; so do callbacks that fall due together, whatever
// order they were registered in.
func (l *Log) OnDurable(p Pos, fn func(error)) {
	l.waits.OnDurable(&l.mu, l.outcomeLocked, p, fn)
}

// advanceLocked wakes the waiters whose outcome is known after durable,
// err or closed changed. The caller then runs deliver; until it has,
// OnDurable lists even a ready callback, so that it cannot overtake one
// for an earlier Pos.
func (l *Log) advanceLocked() { l.waits.WakeLocked(l.outcomeLocked) }

// deliver runs the callbacks whose outcome is known, in order of Pos,
// until none is left; on the writer goroutine.
func (l *Log) deliver() { l.waits.Deliver(&l.mu, l.outcomeLocked) }

// Close writes and syncs what is queued, stops the writer and closes the
// file. Later Appends return ErrClosed. It returns the sticky error if the
// log failed.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		close(l.stop)
		<-l.done
		l.fillWG.Wait()
		cerr := l.active.Close()
		if err := l.Err(); err != nil {
			l.closeErr = err
		} else if cerr != nil {
			l.closeErr = fmt.Errorf("wal: close %s: %w", l.activePath, cerr)
		}
	})
	return l.closeErr
}

// run is the writer goroutine: it takes everything queued, writes it and
// syncs once, so records that arrive during an fdatasync share the next
// one. No timer: a lone record is written at once, after gather.
func (l *Log) run() {
	defer close(l.done)
	l.lazyTimer = time.NewTimer(time.Hour)
	l.lazyTimer.Stop()
	defer l.lazyTimer.Stop()
	for {
		select {
		case <-l.wake:
			l.gather()
			l.flush(false)
		case <-l.lazyTimer.C:
			l.flush(false)
		case <-l.stop:
			l.flush(true) // Append refuses now: this empties the queue
			l.mu.Lock()
			l.closed = true
			l.advanceLocked()
			l.mu.Unlock()
			l.deliver() // ErrClosed to callbacks for Pos never appended
			return
		}
	}
}

// gather holds a writer woken from idle by a record someone waits for
// for Options.CommitDelay, so that records appended right behind it (a
// transaction's batches to two partitions, sent together by the client)
// share its fdatasync instead of waiting for it and then for their own.
// It yields rather than sleeps: a timer would overshoot the few
// microseconds by far. Under load the writer is never idle (flush commits
// back to back) and never gathers. A queue holding a record appended with
// durable.Now is not held: its waiter expects nothing behind it, and the
// goroutines that run while the writer yields (a Prepare's markers) would
// hold its fdatasync back longer than the delay. Without fdatasync
// (NoSync) there is nothing to share but a write: never held.
func (l *Log) gather() {
	if l.opts.CommitDelay <= 0 || l.opts.NoSync {
		return
	}
	l.mu.Lock()
	gather := l.queue.urgent && !l.queue.now
	l.mu.Unlock()
	if !gather {
		return
	}
	for until := time.Now().Add(l.opts.CommitDelay); time.Now().Before(until); {
		runtime.Gosched()
	}
}

// flush commits the queue until it is empty, or holds only lazy records
// younger than LazyDelay (all, when all): the timer then wakes the writer
// for them.
func (l *Log) flush(all bool) {
	for {
		l.mu.Lock()
		if len(l.queue.sizes) == 0 || l.err != nil {
			l.mu.Unlock()
			return
		}
		if !all && !l.queue.urgent {
			if wait := l.opts.LazyDelay - time.Since(l.queue.lazySince); wait > 0 {
				l.mu.Unlock()
				l.lazyTimer.Reset(wait)
				return
			}
		}
		batch := l.queue
		l.queue, l.spare = l.spare, pending{}
		l.queue = pending{buf: l.queue.buf[:0], sizes: l.queue.sizes[:0]}
		l.committing = batch.first + Pos(len(batch.sizes)) - 1
		l.mu.Unlock()

		start := time.Now()
		err := l.commit(batch)
		took := time.Since(start)
		last := batch.first + Pos(len(batch.sizes)) - 1

		l.mu.Lock()
		if err != nil {
			if l.err == nil {
				l.err = err
				if l.opts.OnFail != nil {
					l.opts.OnFail(err)
				} else {
					var f *failure
					errors.As(err, &f)
					l.log.Error().Str("file", f.file).Err(err).Msg("wal: write failed; the log refuses every write from now on")
				}
			}
			// Records queued behind the failed batch are never
			// written: a hole before them would be unreadable.
			l.queue = pending{}
		} else {
			l.durable = last
		}
		l.committing = 0
		l.advanceLocked()
		l.mu.Unlock()
		l.spare = batch
		l.deliver()
		if err == nil && l.opts.OnSync != nil {
			l.opts.OnSync(SyncStats{Records: len(batch.sizes), Bytes: len(batch.buf), Took: took, First: batch.first, Last: last})
		}
	}
}

// commit writes a batch, rolling segments where they would exceed the
// segment size, then syncs. On error it returns the failure (never
// retried: after a failed fdatasync the kernel may have dropped the dirty
// pages and marked them clean, so a retry that succeeds proves nothing).
func (l *Log) commit(b pending) error {
	pos, off := b.first, 0
	if l.ready == "" {
		l.ready = l.takeFilled()
	}
	if l.ready != "" && !l.activeFilled && l.activeSize > 0 {
		// A filled segment is ready: leave the appending one early.
		if err := l.roll(pos); err != nil {
			return err
		}
	}
	for i := 0; i < len(b.sizes); {
		if l.activeSize > 0 && l.activeSize+int64(b.sizes[i]) > l.opts.SegmentSize {
			if err := l.roll(pos); err != nil {
				return err
			}
		}
		// As many frames as fit; at least one, in an empty segment.
		j, n := i+1, b.sizes[i]
		for j < len(b.sizes) && l.activeSize+int64(n+b.sizes[j]) <= l.opts.SegmentSize {
			n += b.sizes[j]
			j++
		}
		written, err := l.active.Write(b.buf[off : off+n])
		l.activeSize += int64(written)
		l.bytes.Add(int64(written))
		if err != nil {
			return failed("write", l.activePath, err)
		}
		pos, off, i = pos+Pos(j-i), off+n, j
	}
	if !l.activeFilled && l.activeSize >= l.fillAfter() {
		l.startFill()
	}
	return l.sync()
}

func (l *Log) sync() error {
	if l.opts.NoSync {
		return nil
	}
	l.syncs.Add(1)
	if err := l.active.Sync(); err != nil {
		return failed("fdatasync", l.activePath, err)
	}
	return nil
}

// roll starts the segment whose first record is first. The full segment
// is synced BEFORE the next one is created: at open, only the last
// segment may have a torn tail.
func (l *Log) roll(first Pos) error {
	if err := l.sync(); err != nil {
		return err
	}
	if err := l.active.Close(); err != nil {
		return failed("close", l.activePath, err)
	}
	path := filepath.Join(l.dir, segmentName(first))
	var f File
	var err error
	filledSeg := l.ready != ""
	if filledSeg {
		// Written from its start, over the zeros: no O_APPEND.
		if err = l.fs.Rename(l.ready, path); err != nil {
			return failed("rename", l.ready, err)
		}
		l.ready = ""
		if f, err = l.fs.OpenFile(path, os.O_WRONLY, 0o600); err != nil {
			return failed("open", path, err)
		}
	} else if f, err = l.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600); err != nil {
		return failed("create", path, err)
	}
	l.active, l.activePath, l.activeSize, l.activeFilled = f, path, 0, filledSeg
	l.noRoomUntil = 0
	if filledSeg {
		l.startFill() // the one after it
	}
	if !l.opts.NoSync {
		// The new file's directory entry must be durable before its
		// records are called durable.
		if err := l.fs.SyncDir(l.dir); err != nil {
			return failed("sync dir", l.dir, err)
		}
	}
	l.mu.Lock()
	l.segs = append(l.segs, segment{first: first, path: path, filled: filledSeg})
	l.mu.Unlock()
	return nil
}
