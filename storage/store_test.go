package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// Two test codecs: each record is "key=value", put into its own bucket,
// so a record applied with the wrong codec lands in the wrong bucket.
const (
	kindA Kind = 101
	kindB Kind = 102
)

func kvCodec(bucket string) ApplyFunc {
	return func(root Root, rec []byte) error {
		k, v, ok := bytes.Cut(rec, []byte("="))
		if !ok {
			return fmt.Errorf("test record %q has no '='", rec)
		}
		b, err := root.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.Put(k, v)
	}
}

var testKinds = map[Kind]ApplyFunc{kindA: kvCodec("a"), kindB: kvCodec("b")}

func openStore(t *testing.T, db string, opts Options) *Store {
	t.Helper()
	if opts.Kinds == nil {
		opts.Kinds = testKinds
	}
	st, err := Open(db, opts)
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	return st
}

func space(t *testing.T, st *Store, name string, kind Kind) *Space {
	t.Helper()
	sp, err := st.Space(name, kind, SpaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// submitWait appends "key=value" and waits until it is durable.
func submitWait(t *testing.T, sp *Space, key, value string) wal.Pos {
	t.Helper()
	pos, ch := sp.Submit([]byte(key+"="+value), nil)
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("submit %s: not durable in 10 s", key)
	}
	return pos
}

// contents reads bucket of sp as it is in bbolt.
func contents(t *testing.T, sp *Space, bucket string) map[string]string {
	t.Helper()
	got := map[string]string{}
	if err := sp.View(func(r Root) error {
		b := r.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error { got[string(k)] = string(v); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func wantContents(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

// copyFile copies src to dst (the bbolt file while no apply runs).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// appliedInFile reads the applied position straight from a closed bbolt
// file.
func appliedInFile(t *testing.T, path string) wal.Pos {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var p wal.Pos
	db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketStorage); b != nil {
			if v := b.Get(keyApplied); len(v) == 8 {
				p = wal.Pos(binary.BigEndian.Uint64(v))
			}
		}
		return nil
	})
	return p
}

// Records of two spaces of different kinds, appended interleaved, are in
// their own spaces after a close and a reopen (read back through View).
func TestRoundTripTwoSpaces(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	st := openStore(t, db, Options{})
	a, b := space(t, st, "alpha", kindA), space(t, st, "beta", kindB)
	wantA, wantB := map[string]string{}, map[string]string{}
	for i := range 50 {
		k := fmt.Sprintf("k%02d", i)
		submitWait(t, a, k, "a"+strconv.Itoa(i))
		wantA[k] = "a" + strconv.Itoa(i)
		if i%2 == 0 {
			submitWait(t, b, k, "b"+strconv.Itoa(i))
			wantB[k] = "b" + strconv.Itoa(i)
		}
	}
	submitWait(t, a, "k00", "overwritten") // a later record wins
	wantA["k00"] = "overwritten"
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, db, Options{})
	defer st.Close()
	a, b = space(t, st, "alpha", kindA), space(t, st, "beta", kindB)
	wantContents(t, "alpha", contents(t, a, "a"), wantA)
	wantContents(t, "beta", contents(t, b, "b"), wantB)
	if got := contents(t, a, "b"); len(got) != 0 {
		t.Errorf("alpha has kind B's bucket: %v", got)
	}
	if got := contents(t, b, "a"); len(got) != 0 {
		t.Errorf("beta has kind A's bucket: %v", got)
	}
	if got, want := st.Applied(), st.Last(); got != want || want != 76 {
		t.Errorf("after reopen: applied %d, last %d, want both 76", got, want)
	}
}

// Records durable in the log but never applied to bbolt are replayed
// into bbolt by Open, before any space reads. The applier is kept from
// running by a long ApplyInterval; the bbolt file is copied while it
// holds none of the records and put back after Close (which applies), so
// the reopened store has them in its log only. The log is on a CrashFS
// that loses power first: only what the log synced is replayed.
func TestReplayDurableRecordsNotApplied(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	m := waltest.NewMachine()
	opts := Options{FS: m.Process(), ApplyInterval: time.Hour}
	st := openStore(t, db, opts)
	a, b := space(t, st, "alpha", kindA), space(t, st, "beta", kindB)
	want := map[string]string{}
	var last wal.Pos
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		sp := a
		if i%3 == 0 {
			sp = b
		}
		last = submitWait(t, sp, k, "v"+strconv.Itoa(i))
		want[k] = "v" + strconv.Itoa(i)
	}
	if got := contents(t, a, "a"); len(got) != 0 {
		t.Fatalf("the applier ran despite ApplyInterval 1h: %v", got)
	}
	if st.Applied() != 0 {
		t.Fatalf("applied %d before any apply", st.Applied())
	}
	copyFile(t, db, db+".before")
	m.Crash()
	st.Close()
	copyFile(t, db+".before", db) // bbolt as of before any apply

	logs := &logtest.Buffer{}
	opts.Log = zerolog.New(logs)
	opts.FS = m.Process()
	st = openStore(t, db, opts)
	defer st.Close()
	if st.Applied() != last {
		t.Errorf("applied after replay: %d, want %d", st.Applied(), last)
	}
	a, b = space(t, st, "alpha", kindA), space(t, st, "beta", kindB)
	gotA, gotB := contents(t, a, "a"), contents(t, b, "b")
	got := map[string]string{}
	for k, v := range gotA {
		got[k] = v
	}
	for k, v := range gotB {
		if _, dup := got[k]; dup {
			t.Errorf("key %s in both spaces", k)
		}
		got[k] = v
	}
	wantContents(t, "replayed", got, want)
	if !strings.Contains(logs.String(), `"records":30`) || !strings.Contains(logs.String(), "storage: log replayed") {
		t.Errorf("no replay log line with 30 records:\n%s", logs)
	}
	// The replayed position is in bbolt: a second reopen replays nothing.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if p := appliedInFile(t, db); p != last {
		t.Errorf("applied position in the file after replay and close: %d, want %d", p, last)
	}
}

