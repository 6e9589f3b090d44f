package groupcommit

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// An op submitted after another of a different space (SubmitAfter) shares
// its commit when both are queued together and is committed with it; when
// the op it depends on fails, in a shared Update or alone, the dependent
// fails with ErrDependencyFailed, is not applied, and stops its FailStop
// space; an independent op of the same Update is still committed.
func TestSubmitAfter(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "d.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	coord, _ := l.Space("coordinator", SpaceOptions{})
	leader, _ := l.Space("leader", SpaceOptions{FailStop: true})
	other, _ := l.Space("other", SpaceOptions{})
	commits := 0
	counting, _ := l.Space("counting", SpaceOptions{OnCommit: func(int) { commits++ }})

	// Both queued while the writer is busy: one Update carries them.
	release := make(chan struct{})
	hold := other.Submit(func(Root) error { <-release; return nil }, nil)
	reg := coord.SubmitAfter(nil, put("txns", "t1", "ongoing"), nil)
	data := counting.SubmitAfter([]Ticket{reg}, put("log", "0", "batch"), nil)
	close(release)
	for name, c := range map[string]<-chan error{"hold": hold, "registration": reg.Done(), "data": data.Done()} {
		if err := <-c; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if get(t, coord, "txns", "t1") != "ongoing" || get(t, counting, "log", "0") != "batch" {
		t.Fatal("dependent writes not committed")
	}
	if commits != 1 {
		t.Fatalf("dependent op in %d commits", commits)
	}

	// The dependency fails inside a shared Update: retried alone, it
	// fails again, and the dependent fails without being applied.
	boom := errors.New("boom")
	release = make(chan struct{})
	hold = other.Submit(func(Root) error { <-release; return nil }, nil)
	bad := coord.SubmitAfter(nil, func(Root) error { return boom }, nil)
	dependent := leader.SubmitAfter([]Ticket{bad}, put("log", "1", "batch"), func() { t.Error("durable ran for a failed op") })
	independent := other.Submit(put("x", "k", "v"), nil)
	close(release)
	if err := <-hold; err != nil {
		t.Fatal(err)
	}
	if err := <-bad.Done(); !errors.Is(err, boom) {
		t.Fatalf("failing op: %v", err)
	}
	if err := <-dependent.Done(); !errors.Is(err, ErrDependencyFailed) || !errors.Is(err, boom) {
		t.Fatalf("dependent of a failed op: %v, want ErrDependencyFailed wrapping the failure", err)
	}
	if err := <-independent; err != nil {
		t.Fatalf("independent op of the same Update: %v", err)
	}
	if get(t, leader, "log", "1") != "" {
		t.Fatal("the dependent of a failed op was applied")
	}
	if leader.Err() == nil {
		t.Fatal("a FailStop space whose op failed on its dependency keeps accepting writes")
	}

	// A dependency that already failed (alone, before) fails a later
	// dependent at once.
	failed := coord.SubmitAfter(nil, func(Root) error { return boom }, nil)
	if err := <-failed.Done(); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	late := other.SubmitAfter([]Ticket{failed}, put("x", "late", "v"), nil)
	if err := <-late.Done(); !errors.Is(err, ErrDependencyFailed) {
		t.Fatalf("dependent of an op failed earlier: %v", err)
	}
	if get(t, other, "x", "late") != "" {
		t.Fatal("applied")
	}

	// A ticket of another Log cannot be a dependency.
	l2, err := Open(filepath.Join(t.TempDir(), "e.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	s2, _ := l2.Space("s", SpaceOptions{})
	foreign := s2.SubmitAfter(nil, put("x", "y", "z"), nil)
	if err := <-other.SubmitAfter([]Ticket{foreign}, put("x", "foreign", "v"), nil).Done(); !errors.Is(err, ErrForeignTicket) {
		t.Fatalf("dependency on another log's op: %v", err)
	}
	if err := <-foreign.Done(); err != nil {
		t.Fatal(err)
	}
}

// A Deferral travels in a context and accepts only writes of its own Log.
func TestDeferral(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "d.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, _ := l.Space("a", SpaceOptions{})
	l2, err := Open(filepath.Join(t.TempDir(), "e.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	b, _ := l2.Space("b", SpaceOptions{})

	if d := DeferralFrom(context.Background()); d != nil || d.For(a) {
		t.Fatal("a context without a Deferral has one")
	}
	d := NewDeferral(l)
	ctx := WithDeferral(context.Background(), d)
	got := DeferralFrom(ctx)
	if got != d || !got.For(a) || got.For(b) {
		t.Fatalf("DeferralFrom: %p, For(same log) %v, For(other log) %v", got, got.For(a), got.For(b))
	}
	tk := a.SubmitAfter(nil, put("k", "v", "1"), nil)
	got.Defer(tk)
	got.Defer(Ticket{})
	if ts := d.Tickets(); len(ts) != 1 || ts[0] != tk {
		t.Fatalf("tickets %v", ts)
	}
	if err := <-a.SubmitAfter(d.Tickets(), put("k", "w", "2"), nil).Done(); err != nil {
		t.Fatal(err)
	}
}

// Wait gives anyone the op's result without taking it from its submitter;
// the zero Ticket is not Queued.
func TestTicketWait(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "w.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, _ := l.Space("s", SpaceOptions{})
	boom := errors.New("boom")
	ok := s.SubmitAfter(nil, put("b", "k", "v"), nil)
	bad := s.SubmitAfter(nil, func(Root) error { return boom }, nil)
	if err := ok.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := bad.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait on a failed op: %v", err)
	}
	if err := <-ok.Done(); err != nil {
		t.Fatalf("Done after Wait: %v", err)
	}
	if err := <-bad.Done(); !errors.Is(err, boom) {
		t.Fatalf("Done after Wait on a failed op: %v", err)
	}
	if !ok.Queued() || (Ticket{}).Queued() {
		t.Fatal("Queued")
	}
}
