package waltest

import (
	"os"
	"sync"
	"syscall"

	"github.com/txncoord/txncoord/wal"
)

// Machine is a CrashFS whose power loss also ends the processes running on
// it: every FS handle given out by Process fails (EIO) from the Crash on.
// CrashFS alone fails only the files opened before Crash, so a process
// still running after it (a log's writer, a store's applier) could remove
// segments or sync the directory of the post-crash state, which no dead
// process can do. A test restarts on a new Process.
type Machine struct {
	fs    *CrashFS
	mu    sync.RWMutex // held for writing by Crash, for reading by every call
	procs []*procFS
}

// NewMachine returns a machine with an empty CrashFS.
func NewMachine() *Machine { return &Machine{fs: NewCrashFS()} }

// Process returns the FS handle of a new process on the machine.
func (m *Machine) Process() wal.FS {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &procFS{m: m}
	m.procs = append(m.procs, p)
	return p
}

// Crash is a power loss: unsynced bytes are gone (CrashFS.Crash) and every
// process handed out so far is dead.
func (m *Machine) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		p.dead = true
	}
	m.fs.Crash()
}

type procFS struct {
	m    *Machine
	dead bool // under m.mu
}

// do runs f unless the process is dead, with Crash held off meanwhile.
func (p *procFS) do(op, name string, f func() error) error {
	p.m.mu.RLock()
	defer p.m.mu.RUnlock()
	if p.dead {
		return &os.PathError{Op: op, Path: name, Err: syscall.EIO}
	}
	return f()
}

func (p *procFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	var f wal.File
	err := p.do("open", name, func() (err error) { f, err = p.m.fs.OpenFile(name, flag, perm); return err })
	if err != nil {
		return nil, err
	}
	return &procFile{File: f, p: p, name: name}, nil
}

func (p *procFS) Remove(name string) error {
	return p.do("remove", name, func() error { return p.m.fs.Remove(name) })
}

func (p *procFS) Rename(oldpath, newpath string) error {
	return p.do("rename", oldpath, func() error { return p.m.fs.Rename(oldpath, newpath) })
}

func (p *procFS) ReadDir(dir string) (names []string, err error) {
	err = p.do("open", dir, func() (err error) { names, err = p.m.fs.ReadDir(dir); return err })
	return names, err
}

func (p *procFS) MkdirAll(dir string, perm os.FileMode) error {
	return p.do("mkdir", dir, func() error { return p.m.fs.MkdirAll(dir, perm) })
}

func (p *procFS) Free(dir string) (free int64, err error) {
	err = p.do("statfs", dir, func() (err error) { free, err = p.m.fs.Free(dir); return err })
	return free, err
}

func (p *procFS) SyncDir(dir string) error {
	return p.do("fsync", dir, func() error { return p.m.fs.SyncDir(dir) })
}

type procFile struct {
	wal.File
	p    *procFS
	name string
}

func (f *procFile) Read(b []byte) (n int, err error) {
	err = f.p.do("read", f.name, func() (err error) { n, err = f.File.Read(b); return err })
	return n, err
}

func (f *procFile) Write(b []byte) (n int, err error) {
	err = f.p.do("write", f.name, func() (err error) { n, err = f.File.Write(b); return err })
	return n, err
}

func (f *procFile) Sync() error { return f.p.do("fdatasync", f.name, f.File.Sync) }

func (f *procFile) Truncate(size int64) error {
	return f.p.do("truncate", f.name, func() error { return f.File.Truncate(size) })
}

func (f *procFile) Close() error { return f.p.do("close", f.name, f.File.Close) }
