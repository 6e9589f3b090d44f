package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// powerLoss runs 8 appenders against a log on a CrashFS, cuts the power
// while they run, reopens, and does that for several rounds. It returns
// how many records were reported durable, and how many of those a reopen
// did not find. Every record a reopen finds must be the one appended at
// its Pos: the log is a prefix of what was appended, whatever was lost.
// With recycle, the log's front is also truncated while the appenders run,
// as the applier does, so filled segments are recycled; recycled is how
// many were.
func powerLoss(t *testing.T, noSync, prealloc, recycle bool) (acked, lost, recycled int) {
	fs := waltest.NewCrashFS()
	opts := wal.Options{FS: fs, SegmentSize: 1024, NoSync: noSync, Preallocate: prealloc}
	var mu sync.Mutex
	appended := map[wal.Pos][]byte{} // what Append put at each Pos
	durable := map[wal.Pos]bool{}    // what WaitDurable said was durable
	// reopen checks the log against what was appended and forgets the
	// Pos past its end: the next round appends there again.
	reopen := func() *wal.Log {
		l, err := wal.Open("/wal", opts)
		if err != nil {
			t.Fatalf("reopen after a power loss: %v", err)
		}
		got := readAll(t, l)
		for p, rec := range got {
			if !bytes.Equal(rec, appended[p]) {
				t.Fatalf("Pos %d = %q after a power loss, but Append put %q there", p, rec, appended[p])
			}
		}
		for p := range appended {
			if p > l.Last() {
				if durable[p] {
					lost++
				}
				delete(appended, p)
				delete(durable, p)
			}
		}
		return l
	}
	for round := range 6 {
		l := reopen()
		start := l.Last()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					rec := []byte(fmt.Sprintf("round %d writer %d record %d", round, w, i))
					p, err := l.Append(rec)
					if err != nil {
						return // the power is off: the log failed
					}
					mu.Lock()
					appended[p] = rec
					mu.Unlock()
					if err := l.WaitDurable(ctx, p); err != nil {
						return
					}
					mu.Lock()
					durable[p] = true
					acked++
					mu.Unlock()
				}
			}()
		}
		if recycle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Microsecond):
					}
					if d := l.Durable(); d > 40 {
						l.TruncateFront(d - 40) // fails once the power is off
					}
				}
			}()
		}
		// Cut the power at a different point each round, mid-stream.
		for l.Durable() < start+wal.Pos(100+37*round) && ctx.Err() == nil {
			time.Sleep(100 * time.Microsecond)
		}
		fs.Crash()
		close(stop)
		wg.Wait()
		cancel()
		recycled += int(l.Stats().Recycled)
		l.Close() // the old process: its files are gone
	}
	l := reopen()
	if prealloc && !recycle {
		checkFilled(t, fs)
	}
	l.Close()
	return acked, lost, recycled
}

// TestPowerLossPreallocatedKeepsDurable is TestPowerLossKeepsDurable with
// segments filled with zeros ahead of need and renamed into the log: a
// power loss mid-fill, between the rename and the directory's sync, or
// in a segment written over its zeros loses nothing reported durable.
func TestPowerLossPreallocatedKeepsDurable(t *testing.T) {
	acked, lost, _ := powerLoss(t, false, true, false)
	if acked < 600 || lost != 0 {
		t.Fatalf("%d of %d records reported durable were lost", lost, acked)
	}
}

// TestPowerLossRecycledKeepsDurable is TestPowerLossPreallocatedKeepsDurable
// with the front truncated as the appenders run, so that dropped filled
// segments become the next ones: a power loss between the rename that
// keeps one and the directory's sync, or in a recycled segment whose old
// frames follow the new ones, loses nothing reported durable, and a
// reopen never takes an old frame for a record.
func TestPowerLossRecycledKeepsDurable(t *testing.T) {
	acked, lost, recycled := powerLoss(t, false, true, true)
	if acked < 600 || lost != 0 {
		t.Fatalf("%d of %d records reported durable were lost", lost, acked)
	}
	if recycled == 0 {
		t.Fatal("no segment was recycled: the test ran without recycling")
	}
	t.Logf("%d records reported durable, %d segments recycled", acked, recycled)
}

// TestPowerLossKeepsDurable: no record reported durable is lost to a power
// loss that discards every byte not covered by a completed fdatasync (and
// every directory entry not covered by a directory sync).
func TestPowerLossKeepsDurable(t *testing.T) {
	acked, lost, _ := powerLoss(t, false, false, false)
	if acked < 600 || lost != 0 {
		t.Fatalf("%d of %d records reported durable were lost", lost, acked)
	}
}

