package wal

import (
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes the file's data and size but not its timestamps: one
// journal write less than fsync on most file systems.
func fdatasync(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var syncErr error
	if err := raw.Control(func(fd uintptr) {
		for {
			syncErr = unix.Fdatasync(int(fd))
			if syncErr != unix.EINTR { // a signal, not a failed sync: os.File.Sync retries it too
				return
			}
		}
	}); err != nil {
		return err
	}
	return syncErr
}

// Free is statfs's blocks available to an unprivileged writer.
func (OSFS) Free(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(min(st.Bavail*uint64(st.Bsize), math.MaxInt64)), nil
}