// crashOnce runs writers against a store whose log is on a CrashFS and
// whose applier runs every millisecond, loses power mid-run, and returns
// the applied position bbolt holds, the last Pos of the log as it
// reopens after the power loss, and the acknowledged records missing
// after the store reopens on it.
func crashOnce(t *testing.T, noSync bool, seed int) (applied, logLast wal.Pos, lost []string) {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	m := waltest.NewMachine()
	opts := Options{FS: m.Process(), NoSync: noSync, ApplyInterval: time.Millisecond, SegmentSize: 4096}
	st := openStore(t, db, opts)
	sp := space(t, st, "alpha", kindA)

	var mu sync.Mutex
	acked := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("w%d-%05d", w, i), strings.Repeat("x", 50+i%200)
				_, ch := sp.Submit([]byte(k+"="+v), nil)
				if err := <-ch; err != nil {
					return // the power loss: every later submit fails
				}
				mu.Lock()
				acked[k] = v
				mu.Unlock()
				n.Add(1)
			}
		}()
	}
	// Lose power after a varying amount of work, with the applier
	// having run (it runs every millisecond) and segments rolled.
	target := int64(200 + 37*seed)
	for n.Load() < target/2 {
		time.Sleep(100 * time.Microsecond)
	}
	if err := st.Apply(); err != nil { // bbolt holds part, whatever the timing
		t.Fatal(err)
	}
	for n.Load() < target {
		time.Sleep(100 * time.Microsecond)
	}
	if seed%2 == 0 {
		st.Apply()
	}
	m.Crash()
	close(stop)
	wg.Wait()
	st.Close() // fails: the log's files are gone with the power

	applied = appliedInFile(t, db)
	l, err := wal.Open(filepath.Join(dir, WALDir), wal.Options{FS: m.Process(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("log after the power loss: %v", err)
	}
	logLast = l.Last()
	l.Close()

	st, err = Open(db, Options{FS: m.Process(), NoSync: noSync, Kinds: testKinds})
	if err != nil {
		t.Logf("reopen after the power loss: %v", err)
		for k := range acked {
			lost = append(lost, k)
		}
		return applied, logLast, lost
	}
	defer st.Close()
	got := contents(t, space(t, st, "alpha", kindA), "a")
	for k, v := range acked {
		if got[k] != v {
			lost = append(lost, k)
		}
	}
	return applied, logLast, lost
}

// "bbolt's applied position never runs ahead of what the log has made
// durable": after a power loss at varying points of a run (writers
// waiting for durability, the applier running every millisecond, the log
// rolling 4 KiB segments and truncating behind the applier), the applied
// position bbolt holds is at most the last Pos of the recovered log, and
// every record acknowledged durable (Submit's channel got nil) is there
// after the reopen.
func TestAppliedNeverAheadOfDurableLog(t *testing.T) {
	for seed := range 8 {
		applied, last, lost := crashOnce(t, false, seed)
		if applied > last {
			t.Errorf("run %d: bbolt applied up to %d, the recovered log ends at %d", seed, applied, last)
		}
		if len(lost) > 0 {
			t.Errorf("run %d: %d acknowledged records lost, e.g. %v", seed, len(lost), lost[:min(5, len(lost))])
		}
		if applied == 0 {
			t.Errorf("run %d: the applier never ran: the test checks nothing", seed)
		}
	}
}

// The same run with NoSync: the log syncs nothing, so the power loss
// takes it back to empty while bbolt (on the real disk, not crashed here)
// holds what the applier wrote: the check above must see applied > last.
// This is the proof that TestAppliedNeverAheadOfDurableLog can fail.
func TestAppliedAheadOfLogWithNoSync(t *testing.T) {
	applied, last, _ := crashOnce(t, true, 0)
	if applied <= last {
		t.Fatalf("NoSync: bbolt applied %d, the recovered log ends at %d: the power loss should have cost the log records bbolt has", applied, last)
	}
}

// With NoSync, a power loss can take the log back to empty while bbolt
// keeps its applied position: the log then hands out positions from 1
// again, below it. The store must go on from the log's end, or the next
// replay skips the records appended from then on as "applied already":
// here a process kill (no power loss: the page cache keeps the log) before
// the applier ran loses every record acknowledged since.
func TestLogBehindAppliedAfterNoSyncCrash(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	m := waltest.NewMachine()
	st := openStore(t, db, Options{FS: m.Process(), NoSync: true})
	sp := space(t, st, "alpha", kindA)
	for i := range 20 {
		submitWait(t, sp, fmt.Sprintf("old%02d", i), "v")
	}
	if err := st.Apply(); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	st.Close()
	if p := appliedInFile(t, db); p != 20 {
		t.Fatalf("applied %d, want 20", p)
	}

	logs := &logtest.Buffer{}
	opts := Options{FS: m.Process(), NoSync: true, ApplyInterval: time.Hour, Log: zerolog.New(logs), Kinds: testKinds}
	st, err := Open(db, opts)
	if err != nil {
		t.Fatalf("reopen after a NoSync power loss: %v", err)
	}
	if !strings.Contains(logs.String(), "the log ends before the store's applied position") {
		t.Errorf("no warning that the log lost records:\n%s", logs)
	}
	sp = space(t, st, "alpha", kindA)
	for i := range 5 {
		submitWait(t, sp, fmt.Sprintf("new%02d", i), "acked")
	}
	copyFile(t, db, db+".before")
	if err := st.Close(); err != nil { // a kill: the log's writes stay
		t.Fatal(err)
	}
	copyFile(t, db+".before", db) // the applier never ran

	st = openStore(t, db, Options{FS: m.Process(), NoSync: true})
	defer st.Close()
	got := contents(t, space(t, st, "alpha", kindA), "a")
	for i := range 5 {
		if k := fmt.Sprintf("new%02d", i); got[k] != "acked" {
			t.Errorf("acknowledged record %s not replayed", k)
		}
	}
	for i := range 20 {
		if k := fmt.Sprintf("old%02d", i); got[k] != "v" {
			t.Errorf("record %s that bbolt held is gone", k)
		}
	}
}

// With fsync on, a log that ends before the position bbolt was applied
// to has lost records it had made durable (segments removed or damaged):
// records after the applied position may be gone too, so Open refuses,
// naming the file and both positions, rather than start on it.
func TestLogBehindAppliedRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st := openStore(t, db, Options{})
	sp := space(t, st, "alpha", kindA)
	for i := range 10 {
		submitWait(t, sp, fmt.Sprintf("k%d", i), "v")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, WALDir, "*.wal"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	for _, s := range segs {
		os.Remove(s)
	}
	_, err := Open(db, Options{Kinds: testKinds})
	if err == nil {
		t.Fatal("opened a store applied up to 10 with an empty log")
	}
	for _, want := range []string{db, "10", filepath.Join(dir, WALDir)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// A record of a kind no codec is registered for refuses the open with an
// error naming the file, the record and the kind; nothing is applied.
func TestUnknownKindRefusesOpen(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st := openStore(t, db, Options{ApplyInterval: time.Hour})
	submitWait(t, space(t, st, "alpha", kindA), "a", "1")
	pos := submitWait(t, space(t, st, "beta", kindB), "b", "2")
	copyFile(t, db, db+".before")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, db+".before", db) // both records in the log only

	_, err := Open(db, Options{Kinds: map[Kind]ApplyFunc{kindA: kvCodec("a")}})
	if err == nil {
		t.Fatal("a log with a record of an unknown kind opened")
	}
	for _, want := range []string{db, fmt.Sprintf("record %d", pos), fmt.Sprintf("unknown kind %d", kindB)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if p := appliedInFile(t, db); p != 0 {
		t.Errorf("a refused open applied up to %d", p)
	}
	// With the codec, it opens and has both.
	st = openStore(t, db, Options{})
	defer st.Close()
	if got := contents(t, space(t, st, "beta", kindB), "b"); got["b"] != "2" {
		t.Errorf("beta after replay: %v", got)
	}
	if _, err := st.Space("gamma", 99, SpaceOptions{}); err == nil || !strings.Contains(err.Error(), "no codec for kind 99") {
		t.Errorf("a space of an unknown kind: %v", err)
	}
}

// A second Open of a data dir in use fails with "data dir DIR is in use by
// pid N", N this process; the first store is unharmed, and once it is
// closed the dir opens again.
func TestSecondOpenLocked(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st := openStore(t, db, Options{})
	sp := space(t, st, "alpha", kindA)
	submitWait(t, sp, "k", "v")
	if b, err := os.ReadFile(filepath.Join(dir, LockFile)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("LOCK holds %q (%v), want this pid %d", b, err, os.Getpid())
	}

	start := time.Now()
	_, err := Open(db, Options{Kinds: testKinds})
	want := fmt.Sprintf("data dir %s is in use by pid %d", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second open: %v, want %q", err, want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %v: it should not wait for bbolt's lock timeout", d)
	}
	// Another file in the same dir is the same data dir.
	if _, err := Open(filepath.Join(dir, "other.db"), Options{Kinds: testKinds}); err == nil || err.Error() != want {
		t.Errorf("open of another file in the dir: %v, want %q", err, want)
	}
	submitWait(t, sp, "k2", "v2") // the first store still works
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, db, Options{})
	defer st.Close()
	wantContents(t, "after reopen", contents(t, space(t, st, "alpha", kindA), "a"), map[string]string{"k": "v", "k2": "v2"})
}

// Discard moves the bbolt file and the log aside (renamed, not deleted)
// and says what it moved; the next Open starts empty; a second Discard in
// the same second keeps the first one's copies; a store in use is not
// discarded from under its process.
func TestDiscard(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st := openStore(t, db, Options{})
	submitWait(t, space(t, st, "alpha", kindA), "k", "v")

	if moved, err := Discard(db); err == nil {
		t.Errorf("Discard of a store in use moved %v", moved)
	} else if want := fmt.Sprintf("data dir %s is in use by pid %d", dir, os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("Discard of a store in use: %v, want %q", err, want)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("the store in use is gone: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	dbSize := size(db)

	moved, err := Discard(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 2 {
		t.Fatalf("moved %v, want the file and the log", moved)
	}
	var asideDB, asideWAL string
	for _, m := range moved {
		from, to, ok := strings.Cut(m, " -> ")
		if !ok || !strings.HasPrefix(to, from+".discarded-") {
			t.Errorf("moved %q: want FROM -> FROM.discarded-TIME", m)
		}
		switch from {
		case db:
			asideDB = to
		case filepath.Join(dir, WALDir):
			asideWAL = to
		default:
			t.Errorf("moved %s", from)
		}
	}
	if size(asideDB) != dbSize {
		t.Errorf("%s: %d bytes, want %d", asideDB, size(asideDB), dbSize)
	}
	if segs, _ := filepath.Glob(filepath.Join(asideWAL, "*.wal")); len(segs) == 0 {
		t.Errorf("%s holds no segment", asideWAL)
	}
	for _, p := range []string{db, filepath.Join(dir, WALDir)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there after Discard: %v", p, err)
		}
	}

	st = openStore(t, db, Options{})
	sp := space(t, st, "alpha", kindA)
	if got := contents(t, sp, "a"); len(got) != 0 {
		t.Errorf("the store after Discard is not empty: %v", got)
	}
	submitWait(t, sp, "second", "life")
	st.Close()
	moved2, err := Discard(db) // most likely within the same second
	if err != nil {
		t.Fatal(err)
	}
	if len(moved2) != 2 {
		t.Fatalf("second discard moved %v", moved2)
	}
	if size(asideDB) != dbSize {
		t.Errorf("the first discarded file %s was overwritten by the second Discard", asideDB)
	}
	if segs, _ := filepath.Glob(filepath.Join(asideWAL, "*.wal")); len(segs) == 0 {
		t.Errorf("the first discarded log %s was lost", asideWAL)
	}
	// Nothing to discard: nothing moved, no error.
	if moved, err := Discard(filepath.Join(t.TempDir(), "none.db")); err != nil || len(moved) != 0 {
		t.Errorf("Discard of nothing: %v, %v", moved, err)
	}
}

// A bbolt file cut short (a truncated copy) refuses the open with an
// error naming the file and both sizes, instead of bbolt panicking in a
// goroutine of its own while it rebuilds the freelist (which kills the
// process with a stack trace: no recover reaches it). A file cut only
// where bbolt had preallocated, past its last page, loses nothing and
// opens.
func TestTruncatedFileRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st := openStore(t, db, Options{})
	sp := space(t, st, "alpha", kindA)
	for i := range 2000 {
		sp.Append([]byte(fmt.Sprintf("k%05d=%s", i, strings.Repeat("v", 200))))
	}
	submitWait(t, sp, "last", "v")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := bbolt.Open(db, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var pages int64 // where the last page ends
	bdb.View(func(tx *bbolt.Tx) error { pages = tx.Size(); return nil })
	bdb.Close()
	if pages < 100_000 || pages > int64(len(orig)) {
		t.Fatalf("pages end at %d in a file of %d bytes", pages, len(orig))
	}
	for _, size := range []int64{pages / 2, pages - 4096} {
		if err := os.WriteFile(db, orig[:size], 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(db, Options{Kinds: testKinds})
		if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "truncated") ||
			!strings.Contains(err.Error(), fmt.Sprintf("the file is %d bytes, but its pages reach %d bytes", size, pages)) {
			t.Errorf("open of %s cut to %d bytes (pages end at %d): %v", db, size, pages, err)
		}
	}
	if err := os.WriteFile(db, orig[:pages], 0o600); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, db, Options{})
	defer st.Close()
	if got := contents(t, space(t, st, "alpha", kindA), "a"); len(got) != 2001 {
		t.Errorf("cut after its last page: %d keys, want 2001", len(got))
	}
}

// A page of the bbolt file zeroed (or overwritten) refuses the open with
// an error naming the file, instead of a panic in bbolt's freelist walk.
func TestDamagedPageRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st := openStore(t, db, Options{})
	sp := space(t, st, "alpha", kindA)
	for i := range 2000 {
		sp.Append([]byte(fmt.Sprintf("k%05d=%s", i, strings.Repeat("v", 200))))
	}
	submitWait(t, sp, "last", "v")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// The pages a tree walk reaches: zero each in turn (every 7th, to
	// keep it short), and garble the header of a few.
	bdb, err := bbolt.Open(db, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var pages int
	bdb.View(func(tx *bbolt.Tx) error { pages = int(tx.Size() / 4096); return nil })
	bdb.Close()
	refused := 0
	for pg := 2; pg < pages; pg += 7 {
		for _, garble := range []bool{false, true} {
			b := append([]byte(nil), orig...)
			page := b[pg*4096 : (pg+1)*4096]
			if garble {
				for i := 0; i < 16; i++ {
					page[i] ^= 0xa5
				}
			} else {
				clear(page)
			}
			if err := os.WriteFile(db, b, 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := Open(db, Options{Kinds: testKinds})
			if err != nil {
				if !strings.Contains(err.Error(), db) {
					t.Errorf("page %d: %v: does not name the file", pg, err)
				}
				refused++
				continue
			}
			st.Close() // a free page: nothing lost
		}
	}
	if refused == 0 {
		t.Fatal("no damaged page was refused")
	}
	t.Logf("%d of %d damaged pages refused (the others were free)", refused, 2*((pages-2+6)/7))
}

// goroutineID parses this goroutine's id from its stack header.
func goroutineID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}

// Submit's durable callback never runs on the caller's goroutine: a caller
// that holds a mutex the callback takes (a leader's partition lock) does
// not deadlock, however fast the record becomes durable. Other goroutines
// keep the log committing so that many records are durable before their
// Submit returns.
func TestSubmitCallbackNeverOnCallersGoroutine(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) {
			// The log in memory (CrashFS): syncs take no time, so records
			// are often durable before Submit returns.
			st := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{NoSync: noSync, FS: waltest.NewCrashFS()})
			defer st.Close()
			sp := space(t, st, "alpha", kindA)
			noise := space(t, st, "beta", kindB)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						noise.Append([]byte(fmt.Sprintf("n%d=x", i%100)))
					}
				}()
			}
			defer func() { close(stop); wg.Wait() }()

			const iterations = 3000
			var onCaller atomic.Int64
			done := make(chan error, 1)
			go func() {
				var mu sync.Mutex
				me := goroutineID()
				for i := range iterations {
					var ch <-chan error
					mu.Lock()
					_, ch = sp.Submit([]byte(fmt.Sprintf("k%d=v", i)), func() {
						if goroutineID() == me {
							onCaller.Add(1)
						}
						mu.Lock() // deadlocks if run inside Submit
						mu.Unlock()
					})
					mu.Unlock()
					if err := <-ch; err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				buf := make([]byte, 1<<20)
				t.Fatalf("deadlock: %d submits not done in 30 s\n%s", iterations, buf[:runtime.Stack(buf, true)])
			}
			if n := onCaller.Load(); n > 0 {
				t.Fatalf("the durable callback ran on the caller's goroutine %d times", n)
			}
		})
	}
}

