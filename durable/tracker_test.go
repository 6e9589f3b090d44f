package durable

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTrackerOrderAndFailure(t *testing.T) {
	var tr Tracker
	var got []string
	rec := func(name string) func(error) {
		return func(err error) {
			if err != nil {
				name += " failed"
			}
			got = append(got, name)
		}
	}
	p1, _ := tr.Next(rec("p1"))
	p2, _ := tr.Next(rec("p2"))
	p3, _ := tr.Next(nil)
	tr.OnDurable(p3, rec("p3"))
	tr.OnDurable(p1, rec("p1 again"))
	if len(got) != 0 {
		t.Fatalf("callbacks ran before any position was durable: %v", got)
	}
	tr.Advance(p2)
	if want := "p1 p1 again p2"; join(got) != want {
		t.Fatalf("after Advance(%d): %q, want %q", p2, join(got), want)
	}
	if tr.Durable() != p2 {
		t.Fatalf("Durable %d, want %d", tr.Durable(), p2)
	}
	tr.OnDurable(p1, rec("p1 late")) // known already: at once
	boom := errors.New("boom")
	tr.Fail(boom)
	tr.Advance(p3) // after a failure nothing becomes durable
	if want := "p1 p1 again p2 p1 late p3 failed"; join(got) != want {
		t.Fatalf("after Fail: %q, want %q", join(got), want)
	}
	if err := tr.WaitDurable(context.Background(), p3); !errors.Is(err, boom) {
		t.Fatalf("WaitDurable(p3) = %v, want the failure", err)
	}
	if err := tr.WaitDurable(context.Background(), p1); err != nil {
		t.Fatalf("WaitDurable(p1) = %v, want nil (durable before the failure)", err)
	}
	if _, err := tr.Next(nil); !errors.Is(err, boom) {
		t.Fatalf("Next after Fail = %v, want the failure", err)
	}
}

func TestTrackerWaitDurable(t *testing.T) {
	var tr Tracker
	p, _ := tr.Next(nil)
	done := make(chan error, 1)
	go func() { done <- tr.WaitDurable(context.Background(), p) }()
	select {
	case err := <-done:
		t.Fatalf("WaitDurable returned %v before Advance", err)
	case <-time.After(20 * time.Millisecond):
	}
	tr.Advance(p)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q, _ := tr.Next(nil)
	if err := tr.WaitDurable(ctx, q); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitDurable with a done ctx = %v", err)
	}
}

// A callback that registers another for a position already durable does
// not run it before the callbacks of earlier positions still due.
func TestTrackerNoOvertaking(t *testing.T) {
	var tr Tracker
	var got []string
	p1, _ := tr.Next(nil)
	p2, _ := tr.Next(nil)
	tr.OnDurable(p1, func(error) {
		got = append(got, "p1")
		tr.OnDurable(p1, func(error) { got = append(got, "p1 nested") })
	})
	tr.OnDurable(p2, func(error) { got = append(got, "p2") })
	tr.Advance(p2)
	if want := "p1 p2 p1 nested"; join(got) != want && join(got) != "p1 p1 nested p2" {
		t.Fatalf("%q", join(got))
	}
	if got[0] != "p1" || len(got) != 3 {
		t.Fatalf("%q", join(got))
	}
}

func TestShares(t *testing.T) {
	var a, b Tracker
	if !Shares(&a, &a) || Shares(&a, &b) || Shares(nil, &a) || Shares(nil, nil) {
		t.Fatal("Shares: one log, not nil")
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// FailAfter fails what comes after a position and lets the writes up to
// it end as they end.
func TestTrackerFailAfter(t *testing.T) {
	var tr Tracker
	p1, _ := tr.Next(nil)
	p2, _ := tr.Next(nil)
	closed := errors.New("closed")
	tr.FailAfter(p1, closed)
	if err := tr.WaitDurable(context.Background(), p2); !errors.Is(err, closed) {
		t.Fatalf("after FailAfter(p1): p2 %v, want the failure", err)
	}
	tr.Advance(p2) // the writer's answer for p1 (and p2, refused)
	if tr.Durable() != p1 {
		t.Fatalf("Durable %d, want %d: nothing after the failure becomes durable", tr.Durable(), p1)
	}
	if err := tr.WaitDurable(context.Background(), p1); err != nil {
		t.Fatalf("p1: %v, want its own outcome (durable)", err)
	}
}

// A Fail after a FailAfter fails the positions the FailAfter spared.
func TestTrackerFailAfterThenFail(t *testing.T) {
	var tr Tracker
	p1, _ := tr.Next(nil)
	closed := errors.New("closed")
	tr.FailAfter(p1, closed)
	tr.Fail(errors.New("refused"))
	if err := tr.WaitDurable(context.Background(), p1); !errors.Is(err, closed) {
		t.Fatalf("p1 after FailAfter(p1) and Fail: %v, want the log's first error", err)
	}
}
