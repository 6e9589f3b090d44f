package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/wal"
)

// Root is where a space's buckets live: the bbolt transaction itself for
// a space that owns the whole file, or its top-level bucket in a shared
// one. Both *bbolt.Tx and *bbolt.Bucket implement it.
type Root interface {
	Bucket(name []byte) *bbolt.Bucket
	CreateBucketIfNotExists(name []byte) (*bbolt.Bucket, error)
}

// initialMmapSize is the store's bbolt mapping at open (bbolt.Options).
const initialMmapSize = 1 << 30

// Ensure returns root's bucket name, creating it when missing. The
// applier opens the same buckets for every record: bbolt's
// CreateBucketIfNotExists copies the name each call, a lookup does not.
func Ensure(root Root, name []byte) (*bbolt.Bucket, error) {
	if b := root.Bucket(name); b != nil {
		return b, nil
	}
	return root.CreateBucketIfNotExists(name)
}

// Kind names the codec of a record: which component's Apply reads it.
type Kind uint8

// ApplyFunc writes one record of its Kind into the root of the space that
// appended it. It runs on the applier (and at open, during replay) inside
// a bbolt write transaction shared with other records.
type ApplyFunc func(root Root, rec []byte) error

// BatchApplyFunc writes records of one space, in log order, into its root:
// what its Kind's ApplyFunc does for each in turn, except that it may skip
// a write a later record of recs replaces (one transaction's state written
// four times between two applies is written once). The applier uses it
// for a kind that has one; replay at open applies record by record.
type BatchApplyFunc func(root Root, recs [][]byte) error

// Options configures a Store.
type Options struct {
	// NoSync skips fdatasync in the log and bbolt: acknowledged writes
	// can be lost on a crash. Only for --unsafe-no-fsync and benchmarks.
	NoSync bool
	// Kinds are the codecs of the records this store may hold; a record
	// of another kind refuses the open.
	Kinds map[Kind]ApplyFunc
	// BatchKinds optionally give kinds of Kinds a BatchApplyFunc.
	BatchKinds map[Kind]BatchApplyFunc
	// ApplyInterval is how long durable records may wait for the
	// applier (default 1 s): the longer, the fewer bbolt commits, whose
	// fdatasyncs compete with the log's on the disk (at 64 producers, 100
	// ms cost a third of the throughput against 1 s), and the more records
	// a restart replays (a second's worth).
	ApplyInterval time.Duration
	// ApplyBytes starts the applier early when that many bytes of
	// records wait (default 32 MiB).
	ApplyBytes int
	// OpenTimeout bounds waiting for bbolt's file lock (default 5 s).
	OpenTimeout time.Duration
	// FS is the log's file layer (nil: the operating system's). On the
	// operating system's files the log preallocates its segments
	// (wal.Options.Preallocate); a test's FS, which counts or simulates
	// each write, sees the log's own writes only.
	FS wal.FS
	// SegmentSize is the log's segment size (0: wal's default).
	SegmentSize int64
	// CommitDelay is the log's wal.Options.CommitDelay: how long a group
	// commit started from idle gathers records appended right behind
	// the first.
	CommitDelay time.Duration
	// OnSync, if set, observes each group commit of the log.
	OnSync func(wal.SyncStats)
	// OnApply, if set, observes each bbolt commit of the applier.
	OnApply func(ApplyStats)
	Log     zerolog.Logger
}

// ApplyStats describes one bbolt commit of the applier.
type ApplyStats struct {
	Records int
	Pages   int64
	Took    time.Duration
}

// Stats counts a store's work.
type Stats struct {
	Appends    uint64 // records appended
	Syncs      uint64 // log group commits
	Fdatasyncs uint64 // fdatasync calls of the log (one per group commit, plus one per new segment)
	Bytes      uint64 // bytes written to the log
	Applies    uint64 // bbolt commits of the applier
	Pages      uint64 // bbolt pages written by the applier
	// SegmentsFilled and SegmentsRecycled count the log's segments
	// prepared ahead: written full of zeros, or reused from a segment the
	// applier no longer needed (no byte written).
	SegmentsFilled, SegmentsRecycled uint64
}

