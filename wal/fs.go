package wal

import (
	"io"
	"os"
)

// FS is the file layer under the log: the real OS (OSFS) in production, a
// power-loss or fault-injecting layer in tests (package waltest). It is
// only what the log needs.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	ReadDir(dir string) ([]string, error) // names, sorted
	MkdirAll(dir string, perm os.FileMode) error
	// Rename moves a file, replacing newpath: durable once the
	// directory is synced.
	Rename(oldpath, newpath string) error
	// SyncDir makes the directory's entries (files created or removed in
	// it) durable: a new segment is not durable until its directory is.
	SyncDir(dir string) error
	// Free is how many bytes the log may still write on dir's file
	// system (what an unprivileged writer may use); an FS that cannot
	// tell answers math.MaxInt64.
	Free(dir string) (int64, error)
}

// File is an open file of an FS.
type File interface {
	io.ReadWriteCloser
	// Sync is fdatasync: the data written and the size, not the
	// timestamps. Once it returned nil, a power loss keeps the bytes.
	Sync() error
	Truncate(size int64) error
}

// OSFS is the real file system.
type OSFS struct{}

type osFile struct{ *os.File }

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Remove(name string) error { return os.Remove(name) }

func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (OSFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync() // fsync: a directory has no data to skip
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f osFile) Sync() error {
	if err := fdatasync(f.File); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
