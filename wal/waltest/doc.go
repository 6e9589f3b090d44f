// Package waltest has file layers for testing code that writes through a
// wal.FS: CrashFS, an in-memory file system that can lose power the way
// LazyFS does for Jepsen, and FaultFS, which fails a chosen write (after
// a chosen number of its bytes), fdatasync or directory sync.
//
// Neither is used outside tests. They model the worst outcome the POSIX
// contract allows, not a particular file system: ext4 often keeps more.
package waltest