// WALDir is the folder of the log, beside the bbolt file.
const WALDir = "wal"

var (
	bucketStorage = []byte("_storage")
	keyApplied    = []byte("applied")
)

// ErrClosed answers an append to a closed space or store.
var ErrClosed = errors.New("storage: closed")

// Store is one process's log and bbolt file.
type Store struct {
	opts   Options
	db     *bbolt.DB
	wal    *wal.Log
	path   string
	walDir string
	lock   *os.File // the data dir's LOCK, held until Close

	mu     sync.Mutex
	spaces map[string]*Space
	// committers are the spaces with an OnCommit hook; carried is
	// onSync's scratch (the log's writer only).
	committers []*Space
	carried    []*Space
	waiting    []record // appended, not yet applied, in log order
	waitSize   int
	applied    wal.Pos
	err        error // sticky: an apply failed
	closed     bool
	stats      Stats

	failed   chan struct{} // closed at the first failure (Failed)
	reported atomic.Bool   // the first failure's error line is written
	applyNow chan chan struct{}
	kick     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	once     sync.Once
}

// reportFailure writes the store's one error line for its first
// failure; a later one (the log and the applier run into a full disk
// in the same millisecond) is a Warn line, so a fail-stop is one error
// line whichever writer saw it first.
func (st *Store) reportFailure(err error, file, msg string) {
	if st.reported.CompareAndSwap(false, true) {
		st.opts.Log.Error().Err(err).Str("file", file).Msg(msg)
		return
	}
	st.opts.Log.Warn().Err(err).Str("file", file).Msg(msg + " (after an earlier failure)")
}

// onLogFail reports the log's failure (wal.Options.OnFail).
func (st *Store) onLogFail(err error) {
	st.reportFailure(err, st.walDir, "wal: write failed; the log refuses every write from now on")
}

// record is one appended record the applier has not written yet.
type record struct {
	pos   wal.Pos
	space *Space
	body  []byte
}

