package waltest

import (
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/txncoord/txncoord/wal"
)

// CrashFS is an in-memory wal.FS that remembers what a power loss would
// keep: per file, the bytes as of its last completed Sync; per directory,
// the entries as of its last SyncDir. Crash turns it into that state: every
// byte written since the file's last Sync is gone, a file created since its
// directory's last SyncDir is gone, a file removed since then is back.
// Directories themselves (MkdirAll) are durable at once.
type CrashFS struct {
	mu   sync.Mutex
	gen  int // bumped by Crash: files opened before it fail
	dirs map[string]*dirState
}

type dirState struct {
	live, durable map[string]*inode
}

type inode struct {
	data   []byte
	synced []byte // what a power loss keeps; never shares data's array
	// dirty is the lowest offset changed since the last Sync: a Sync
	// copies only from there on.
	dirty int
}

// NewCrashFS returns an empty CrashFS.
func NewCrashFS() *CrashFS { return &CrashFS{dirs: map[string]*dirState{}} }

var _ wal.FS = (*CrashFS)(nil)

// Crash is a power loss: the FS keeps only what was synced. Files open
// before it fail every later call with EIO, as the process they belonged
// to is gone.
func (c *CrashFS) Crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, d := range c.dirs {
		d.live = maps.Clone(d.durable)
		for _, ino := range d.live {
			ino.data = slices.Clone(ino.synced)
			ino.dirty = len(ino.data)
		}
	}
}

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// dirOf returns name's directory and base name; the caller holds c.mu.
func (c *CrashFS) dirOf(op, name string) (*dirState, string, error) {
	name = filepath.Clean(name)
	d := c.dirs[filepath.Dir(name)]
	if d == nil {
		return nil, "", pathErr(op, name, syscall.ENOENT)
	}
	return d, filepath.Base(name), nil
}

func (c *CrashFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, base, err := c.dirOf("open", name)
	if err != nil {
		return nil, err
	}
	ino := d.live[base]
	switch {
	case ino != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, syscall.EEXIST)
	case ino == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, syscall.ENOENT)
	case ino == nil:
		ino = &inode{}
		d.live[base] = ino
	}
	f := &crashFile{fs: c, ino: ino, name: name, gen: c.gen, flag: flag}
	if flag&os.O_TRUNC != 0 {
		f.truncateLocked(0)
	}
	return f, nil
}

func (c *CrashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, base, err := c.dirOf("remove", name)
	if err != nil {
		return err
	}
	if d.live[base] == nil {
		return pathErr("remove", name, syscall.ENOENT)
	}
	delete(d.live, base)
	return nil
}

// Rename moves oldpath's inode to newpath in the live directories; like
// a creation or removal, it survives Crash only once the directories are
// synced.
func (c *CrashFS) Rename(oldpath, newpath string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	from, oldBase, err := c.dirOf("rename", oldpath)
	if err != nil {
		return err
	}
	to, newBase, err := c.dirOf("rename", newpath)
	if err != nil {
		return err
	}
	ino := from.live[oldBase]
	if ino == nil {
		return pathErr("rename", oldpath, syscall.ENOENT)
	}
	delete(from.live, oldBase)
	to.live[newBase] = ino
	return nil
}

func (c *CrashFS) ReadDir(dir string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[filepath.Clean(dir)]
	if d == nil {
		return nil, pathErr("open", dir, syscall.ENOENT)
	}
	var names []string
	for name := range d.live {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

func (c *CrashFS) MkdirAll(dir string, perm os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir = filepath.Clean(dir)
	if c.dirs[dir] == nil {
		c.dirs[dir] = &dirState{live: map[string]*inode{}, durable: map[string]*inode{}}
	}
	return nil
}

// Free is unlimited: a CrashFS never runs out of space.
func (c *CrashFS) Free(string) (int64, error) { return math.MaxInt64, nil }

func (c *CrashFS) SyncDir(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[filepath.Clean(dir)]
	if d == nil {
		return pathErr("fsync", dir, syscall.ENOENT)
	}
	d.durable = maps.Clone(d.live)
	return nil
}

// crashFile is an open file of a CrashFS.
type crashFile struct {
	fs     *CrashFS
	ino    *inode
	name   string
	gen    int
	flag   int
	off    int64
	closed bool
}

// check says why f cannot be used; the caller holds fs.mu.
func (f *crashFile) check(op string) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case f.gen != f.fs.gen:
		return pathErr(op, f.name, syscall.EIO)
	}
	return nil
}

func (f *crashFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == os.O_WRONLY {
		return 0, pathErr("read", f.name, syscall.EBADF)
	}
	if f.off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[f.off:])
	f.off += int64(n)
	return n, nil
}

func (f *crashFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	ino := f.ino
	if f.flag&os.O_APPEND != 0 {
		f.off = int64(len(ino.data))
	}
	if end := int(f.off) + len(p); end > len(ino.data) {
		ino.data = append(ino.data, make([]byte, end-len(ino.data))...)
	}
	copy(ino.data[f.off:], p)
	ino.dirty = min(ino.dirty, int(f.off))
	f.off += int64(len(p))
	return len(p), nil
}

// Sync makes the file's bytes survive Crash; not its directory entry.
func (f *crashFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("fdatasync"); err != nil {
		return err
	}
	ino := f.ino
	keep := min(ino.dirty, len(ino.synced))
	ino.synced = append(ino.synced[:keep], ino.data[keep:]...)
	ino.dirty = len(ino.data)
	return nil
}

func (f *crashFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	f.truncateLocked(int(size))
	return nil
}

func (f *crashFile) truncateLocked(size int) {
	ino := f.ino
	ino.dirty = min(ino.dirty, size, len(ino.data))
	if size <= len(ino.data) {
		ino.data = ino.data[:size]
	} else {
		ino.data = append(ino.data, make([]byte, size-len(ino.data))...)
	}
}

func (f *crashFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}
