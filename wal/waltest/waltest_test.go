package waltest_test

import (
	"errors"
	"io"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

func mustOpen(t *testing.T, fs wal.FS, name string, flag int) wal.File {
	t.Helper()
	f, err := fs.OpenFile(name, flag, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func write(t *testing.T, f wal.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, fs wal.FS, name string) (string, bool) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

const rw = os.O_RDWR | os.O_CREATE

func TestCrashFSKeepsWhatWasSynced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		do       func(t *testing.T, fs *waltest.CrashFS)
		want     string
		wantFile bool
	}{
		{"unsynced file and entry vanish", func(t *testing.T, fs *waltest.CrashFS) {
			write(t, mustOpen(t, fs, "/d/f", rw), "abc")
		}, "", false},
		{"synced data without a synced entry vanishes", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw)
			write(t, f, "abc")
			f.Sync()
		}, "", false},
		{"synced entry, unsynced data: empty", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw)
			fs.SyncDir("/d")
			write(t, f, "abc")
		}, "", true},
		{"synced prefix kept, unsynced tail lost", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw|os.O_APPEND)
			fs.SyncDir("/d")
			write(t, f, "abc")
			f.Sync()
			write(t, f, "def")
		}, "abc", true},
		{"overwrite after sync is undone", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw)
			fs.SyncDir("/d")
			write(t, f, "abcdef")
			f.Sync()
			g := mustOpen(t, fs, "/d/f", os.O_RDWR)
			write(t, g, "XY")
		}, "abcdef", true},
		{"unsynced truncate is undone", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw)
			fs.SyncDir("/d")
			write(t, f, "abcdef")
			f.Sync()
			f.Truncate(2)
		}, "abcdef", true},
		{"truncate then write, synced", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw|os.O_APPEND)
			fs.SyncDir("/d")
			write(t, f, "abcdef")
			f.Sync()
			f.Truncate(2)
			write(t, f, "Z")
			f.Sync()
			write(t, f, "lost")
		}, "abZ", true},
		{"unsynced remove is undone", func(t *testing.T, fs *waltest.CrashFS) {
			f := mustOpen(t, fs, "/d/f", rw)
			write(t, f, "abc")
			f.Sync()
			fs.SyncDir("/d")
			fs.Remove("/d/f")
		}, "abc", true},
		{"synced remove stays", func(t *testing.T, fs *waltest.CrashFS) {
			mustOpen(t, fs, "/d/f", rw)
			fs.SyncDir("/d")
			fs.Remove("/d/f")
			fs.SyncDir("/d")
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := waltest.NewCrashFS()
			fs.MkdirAll("/d", 0o700)
			tc.do(t, fs)
			fs.Crash()
			got, ok := content(t, fs, "/d/f")
			if ok != tc.wantFile || got != tc.want {
				t.Fatalf("after Crash: file %v content %q, want %v %q", ok, got, tc.wantFile, tc.want)
			}
		})
	}
}

func TestCrashFSOldFilesFailAfterCrash(t *testing.T) {
	fs := waltest.NewCrashFS()
	fs.MkdirAll("/d", 0o700)
	f := mustOpen(t, fs, "/d/f", rw)
	fs.SyncDir("/d")
	fs.Crash()
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Write on a file opened before Crash: %v, want EIO", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync on a file opened before Crash: %v, want EIO", err)
	}
	if names, _ := fs.ReadDir("/d"); !slices.Equal(names, []string{"f"}) {
		t.Fatalf("ReadDir after Crash: %v", names)
	}
	if _, err := fs.OpenFile("/d/f", rw|os.O_EXCL, 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
}

func TestFaultFSShortWrite(t *testing.T) {
	cfs := waltest.NewCrashFS()
	cfs.MkdirAll("/d", 0o700)
	fs := waltest.NewFaultFS(cfs)
	f := mustOpen(t, fs, "/d/f", rw|os.O_APPEND)
	fs.FailWrite(2, 3)
	write(t, f, "first-")
	n, err := f.Write([]byte("second"))
	var pe *os.PathError
	if n != 3 || !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &pe) || pe.Path != "/d/f" {
		t.Fatalf("second write: %d, %v; want 3 bytes and ENOSPC on /d/f", n, err)
	}
	write(t, f, "-third") // a fault fires once
	if got, _ := content(t, cfs, "/d/f"); got != "first-sec-third" {
		t.Fatalf("content %q", got)
	}
	if w := fs.Writes(); !slices.Equal(w, []int{6, 3, 6}) {
		t.Fatalf("Writes %v", w)
	}
	fs.FailSync(2)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second Sync: %v, want EIO", err)
	}
	fs.FailSyncDir(1)
	if err := fs.SyncDir("/d"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncDir: %v, want EIO", err)
	}
	if fs.Syncs() != 2 || fs.SyncDirs() != 1 {
		t.Fatalf("Syncs %d SyncDirs %d, want 2 1", fs.Syncs(), fs.SyncDirs())
	}
	fs.Reset()
	if len(fs.Writes()) != 0 || fs.Syncs() != 0 {
		t.Fatal("Reset kept counts")
	}
	// The failed Sync synced nothing: only the first one's bytes survive.
	cfs.SyncDir("/d")
	cfs.Crash()
	if got, _ := content(t, cfs, "/d/f"); got != "first-sec-third" {
		t.Fatalf("after Crash: %q, want what the first Sync covered", got)
	}
}