// Open opens (creating) the bbolt file dbPath and the log in the folder
// WALDir beside it, and replays the log past the position bbolt was
// applied up to. A bbolt file without the log (written before the log
// existed) is taken over as it is, with one log line.
//
// It refuses, with an error naming the file: a data dir another process
// holds; a bbolt file that is truncated or has a page that is not what
// it should be; a log that is damaged other than by a torn tail, or
// that starts after or (with fsync on) ends before the position bbolt
// was applied to. With NoSync a log that ends before it (a power loss)
// is taken as it is, with a Warn line.
func Open(dbPath string, opts Options) (st *Store, err error) {
	if opts.ApplyInterval <= 0 {
		opts.ApplyInterval = time.Second
	}
	if opts.ApplyBytes <= 0 {
		opts.ApplyBytes = 32 << 20
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = 5 * time.Second
	}
	defer func() {
		// bbolt panics on some damaged files: say which file, never
		// crash with a stack trace.
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("%s: damaged: %v", dbPath, r)
		}
	}()
	dir := filepath.Dir(dbPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	walDir := filepath.Join(dir, WALDir)
	walFS := opts.FS
	if walFS == nil {
		walFS = wal.OSFS{}
	}
	// Ask the log's own file layer: with a test FS the folder is not on
	// the real disk.
	_, statErr := walFS.ReadDir(walDir)
	freshWAL := errors.Is(statErr, iofs.ErrNotExist)
	existed := fileExists(dbPath)
	if err := checkFile(dbPath, opts.OpenTimeout); err != nil {
		return nil, err
	}
	// NoFreelistSync and the hashmap freelist: one page less written per
	// commit and cheap allocation in a growing file; the freelist is
	// rebuilt by a scan at open. The mapping is reserved at 1 GiB up front
	// (address space, not memory; etcd reserves 10 GiB): bbolt otherwise
	// remaps at every doubling of the file, and each remap waits for every
	// read transaction (a Fetch) and copies the applier's open nodes out
	// of the old mapping.
	db, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{Timeout: opts.OpenTimeout, NoSync: opts.NoSync,
		NoFreelistSync: true, FreelistType: bbolt.FreelistMapType, InitialMmapSize: initialMmapSize})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dbPath, err)
	}
	st = &Store{opts: opts, db: db, path: dbPath, walDir: walDir, lock: lock, spaces: map[string]*Space{},
		applyNow: make(chan chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	if st.applied, err = st.readApplied(); err != nil {
		db.Close()
		return nil, err
	}
	if freshWAL && st.applied > 0 {
		db.Close()
		return nil, fmt.Errorf("%s: the log folder %s is missing, but the store was applied from a log up to record %d: records after it would be lost", dbPath, walDir, st.applied)
	}
	st.wal, err = wal.Open(walDir, wal.Options{FS: opts.FS, NoSync: opts.NoSync, Preallocate: opts.FS == nil, SegmentSize: opts.SegmentSize, CommitDelay: opts.CommitDelay, Log: opts.Log, OnSync: st.onSync, OnFail: st.onLogFail})
	if err != nil {
		db.Close()
		return nil, err
	}
	if last := st.wal.Last(); st.applied > last {
		// The applier writes only durable records, so with fsync on
		// the log cannot end before bbolt's applied position unless it
		// lost records it had made durable: any after the applied
		// position are lost with them, unnoticed.
		if !opts.NoSync {
			st.wal.Close()
			db.Close()
			return nil, fmt.Errorf("%s: the store was applied up to log record %d, but the log %s ends at record %d: "+
				"the log lost records it had made durable (segment files removed or damaged, or a power loss with --unsafe-no-fsync), "+
				"and records after %d may be lost with them; restore the log, or start over with --force-new-cluster",
				dbPath, st.applied, walDir, last, st.applied)
		}
		// NoSync: a power loss took the log back further than bbolt.
		// bbolt holds every record up to its position; what the log
		// lost past it is lost. The log's positions start again below
		// it, so the applied position goes back to the log's end:
		// left ahead, the next replay would skip the records appended
		// from now on as applied already.
		opts.Log.Warn().Str("file", dbPath).Str("wal", walDir).Uint64("applied", uint64(st.applied)).Uint64("log_last", uint64(last)).
			Msg("storage: NoSync: the log ends before the store's applied position (records lost in a power loss); going on from the log's end")
		if err := st.setApplied(last); err != nil {
			st.wal.Close()
			db.Close()
			return nil, fmt.Errorf("%s: %w", dbPath, err)
		}
	}
	if existed && freshWAL {
		opts.Log.Info().Str("file", dbPath).Str("wal", walDir).Msg("storage: data written before the write-ahead log: taken over as it is; writes now go through the log")
	}
	if err := st.replay(); err != nil {
		st.wal.Close()
		db.Close()
		return nil, err
	}
	st.failed = make(chan struct{})
	go st.watchFailure()
	go st.applier()
	return st, nil
}

// checkFile refuses a damaged bbolt file before bbolt opens it for
// writing: opened so, bbolt walks every page to rebuild the freelist
// (NoFreelistSync), and a page past the end of a truncated file, or one
// that is not the page it should be (zeroed, overwritten), panics in a
// goroutine of bbolt's that no recover here reaches: the process would
// die with a stack trace. Read-only, bbolt reads only the meta pages
// (each with its checksum); then every page of every bucket is read here,
// where a panic or a fault is caught.
func checkFile(dbPath string, timeout time.Duration) error {
	fi, err := os.Stat(dbPath)
	if err != nil || fi.Size() == 0 {
		return nil // new, or empty: bbolt initializes it
	}
	db, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		return fmt.Errorf("%s: %w", dbPath, err)
	}
	defer db.Close()
	var size int64
	db.View(func(tx *bbolt.Tx) error {
		size = tx.Size()
		return nil
	})
	if size > fi.Size() {
		return fmt.Errorf("%s: truncated: the file is %d bytes, but its pages reach %d bytes: restore it, or start over (txncoord up --force-new-cluster)",
			dbPath, fi.Size(), size)
	}
	if err := readEveryPage(db); err != nil {
		return fmt.Errorf("%s: damaged: %v: restore it, or start over (txncoord up --force-new-cluster)", dbPath, err)
	}
	return nil
}