// TestPowerLossNoSyncLoses proves the test above can fail: without
// fdatasync, records reported durable are lost.
func TestPowerLossNoSyncLoses(t *testing.T) {
	acked, lost, _ := powerLoss(t, true, false, false)
	if lost == 0 {
		t.Fatalf("NoSync lost none of %d records reported durable: the power-loss test would not see a missing fdatasync", acked)
	}
	t.Logf("NoSync: %d of %d records reported durable were lost", lost, acked)
}

// faultCase is one fault and what must survive it.
type faultCase struct {
	name  string
	arm   func(*waltest.FaultFS)
	errno syscall.Errno
	op    string // in the error: "wal: OP FILE: ..."
	// writes and syncs the log may have done, the failed one included:
	// nothing is retried after a failure.
	writes, syncs int
	// records of the batch a restart finds (what reached the file) and
	// what a power loss right after the failure keeps (what was synced).
	restart, powerLoss int
}

// The fault tests' log: 3 durable records, then one Append of 6 more
// that fills the first segment (write 1), rolls (fdatasync 1, dir sync 1)
// and goes on in a new segment (write 2, fdatasync 2).
const faultSegmentSize = 240

var (
	faultPrefix = recordsN(3)
	faultBatch  = recordsN(9)[3:]
)

func faultSetup(t *testing.T) (*waltest.CrashFS, *waltest.FaultFS, *wal.Log, *logBuffer) {
	t.Helper()
	cfs := waltest.NewCrashFS()
	ffs := waltest.NewFaultFS(cfs)
	var logs logBuffer
	l, err := wal.Open("/wal", wal.Options{FS: ffs, SegmentSize: faultSegmentSize, Log: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	appendDurable(t, l, faultPrefix...)
	ffs.Reset()
	return cfs, ffs, l, &logs
}

// faultCases: the batch's writes failed at every byte (ENOSPC after a
// short write), every fdatasync failed (EIO), the directory sync failed.
func faultCases(t *testing.T) []faultCase {
	_, ffs, l, _ := faultSetup(t)
	appendDurable(t, l, faultBatch...)
	l.Close()
	writes := ffs.Writes()
	if len(writes) != 2 || ffs.Syncs() != 2 || ffs.SyncDirs() != 1 {
		t.Fatalf("the batch took writes %v, %d syncs, %d dir syncs; the cases assume 2, 2, 1", writes, ffs.Syncs(), ffs.SyncDirs())
	}
	// wholeFrames is how many of the batch's frames fit in n bytes.
	wholeFrames := func(n int) int {
		k := 0
		for ; k < len(faultBatch) && headerSize+len(faultBatch[k]) <= n; k++ {
			n -= headerSize + len(faultBatch[k])
		}
		return k
	}
	inFirst := wholeFrames(writes[0]) // written before the roll, synced by it
	var cases []faultCase
	for n := 1; n <= len(writes); n++ {
		for at := 0; at <= writes[n-1]; at++ {
			before := 0
			for _, w := range writes[:n-1] {
				before += w
			}
			synced := 0
			if n > 1 {
				synced = inFirst
			}
			cases = append(cases, faultCase{
				name: fmt.Sprintf("write %d fails after %d bytes", n, at),
				arm:  func(f *waltest.FaultFS) { f.FailWrite(n, at) }, errno: syscall.ENOSPC, op: "write",
				writes: n, syncs: n - 1,
				restart: wholeFrames(before + at), powerLoss: synced,
			})
		}
	}
	cases = append(cases,
		faultCase{name: "the roll's fdatasync fails", arm: func(f *waltest.FaultFS) { f.FailSync(1) },
			errno: syscall.EIO, op: "fdatasync", writes: 1, syncs: 1, restart: inFirst, powerLoss: 0},
		faultCase{name: "the roll's directory sync fails", arm: func(f *waltest.FaultFS) { f.FailSyncDir(1) },
			errno: syscall.EIO, op: "sync dir", writes: 1, syncs: 1, restart: inFirst, powerLoss: inFirst},
		faultCase{name: "the commit's fdatasync fails", arm: func(f *waltest.FaultFS) { f.FailSync(2) },
			errno: syscall.EIO, op: "fdatasync", writes: 2, syncs: 2, restart: len(faultBatch), powerLoss: inFirst},
	)
	return cases
}

// TestFaults fails the log at every byte of a write that rolls a segment,
// at each fdatasync and at the directory sync. After the failure the log
// refuses everything with the sticky error and reports nothing more
// durable; a restart finds a consistent prefix and loses nothing reported
// durable, and so does a power loss, right after the failure or after the
// restart.
func TestFaults(t *testing.T) {
	for _, tc := range faultCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			cfs, ffs, l, logs := faultSetup(t)
			tc.arm(ffs)
			last, err := l.Append(faultBatch...)
			if err != nil {
				t.Fatalf("Append before the failure: %v", err)
			}
			err = l.WaitDurable(waitCtx(t), last)
			if !errors.Is(err, wal.ErrFailed) || !errors.Is(err, tc.errno) || !strings.HasPrefix(err.Error(), "wal: "+tc.op+" /wal") {
				t.Fatalf("WaitDurable: %v; want ErrFailed and %v, starting %q", err, tc.errno, "wal: "+tc.op+" /wal")
			}
			checkFailed(t, l, err, logs)
			if w, s := len(ffs.Writes()), ffs.Syncs(); w != tc.writes || s != tc.syncs {
				t.Fatalf("%d writes and %d syncs, want %d and %d: something was retried or went on after the failure", w, s, tc.writes, tc.syncs)
			}
			if cerr := l.Close(); cerr != err {
				t.Fatalf("Close: %v, want the sticky error", cerr)
			}

			// A restart: the page cache holds what was written.
			r, err := wal.Open("/wal", wal.Options{FS: cfs, SegmentSize: faultSegmentSize})
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			checkRecords(t, r, len(faultPrefix)+tc.restart)
			r.Close()
			// What the restart called durable survives a power loss.
			cfs.Crash()
			checkRecords(t, openLog(t, "/wal", wal.Options{FS: cfs, SegmentSize: faultSegmentSize}), len(faultPrefix)+tc.restart)
		})
		t.Run(tc.name+", then power loss", func(t *testing.T) {
			cfs, ffs, l, _ := faultSetup(t)
			tc.arm(ffs)
			last, _ := l.Append(faultBatch...)
			if err := l.WaitDurable(waitCtx(t), last); !errors.Is(err, wal.ErrFailed) {
				t.Fatalf("WaitDurable: %v, want ErrFailed", err)
			}
			cfs.Crash()
			l.Close()
			checkRecords(t, openLog(t, "/wal", wal.Options{FS: cfs, SegmentSize: faultSegmentSize}), len(faultPrefix)+tc.powerLoss)
		})
	}
}

