package wal_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// TestLazyRidesTheNextGroupCommit: records appended with AppendLazy start
// no group commit; the next Append commits them with its own record, in
// one fdatasync, in order.
func TestLazyRidesTheNextGroupCommit(t *testing.T) {
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), LazyDelay: time.Hour})
	called := make(chan wal.Pos, 3)
	for i := range 3 {
		p, err := l.AppendLazy(func(err error) {
			if err != nil {
				t.Errorf("lazy record: %v", err)
			}
			called <- wal.Pos(i + 1)
		}, record(i))
		if err != nil || p != wal.Pos(i+1) {
			t.Fatalf("AppendLazy %d: %d, %v", i, p, err)
		}
	}
	// Given the writer every chance to commit them on its own.
	time.Sleep(20 * time.Millisecond)
	if d, s := l.Durable(), l.Stats().Syncs; d != 0 || s != 0 {
		t.Fatalf("three lazy records alone: durable %d after %d fdatasyncs, want none yet", d, s)
	}
	p, err := l.Append(record(9))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(waitCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats().Syncs; s != 1 {
		t.Fatalf("%d fdatasyncs for three lazy records and the one after them, want 1", s)
	}
	for want := wal.Pos(1); want <= 3; want++ {
		select {
		case got := <-called:
			if got != want {
				t.Fatalf("lazy callback of %d ran where %d's should, want them in order", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the callback of lazy record %d never ran", want)
		}
	}
}

// TestLazyWaitedFor: WaitDurable on a lazy record commits it now, however
// long the lazy delay.
func TestLazyWaitedFor(t *testing.T) {
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), LazyDelay: time.Hour})
	p, err := l.AppendLazy(nil, record(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(waitCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if l.Durable() != p {
		t.Fatalf("durable %d, want %d", l.Durable(), p)
	}
}

// TestLazyDelayBounds: a lazy record nothing else follows is committed by
// itself once the lazy delay has passed, and callbacks see it durable.
func TestLazyDelayBounds(t *testing.T) {
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), LazyDelay: 5 * time.Millisecond})
	done := make(chan error, 1)
	if _, err := l.AppendLazy(func(err error) { done <- err }, record(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lazy record alone never became durable")
	}
}

// TestCloseCommitsLazy: Close writes and syncs the lazy records too.
func TestCloseCommitsLazy(t *testing.T) {
	fs := waltest.NewCrashFS()
	l, err := wal.Open("/wal", wal.Options{FS: fs, LazyDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.AppendLazy(nil, record(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := l.WaitDurable(ctx, p); err != nil && !errors.Is(err, wal.ErrClosed) {
		t.Fatal(err)
	}
	if l.Durable() != p {
		t.Fatalf("durable %d after Close, want %d", l.Durable(), p)
	}
	fs.Crash()
	again, err := wal.Open("/wal", wal.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Last() != p {
		t.Fatalf("after Close and a crash the log holds up to %d, want %d", again.Last(), p)
	}
}

// TestLazyNotHurriedByAFailureWatcher: a waiter for a position never
// appended (storage's watch for the log's failure waits for the largest
// Pos) wakes at every group commit, and must not commit the lazy records
// queued then: it waits for none of them.
func TestLazyNotHurriedByAFailureWatcher(t *testing.T) {
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	l := openLog(t, "/wal", wal.Options{FS: gateFS{waltest.NewCrashFS(), gate}, LazyDelay: time.Hour})
	t.Cleanup(release) // before Close, which syncs
	watching := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { watching <- l.WaitDurable(ctx, wal.Pos(math.MaxUint64)) }()
	first, err := l.Append(record(1)) // the writer takes it and waits at the gate
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := l.AppendLazy(nil, record(2)); err != nil {
		t.Fatal(err)
	}
	release()
	if err := l.WaitDurable(waitCtx(t), first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the watcher has woken and looked at the queue
	if d, s := l.Durable(), l.Stats().Syncs; d != first || s != 1 {
		t.Fatalf("durable %d after %d fdatasyncs, want %d after 1: the lazy record was committed for a waiter that waits for no record", d, s, first)
	}
	cancel()
	if err := <-watching; !errors.Is(err, context.Canceled) {
		t.Fatalf("the watcher: %v", err)
	}
}