// readEveryPage walks every key of every bucket (so every branch and leaf
// page) on this goroutine, turning bbolt's panics on a bad page, and
// faults on a page outside the file, into an error.
func readEveryPage(db *bbolt.DB) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	var walk func(b *bbolt.Bucket)
	walk = func(b *bbolt.Bucket) {
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v == nil {
				if child := b.Bucket(k); child != nil {
					walk(child)
				}
			}
		}
	}
	return db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
			walk(b)
			return nil
		})
	})
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (st *Store) readApplied() (wal.Pos, error) {
	var applied wal.Pos
	err := st.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStorage)
		if b == nil {
			return nil
		}
		if v := b.Get(keyApplied); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("%s: applied position of %d bytes", st.path, len(v))
			}
			applied = wal.Pos(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return applied, err
}

// setApplied writes p as the applied position (at open).
func (st *Store) setApplied(p wal.Pos) error {
	if err := st.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketStorage)
		if err != nil {
			return err
		}
		return b.Put(keyApplied, binary.BigEndian.AppendUint64(nil, uint64(p)))
	}); err != nil {
		return err
	}
	st.applied = p
	return nil
}

// replay writes the log's records past the applied position into bbolt,
// in chunks of one bbolt commit each.
func (st *Store) replay() error {
	first, last := st.wal.First(), st.wal.Last()
	if last == 0 || last <= st.applied {
		return nil
	}
	if first > st.applied+1 {
		return fmt.Errorf("%s: the log starts at record %d but the store was applied up to %d only: records %d-%d are missing",
			st.path, first, st.applied, st.applied+1, first-1)
	}
	const chunk = 4096
	var batch []record
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := st.write(batch); err != nil {
			return fmt.Errorf("%s: replaying the log: %w", st.path, err)
		}
		st.applied = batch[len(batch)-1].pos
		batch = batch[:0]
		return nil
	}
	n := 0
	err := st.wal.Read(st.applied+1, func(p wal.Pos, rec []byte) error {
		kind, name, body, err := splitRecord(rec)
		if err != nil {
			return fmt.Errorf("record %d: %w", p, err)
		}
		if st.opts.Kinds[kind] == nil {
			return fmt.Errorf("record %d: unknown kind %d", p, kind)
		}
		batch = append(batch, record{pos: p, space: &Space{name: name, kind: kind}, body: append([]byte(nil), body...)})
		n++
		if len(batch) == chunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", st.path, err)
	}
	st.opts.Log.Info().Str("file", st.path).Int("records", n).Uint64("applied", uint64(st.applied)).Msg("storage: log replayed")
	return nil
}

// recordHead frames a space's records in the log: kind, the space's name,
// then the component's bytes.
func recordHead(kind Kind, name string) []byte {
	b := make([]byte, 0, 2+len(name))
	b = append(b, byte(kind), byte(len(name)))
	return append(b, name...)
}

func splitRecord(rec []byte) (Kind, string, []byte, error) {
	if len(rec) < 2 || len(rec) < 2+int(rec[1]) {
		return 0, "", nil, fmt.Errorf("record of %d bytes: too short", len(rec))
	}
	n := int(rec[1])
	return Kind(rec[0]), string(rec[2 : 2+n]), rec[2+n:], nil
}

// write applies records to bbolt in one transaction, with the position of
// the last one.
func (st *Store) write(recs []record) error {
	return st.db.Update(func(tx *bbolt.Tx) error {
		// A space whose kind applies batches gets its records at once,
		// in log order, after the others: spaces have roots of their
		// own, so their order against each other does not matter.
		var batched map[*Space][][]byte
		var order []*Space
		for _, r := range recs {
			if st.opts.BatchKinds[r.space.kind] != nil {
				if batched == nil {
					batched = map[*Space][][]byte{}
				}
				if _, ok := batched[r.space]; !ok {
					order = append(order, r.space)
				}
				batched[r.space] = append(batched[r.space], r.body)
				continue
			}
			root, err := spaceRoot(tx, r.space.name, true)
			if err != nil {
				return err
			}
			apply := st.opts.Kinds[r.space.kind]
			if apply == nil {
				return fmt.Errorf("record %d: unknown kind %d", r.pos, r.space.kind)
			}
			if err := apply(root, r.body); err != nil {
				return fmt.Errorf("record %d of %q: %w", r.pos, r.space.name, err)
			}
		}
		for _, sp := range order {
			root, err := spaceRoot(tx, sp.name, true)
			if err != nil {
				return err
			}
			if err := st.opts.BatchKinds[sp.kind](root, batched[sp]); err != nil {
				return fmt.Errorf("records up to %d of %q: %w", recs[len(recs)-1].pos, sp.name, err)
			}
		}
		b, err := tx.CreateBucketIfNotExists(bucketStorage)
		if err != nil {
			return err
		}
		return b.Put(keyApplied, binary.BigEndian.AppendUint64(nil, uint64(recs[len(recs)-1].pos)))
	})
}