// checkFailed: a failed log reports nothing more durable, answers every
// call with the sticky error, and logged it once.
func checkFailed(t *testing.T, l *wal.Log, sticky error, logs *logBuffer) {
	t.Helper()
	durable := wal.Pos(len(faultPrefix))
	if l.Durable() != durable || l.Err() != sticky || !l.Stats().Failed {
		t.Fatalf("after the failure: Durable %d (want %d), Err %v, Stats %+v", l.Durable(), durable, l.Err(), l.Stats())
	}
	if _, err := l.Append(record(1)); err != sticky {
		t.Fatalf("Append after the failure: %v, want the sticky error", err)
	}
	if err := l.WaitDurable(context.Background(), durable+1); err != sticky {
		t.Fatalf("WaitDurable(%d) after the failure: %v", durable+1, err)
	}
	if err := l.WaitDurable(context.Background(), durable); err != nil {
		t.Fatalf("WaitDurable(%d), durable before the failure: %v", durable, err)
	}
	var got error
	l.OnDurable(durable+1, func(err error) { got = err })
	if got != sticky {
		t.Fatalf("OnDurable after the failure: %v", got)
	}
	errs := logs.lines(t, "error")
	if len(errs) != 1 || !strings.HasPrefix(errs[0]["file"].(string), "/wal") {
		t.Fatalf("Error lines %v, want one naming the file", errs)
	}
}

// TestFailureAnswersWaiters: callbacks and waiters registered before the
// failure get the sticky error, in order, and none is told durable.
func TestFailureAnswersWaiters(t *testing.T) {
	_, ffs, l, _ := faultSetup(t)
	ffs.FailSync(1)
	var mu sync.Mutex
	var got []error
	for _, rec := range faultBatch[:3] {
		p, err := l.Append(rec)
		if err != nil {
			break // the failure came first: fine, nothing to wait for
		}
		l.OnDurable(p, func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() })
	}
	if err := l.WaitDurable(waitCtx(t), l.Last()); !errors.Is(err, wal.ErrFailed) {
		t.Fatalf("WaitDurable: %v", err)
	}
	l.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, err := range got {
		if !errors.Is(err, wal.ErrFailed) {
			t.Fatalf("callbacks got %v; want ErrFailed for each", got)
		}
	}
}

// checkFilled fails unless some segment of the log in /wal on fs was
// filled ahead: its full size, ending in zeros (a segment appended to
// ends with its last frame's data, here never a zero byte).
func checkFilled(t *testing.T, fs *waltest.CrashFS) {
	t.Helper()
	names, err := fs.ReadDir("/wal")
	if err != nil {
		t.Fatal(err)
	}
	filled := 0
	for _, name := range names {
		if !strings.HasSuffix(name, ".wal") {
			continue
		}
		f, err := fs.OpenFile("/wal/"+name, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 1024 && b[len(b)-1] == 0 {
			filled++
		}
	}
	if filled == 0 {
		t.Fatalf("no segment of %v was filled ahead: the test ran without preallocation", names)
	}
}
