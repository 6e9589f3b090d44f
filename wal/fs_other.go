//go:build !linux

package wal

import "os"

// fdatasync falls back to fsync where x/sys has no Fdatasync (macOS, for
// development only; macOS's fsync does not flush the drive's cache).
func fdatasync(f *os.File) error { return f.Sync() }
