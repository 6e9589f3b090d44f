package main

// These tests back the requirements table of README.md with behaviour rather
// than a reading of the source alone: what each candidate does at open with a
// torn tail, and what raft-wal's file-layer seam (types.VFS) lets a test do
// (fail a Sync, run out of space at a byte offset, lose unsynced bytes).
// They run in a second or two: go test .

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	rwfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	tidwal "github.com/tidwall/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

func record(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 4096) }

// tidwall/wal has no checksum: a cut record fails Open, and zeros past the
// end (what a crash during a file extension leaves) decode as empty entries.
func TestTidwallTornTail(t *testing.T) {
	dir := t.TempDir()
	l, err := tidwal.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if err := l.Write(uint64(i), record(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "00000000000000000001")
	good, _ := os.ReadFile(seg)

	// A record cut in the middle: Open refuses the log, it does not cut it.
	os.WriteFile(seg, good[:len(good)-100], 0o640)
	if _, err := tidwal.Open(dir, nil); !errors.Is(err, tidwal.ErrCorrupt) {
		t.Fatalf("cut record: Open = %v, want ErrCorrupt", err)
	}

	// 16 zero bytes after the last record: 16 phantom empty entries.
	os.WriteFile(seg, append(good, make([]byte, 16)...), 0o640)
	l, err = tidwal.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := l.LastIndex()
	data, _ := l.Read(last)
	t.Logf("tidwall/wal: 3 records + 16 zero bytes opens with LastIndex=%d (entry %d has %d bytes)", last, last, len(data))
	if last != 19 {
		t.Fatalf("LastIndex = %d, want 19 (3 real + 16 phantom)", last)
	}
	l.Close()
}

// raft-wal checks the CRC of the last commit batch at open and rewinds to
// the previous commit frame when it does not match.
func TestRaftWALTornTail(t *testing.T) {
	dir := t.TempDir()
	w := openRaftWALIn(t, dir, nil)
	for i := 1; i <= 3; i++ {
		if err := w.StoreLogs([]*raft.Log{{Index: uint64(i), Term: 1, Data: record(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	b, _ := os.ReadFile(segs[0])
	// Garble bytes in the middle of the third record's payload (record(3) is
	// 4096 'd's).
	at := bytes.LastIndexByte(b, 'd') - 2000
	copy(b[at:], bytes.Repeat([]byte{'x'}, 512))
	os.WriteFile(segs[0], b, 0o644)

	w = openRaftWALIn(t, dir, nil)
	defer w.Close()
	last, _ := w.LastIndex()
	if last != 2 {
		t.Fatalf("LastIndex = %d, want 2 (third batch cut)", last)
	}
	if err := w.StoreLogs([]*raft.Log{{Index: 3, Term: 1, Data: record(9)}}); err != nil {
		t.Fatalf("append after cut: %v", err)
	}
}

// etcd's WAL opened for writing refuses a torn record (ReadAll fails with
// io.ErrUnexpectedEOF); wal.Repair must be called to truncate it, then Open
// and ReadAll again.
func TestEtcdTornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := etcdwal.Create(zap.NewNop(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &etcdWAL{w: w, next: 1}
	for i := 1; i <= 3; i++ {
		if err := a.appendBatch([][]byte{record(i)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	b, _ := os.ReadFile(segs[len(segs)-1])
	end := bytes.LastIndexByte(b, 'd')     // the end of record(3)
	copy(b[end-1500:], make([]byte, 1024)) // a zeroed sector inside the last record
	os.WriteFile(segs[len(segs)-1], b, 0o600)

	w, err = etcdwal.Open(zap.NewNop(), dir, &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, ents, err := w.ReadAll()
	w.Close()
	t.Logf("etcd/wal ReadAll on torn tail: %d entries, err=%v", len(ents), err)
	if err == nil {
		t.Fatal("ReadAll accepted a torn tail")
	}
	if !etcdwal.Repair(zap.NewNop(), dir) {
		t.Fatal("Repair failed")
	}
	w, err = etcdwal.Open(zap.NewNop(), dir, &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, ents, err = w.ReadAll(); err != nil || len(ents) != 2 {
		t.Fatalf("after Repair: %d entries, err=%v; want 2", len(ents), err)
	}
}

// faultFS wraps raft-wal's real VFS. It can fail Sync, return ENOSPC once a
// byte budget is spent, and simulate power loss by undoing every write that
// no Sync has covered (writes are undone from the pre-images it kept).
type faultFS struct {
	*rwfs.FS
	mu        sync.Mutex
	failSync  bool
	budget    int64 // bytes WriteAt may still write; <0 means unlimited
	unsynced  map[string][]undo
	liveFiles map[string]*faultFile
}

type undo struct {
	off  int64
	prev []byte
}

type faultFile struct {
	types.WritableFile
	fs   *faultFS
	path string
}

func newFaultFS() *faultFS {
	return &faultFS{FS: rwfs.New(), budget: -1, unsynced: map[string][]undo{}, liveFiles: map[string]*faultFile{}}
}

func (f *faultFS) wrap(dir, name string, wf types.WritableFile, err error) (types.WritableFile, error) {
	if err != nil {
		return nil, err
	}
	ff := &faultFile{WritableFile: wf, fs: f, path: filepath.Join(dir, name)}
	f.mu.Lock()
	f.liveFiles[ff.path] = ff
	f.mu.Unlock()
	return ff, nil
}

func (f *faultFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	wf, err := f.FS.Create(dir, name, size)
	return f.wrap(dir, name, wf, err)
}

func (f *faultFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	wf, err := f.FS.OpenWriter(dir, name)
	return f.wrap(dir, name, wf, err)
}

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	n := int64(len(p))
	var err error
	if f.budget >= 0 && n > f.budget {
		n, err = f.budget, syscall.ENOSPC
	}
	prev := make([]byte, n)
	m, _ := ff.WritableFile.ReadAt(prev, off)
	f.unsynced[ff.path] = append(f.unsynced[ff.path], undo{off, prev[:m]})
	w, werr := ff.WritableFile.WriteAt(p[:n], off)
	if f.budget >= 0 {
		f.budget -= int64(w)
	}
	if werr != nil {
		return w, werr
	}
	return w, err
}

func (ff *faultFile) Sync() error {
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSync {
		return syscall.EIO
	}
	if err := ff.WritableFile.Sync(); err != nil {
		return err
	}
	delete(f.unsynced, ff.path)
	return nil
}

// powerLoss undoes every unsynced write, newest first.
func (f *faultFS) powerLoss() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for path, us := range f.unsynced {
		file, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			continue
		}
		for i := len(us) - 1; i >= 0; i-- {
			file.WriteAt(us[i].prev, us[i].off)
		}
		file.Close()
	}
	f.unsynced = map[string][]undo{}
}

// rwal closes the bbolt meta store with the WAL: raft-wal's WAL.Close leaves
// its default meta store open, and reopening the directory in the same
// process then blocks for ever on bbolt's file lock.
type rwal struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func (w rwal) Close() error {
	err := w.WAL.Close()
	if cerr := w.meta.Close(); err == nil {
		err = cerr
	}
	return err
}

// openRaftWALIn opens the WAL in dir with its segment files going through
// vfs (raft-wal's own fs.FS when nil).
func openRaftWALIn(t *testing.T, dir string, vfs types.VFS) rwal {
	t.Helper()
	if vfs == nil {
		vfs = rwfs.New()
	}
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithLogger(hclog.NewNullLogger()), raftwal.WithMetaStore(meta),
		raftwal.WithSegmentFiler(segment.NewFiler(dir, vfs)))
	if err != nil {
		t.Fatal(err)
	}
	return rwal{w, meta}
}

func openFaultWAL(t *testing.T, dir string, fs *faultFS) rwal {
	return openRaftWALIn(t, dir, fs)
}

// After a failed Sync raft-wal has no sticky error: its writer already
// counted the entries, so the next StoreLogs fails with an unrelated
// "non-monotonic append" rather than the original error.
func TestRaftWALSyncErrorThroughVFS(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	w := openFaultWAL(t, dir, fs)
	defer w.Close()
	if err := w.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: record(1)}}); err != nil {
		t.Fatal(err)
	}
	fs.failSync = true
	err := w.StoreLogs([]*raft.Log{{Index: 2, Term: 1, Data: record(2)}})
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("StoreLogs with failing Sync = %v, want EIO", err)
	}
	fs.failSync = false
	err = w.StoreLogs([]*raft.Log{{Index: 2, Term: 1, Data: record(2)}})
	t.Logf("raft-wal: StoreLogs after a failed Sync: %v", err)
	if err == nil || !strings.Contains(err.Error(), "non-monotonic") {
		t.Fatalf("second StoreLogs = %v, want the non-monotonic wedge", err)
	}
}

// ENOSPC at an arbitrary byte offset through the VFS.
func TestRaftWALENOSPCThroughVFS(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	w := openFaultWAL(t, dir, fs)
	if err := w.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: record(1)}}); err != nil {
		t.Fatal(err)
	}
	fs.budget = 1234 // the next batch runs out of space 1234 bytes in
	err := w.StoreLogs([]*raft.Log{{Index: 2, Term: 1, Data: record(2)}})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("StoreLogs = %v, want ENOSPC", err)
	}
	w.Close()
	fs.budget = -1
	fs.powerLoss()
	w = openFaultWAL(t, dir, fs)
	defer w.Close()
	if last, _ := w.LastIndex(); last != 1 {
		t.Fatalf("LastIndex after ENOSPC + power loss = %d, want 1", last)
	}
}

