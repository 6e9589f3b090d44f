package waltest

import (
	"os"
	"sync"
	"syscall"

	"github.com/txncoord/txncoord/wal"
)

// FaultFS wraps an FS and fails one chosen call, counted since the last
// Reset: the n-th Write, after writing its first at bytes (a short write,
// ENOSPC), the n-th file Sync (EIO, nothing synced) or the n-th SyncDir
// (EIO). Each fault fires once. Errors are *os.PathError, as from the OS.
// It also records every Write's size and counts Syncs, so a test can do a
// clean run first and then fail at every write, byte and sync of it.
type FaultFS struct {
	wal.FS

	mu                                   sync.Mutex
	writeSizes                           []int
	syncs, dirSyncs                      int
	failWrite, failAt, failSync, failDir int
}

// NewFaultFS wraps fs; nothing fails until armed.
func NewFaultFS(fs wal.FS) *FaultFS { return &FaultFS{FS: fs} }

// Reset zeroes the counts and disarms every fault.
func (f *FaultFS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeSizes, f.syncs, f.dirSyncs = nil, 0, 0
	f.failWrite, f.failAt, f.failSync, f.failDir = 0, 0, 0, 0
}

// FailWrite makes the n-th Write (1 is the first since Reset) write its
// first at bytes, then fail with ENOSPC.
func (f *FaultFS) FailWrite(n, at int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWrite, f.failAt = n, at
}

// FailSync makes the n-th file Sync fail with EIO, syncing nothing.
func (f *FaultFS) FailSync(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failSync = n
}

// FailSyncDir makes the n-th SyncDir fail with EIO, syncing nothing.
func (f *FaultFS) FailSyncDir(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failDir = n
}

// Writes returns the sizes of the Writes since Reset (a failed one counts
// the bytes it wrote).
func (f *FaultFS) Writes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.writeSizes...)
}

// Syncs returns the number of file Syncs since Reset, failed ones included.
func (f *FaultFS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// SyncDirs returns the number of SyncDirs since Reset, failed ones included.
func (f *FaultFS) SyncDirs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dirSyncs
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

func (f *FaultFS) SyncDir(dir string) error {
	f.mu.Lock()
	f.dirSyncs++
	fail := f.dirSyncs == f.failDir
	f.mu.Unlock()
	if fail {
		return pathErr("fsync", dir, syscall.EIO)
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	wal.File
	fs   *FaultFS
	name string
}

func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if len(f.fs.writeSizes)+1 != f.fs.failWrite {
		n, err := f.File.Write(p)
		f.fs.writeSizes = append(f.fs.writeSizes, n)
		return n, err
	}
	n, err := f.File.Write(p[:min(f.fs.failAt, len(p))])
	f.fs.writeSizes = append(f.fs.writeSizes, n)
	if err == nil {
		err = pathErr("write", f.name, syscall.ENOSPC)
	}
	return n, err
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncs++
	fail := f.fs.syncs == f.fs.failSync
	f.fs.mu.Unlock()
	if fail {
		return pathErr("fdatasync", f.name, syscall.EIO)
	}
	return f.File.Sync()
}