func spaceRoot(tx *bbolt.Tx, name string, create bool) (Root, error) {
	if name == "" {
		return tx, nil
	}
	if create {
		return Ensure(tx, []byte(name))
	}
	b := tx.Bucket([]byte(name))
	if b == nil {
		return nil, fmt.Errorf("storage: space %q has no bucket", name)
	}
	return b, nil
}

func (st *Store) onSync(s wal.SyncStats) {
	st.mu.Lock()
	st.stats.Syncs++
	st.stats.Bytes += uint64(s.Bytes)
	carried := st.carried[:0]
	for _, sp := range st.committers {
		n := 0
		for n < len(sp.uncommitted) && sp.uncommitted[n] <= s.Last {
			n++
		}
		if n > 0 {
			sp.uncommitted = sp.uncommitted[:copy(sp.uncommitted, sp.uncommitted[n:])]
			carried = append(carried, sp)
		}
	}
	st.mu.Unlock()
	for _, sp := range carried {
		sp.opts.OnCommit(s)
	}
	st.carried = carried
	if st.opts.OnSync != nil {
		st.opts.OnSync(s)
	}
}

// append puts one record of sp in the log; the caller learns its position.
// then, if set, runs on the log's writer once the record is durable or the
// log failed (never on the caller's goroutine). u: how soon the log
// commits it (durable.Urgency).
func (st *Store) append(sp *Space, body []byte, then func(error), u durable.Urgency) (wal.Pos, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return 0, st.err
	}
	if st.closed {
		return 0, ErrClosed
	}
	// The space's head and the body go into the log as one record
	// (recordHead) without being joined in a buffer of their own.
	pos, err := st.wal.AppendJoined(then, u, sp.head, body)
	if err != nil {
		return 0, err
	}
	st.waiting = append(st.waiting, record{pos: pos, space: sp, body: body})
	if sp.opts.OnCommit != nil {
		sp.uncommitted = append(sp.uncommitted, pos)
	}
	st.waitSize += len(sp.head) + len(body)
	st.stats.Appends++
	if st.waitSize >= st.opts.ApplyBytes {
		select {
		case st.kick <- struct{}{}:
		default:
		}
	}
	return pos, nil
}

// Err is the failure that stopped the store's writes, nil if none.
func (st *Store) Err() error {
	if err := st.wal.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// Last is the position of the last record appended.
func (st *Store) Last() wal.Pos { return st.wal.Last() }

// Durable is the position of the last durable record.
func (st *Store) Durable() wal.Pos { return st.wal.Durable() }

// WaitDurable waits until the log is durable up to p.
func (st *Store) WaitDurable(ctx context.Context, p wal.Pos) error {
	return st.wal.WaitDurable(ctx, p)
}

// OnDurable calls fn once p is durable, or failed (wal.Log.OnDurable).
func (st *Store) OnDurable(p wal.Pos, fn func(error)) { st.wal.OnDurable(p, fn) }

// The process log is the durability of every space of the store: a
// component compares a caller's log with it (durable.Shares) to answer at
// append.
var _ durable.Log = (*Store)(nil)

// Stats returns the store's counters.
func (st *Store) Stats() Stats {
	st.mu.Lock()
	out := st.stats
	st.mu.Unlock()
	ws := st.wal.Stats()
	out.Fdatasyncs = uint64(ws.Syncs)
	out.SegmentsFilled, out.SegmentsRecycled = uint64(ws.Filled), uint64(ws.Recycled)
	return out
}

// Applied is the position bbolt holds every record up to.
func (st *Store) Applied() wal.Pos {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.applied
}

// Apply writes every record durable now into bbolt before it returns.
func (st *Store) Apply() error {
	done := make(chan struct{})
	select {
	case st.applyNow <- done:
		<-done
	case <-st.stopped:
	}
	return st.Err()
}

func (st *Store) applier() {
	defer close(st.stopped)
	t := time.NewTicker(st.opts.ApplyInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			st.applyDurable()
		case <-st.kick:
			st.applyDurable()
		case done := <-st.applyNow:
			st.applyDurable()
			close(done)
		case <-st.stop:
			st.applyDurable()
			return
		}
	}
}