// An apply that fails (a codec error) stops every later write of the
// store (fail-stop), and Err says so.
func TestApplyFailureStopsWrites(t *testing.T) {
	kinds := map[Kind]ApplyFunc{kindA: kvCodec("a")}
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{Kinds: kinds, ApplyInterval: time.Hour})
	defer st.Close()
	sp := space(t, st, "alpha", kindA)
	submitWait(t, sp, "k", "v")
	pos, ch := sp.Submit([]byte("no equals sign"), nil)
	if err := <-ch; err != nil {
		t.Fatalf("the log refused a record it does not interpret: %v", err)
	}
	if err := st.Apply(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("record %d", pos)) {
		t.Fatalf("Apply of a bad record: %v", err)
	}
	if _, err := sp.Append([]byte("k2=v")); err == nil {
		t.Fatal("append after a failed apply succeeded")
	}
	if st.Err() == nil {
		t.Fatal("Err is nil after a failed apply")
	}
}

// TestSpaceOnCommit: a space's OnCommit counts the group commits that
// carried its records, not the ones that carried only another space's.
func TestSpaceOnCommit(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	defer st.Close()
	var commits atomic.Int64
	a, err := st.Space("alpha", kindA, SpaceOptions{OnCommit: func(wal.SyncStats) { commits.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	b := space(t, st, "beta", kindB)
	for i := range 5 {
		submitWait(t, b, fmt.Sprintf("k%d", i), "b")
	}
	if n := commits.Load(); n != 0 {
		t.Fatalf("%d commits counted for alpha, which wrote nothing", n)
	}
	for i := range 3 {
		submitWait(t, a, fmt.Sprintf("k%d", i), "a")
	}
	// OnSync runs after the waiters are told: the last may come later.
	for deadline := time.Now().Add(5 * time.Second); commits.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := commits.Load(); n != 3 {
		t.Fatalf("%d commits counted for alpha, want 3 (each record waited for alone)", n)
	}
}
