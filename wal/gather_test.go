package wal_test

import (
	"testing"
	"time"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wal/waltest"
)

// TestCommitDelayGathers: a record appended shortly after the one that
// woke an idle writer shares its fdatasync while the writer gathers for
// CommitDelay (without it, the second record waits for the first's
// fdatasync and then for its own).
func TestCommitDelayGathers(t *testing.T) {
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), CommitDelay: 500 * time.Millisecond})
	first, err := l.Append(record(1))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the writer is gathering
	if d := l.Durable(); d != 0 {
		t.Fatalf("durable %d while the writer gathers, want 0", d)
	}
	p, err := l.Append(record(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(waitCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats().Syncs; s != 1 || first != 1 || p != 2 {
		t.Errorf("%d fdatasyncs for records %d and %d appended 20 ms apart, want 1", s, first, p)
	}
}

// TestCommitDelayIgnoresLazy: a lazy record alone does not make the
// writer gather (nobody waits for it), and a gathering writer still
// commits within CommitDelay when nothing else comes.
func TestCommitDelayIgnoresLazy(t *testing.T) {
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), CommitDelay: 50 * time.Millisecond, LazyDelay: time.Hour})
	if _, err := l.AppendLazy(nil, record(1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if s := l.Stats().Syncs; s != 0 {
		t.Fatalf("%d fdatasyncs for a lazy record alone, want 0", s)
	}
	start := time.Now()
	p, err := l.Append(record(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(waitCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("durable after %v, before the writer's 50 ms gather ended", took)
	}
	if s := l.Stats().Syncs; s != 1 {
		t.Errorf("%d fdatasyncs, want 1 (the lazy record rides with the urgent one)", s)
	}
}

// TestNowIsNotGathered: a record appended with durable.Now wakes the
// writer without the gather: with a CommitDelay longer than the test's
// wait, only a writer that skips it makes the record durable, and a
// record appended behind it while it is committed takes the next commit.
func TestNowIsNotGathered(t *testing.T) {
	l := openLog(t, "/wal", wal.Options{FS: waltest.NewCrashFS(), CommitDelay: time.Hour})
	p, err := l.AppendJoined(nil, durable.Now, nil, record(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(waitCtx(t), p); err != nil {
		t.Fatalf("a durable.Now record was not committed: %v", err)
	}
	if s := l.Stats().Syncs; s != 1 {
		t.Errorf("%d fdatasyncs, want 1", s)
	}
	// Lazy records behind it never make the writer gather either.
	q, err := l.AppendJoined(nil, durable.Lazy, nil, record(2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.AppendJoined(nil, durable.Now, nil, record(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(waitCtx(t), r); err != nil {
		t.Fatal(err)
	}
	if d := l.Durable(); d < q {
		t.Errorf("durable %d, the lazy record %d before the Now record %d is not", d, q, r)
	}
}
