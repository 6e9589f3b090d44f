package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the file that marks a data dir as in use by one process.
const LockFile = "LOCK"

// lockDir takes the data dir dir for this process: an exclusive flock on
// dir/LOCK, which holds the owner's pid so that a second process can say
// who has it. The kernel drops the lock when the process dies, so a
// SIGKILLed owner never leaves the dir locked.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner := "another process"
			if b, rerr := os.ReadFile(filepath.Join(dir, LockFile)); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					owner = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("data dir %s is in use by %s", dir, owner)
		}
		return nil, fmt.Errorf("data dir %s: lock: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// Discard moves the store dbPath and its log aside (renamed with a
// ".discarded-<time>" suffix, never deleted) so that Open starts an empty
// store, and returns what it moved: the explicit start-over of an operator
// whose data dir is damaged (txncoord up --force-new-cluster).
func Discard(dbPath string) ([]string, error) {
	suffix := ".discarded-" + time.Now().UTC().Format("20060102T150405Z")
	var moved []string
	for _, p := range []string{dbPath, filepath.Join(filepath.Dir(dbPath), WALDir)} {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			continue
		}
		if err := os.Rename(p, p+suffix); err != nil {
			return moved, err
		}
		moved = append(moved, p+" -> "+p+suffix)
	}
	return moved, nil
}
