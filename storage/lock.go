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

// LockDir takes the data dir dir (created if missing) for this process
// until the returned file is closed, as Open does: for a node that keeps
// nothing in a store of its own but must still not share its dir with a
// second process.
func LockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return lockDir(dir)
}

// Discard moves the store dbPath and its log aside (renamed with a
// ".discarded-<time>" suffix, never deleted: a name taken already gets a
// counter) so that Open starts an empty store, and returns what it moved:
// the explicit start-over of an operator whose data dir is damaged
// (txncoord up --force-new-cluster). It takes the data dir's lock while it
// works, so it never moves a store from under the process using it.
func Discard(dbPath string) ([]string, error) {
	dir := filepath.Dir(dbPath)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil, nil // nothing to discard
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	suffix := ".discarded-" + time.Now().UTC().Format("20060102T150405Z")
	var moved []string
	for _, p := range []string{dbPath, filepath.Join(dir, WALDir)} {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			continue
		}
		to := p + suffix
		for i := 2; ; i++ {
			if _, err := os.Lstat(to); os.IsNotExist(err) {
				break
			}
			to = fmt.Sprintf("%s%s-%d", p, suffix, i)
		}
		if err := os.Rename(p, to); err != nil {
			return moved, err
		}
		moved = append(moved, p+" -> "+to)
	}
	return moved, nil
}

// CheckLock fails with "data dir DIR is in use by pid N" when another
// process holds dir's lock, without keeping the lock: for a caller that
// must not touch dir's other files (txncoord up's cluster.yaml and
// credentials) while another process runs on it. A dir that does not
// exist is free.
func CheckLock(dir string) error {
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	f, err := lockDir(dir)
	if err != nil {
		return err
	}
	return f.Close()
}
