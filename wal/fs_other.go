//go:build !linux

package wal

import (
	"math"
	"os"
)

// fdatasync falls back to fsync where x/sys has no Fdatasync (macOS, for
// development only; macOS's fsync does not flush the drive's cache).
func fdatasync(f *os.File) error { return f.Sync() }

// Free cannot tell here (development only): as much as asked.
func (OSFS) Free(string) (int64, error) { return math.MaxInt64, nil }