// Power loss: everything acknowledged survives, the unsynced tail does not.
func TestRaftWALPowerLossThroughVFS(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	w := openFaultWAL(t, dir, fs)
	for i := 1; i <= 5; i++ {
		if err := w.StoreLogs([]*raft.Log{{Index: uint64(i), Term: 1, Data: record(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	fs.failSync = true // the 6th batch is written but never synced
	if err := w.StoreLogs([]*raft.Log{{Index: 6, Term: 1, Data: record(6)}}); err == nil {
		t.Fatal("want the sync error")
	}
	w.Close()
	fs.failSync = false
	fs.powerLoss()
	w = openFaultWAL(t, dir, fs)
	defer w.Close()
	last, _ := w.LastIndex()
	if last != 5 {
		t.Fatalf("LastIndex after power loss = %d, want 5", last)
	}
	var l raft.Log
	if err := w.GetLog(5, &l); err != nil || !bytes.Equal(l.Data, record(5)) {
		t.Fatalf("entry 5 after power loss: %v", err)
	}
}

// raft-wal verifies only the last commit batch at open (segment/writer.go
// recoverTail) and reads without a checksum: damage inside an earlier,
// acknowledged batch is neither detected at open nor at read.
func TestRaftWALEarlierBatchNotVerified(t *testing.T) {
	dir := t.TempDir()
	w := openRaftWALIn(t, dir, nil)
	for i := 1; i <= 3; i++ {
		if err := w.StoreLogs([]*raft.Log{{Index: uint64(i), Term: 1, Data: record(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	b, _ := os.ReadFile(segs[0])
	at := bytes.LastIndexByte(b, 'c') - 2000 // inside record(2), the second batch
	copy(b[at:], bytes.Repeat([]byte{'x'}, 512))
	os.WriteFile(segs[0], b, 0o644)

	w = openRaftWALIn(t, dir, nil)
	defer w.Close()
	last, _ := w.LastIndex()
	var l raft.Log
	err := w.GetLog(2, &l)
	t.Logf("raft-wal: damaged 2nd batch: LastIndex=%d, GetLog(2) err=%v, data intact=%v", last, err, bytes.Equal(l.Data, record(2)))
	if last != 3 || err != nil || bytes.Equal(l.Data, record(2)) {
		t.Fatalf("expected the damage to go unnoticed")
	}
}