// applyDurable writes the durable prefix of the waiting records into bbolt
// and truncates the log behind it.
func (st *Store) applyDurable() {
	if st.wal.Err() != nil {
		// Fail-stop: once the log failed the process writes nothing
		// more, bbolt included; a restart replays what the log holds.
		// (On a full disk the apply would fail too, and log a second
		// error line for the one failure.)
		return
	}
	durable := st.wal.Durable()
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return
	}
	n := 0
	for n < len(st.waiting) && st.waiting[n].pos <= durable {
		n++
	}
	recs := st.waiting[:n:n]
	st.mu.Unlock()
	if n == 0 {
		return
	}
	start := time.Now()
	pages := st.pagesWritten()
	if err := st.write(recs); err != nil {
		st.mu.Lock()
		st.err = fmt.Errorf("storage: applying the log to %s: %w", st.path, err)
		st.mu.Unlock()
		st.reportFailure(err, st.path, "storage: applying the log failed: every write of the process stops")
		return
	}
	pages = st.pagesWritten() - pages
	last := recs[n-1].pos
	size := 0
	for _, r := range recs {
		size += len(r.body) + 2 + len(r.space.name)
	}
	st.mu.Lock()
	// The applied records move out of the way in place: the slice keeps
	// its capacity, so the next second's records do not grow it again.
	rest := copy(st.waiting, st.waiting[n:])
	clear(st.waiting[rest:])
	st.waiting = st.waiting[:rest]
	st.waitSize -= size
	st.applied = last
	st.stats.Applies++
	st.stats.Pages += uint64(pages)
	spaces := make([]*Space, 0, len(st.spaces))
	for _, sp := range st.spaces {
		if sp.opts.OnApplied != nil {
			spaces = append(spaces, sp)
		}
	}
	st.mu.Unlock()
	for _, sp := range spaces {
		sp.opts.OnApplied(last)
	}
	if st.opts.OnApply != nil {
		st.opts.OnApply(ApplyStats{Records: n, Pages: pages, Took: time.Since(start)})
	}
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if closed {
		return // the log is closed: the next open truncates
	}
	if err := st.wal.TruncateFront(last + 1); err != nil {
		st.opts.Log.Warn().Err(err).Msg("storage: truncating the log")
	}
}

// Close stops new appends, waits for what was appended to be durable,
// applies it to bbolt and closes the log and the file.
func (st *Store) Close() error {
	var err error
	st.once.Do(func() {
		st.mu.Lock()
		st.closed = true
		st.mu.Unlock()
		werr := st.wal.Close() // syncs what is queued
		close(st.stop)
		<-st.stopped
		err = errors.Join(werr, st.db.Close(), st.lock.Close())
	})
	return err
}

func (st *Store) pagesWritten() int64 {
	s := st.db.Stats()
	return s.TxStats.GetWrite()
}

// watchFailure closes failed once the log fails (not when it is closed).
func (st *Store) watchFailure() {
	err := st.wal.WaitDurable(context.Background(), wal.Pos(math.MaxUint64))
	if err != nil && !errors.Is(err, wal.ErrClosed) {
		close(st.failed)
	}
}

// Failed is closed once the process log has failed: a request waiting for
// something that needs a write (a held batch waiting for a marker) can
// give up at once with KAFKA_STORAGE_ERROR rather than at its timeout.
// A failed bbolt apply stops appends (Err) but does not close it: the log
// still makes what was appended durable.
func (st *Store) Failed() <-chan struct{} { return st.failed }
