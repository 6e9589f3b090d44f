package durable

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// A waiter is woken at its own outcome, not at every change before it,
// and stays listed until then; a waiter beyond the last position is
// woken by the failure.
func TestWaitsWakeOnlyAtOwnOutcome(t *testing.T) {
	var (
		mu      sync.Mutex
		w       Waits
		durable Pos
		failed  error
	)
	outcome := func(p Pos) (error, bool) {
		switch {
		case p <= durable:
			return nil, true
		case failed != nil:
			return failed, true
		}
		return nil, false
	}
	at3 := w.Wait(3)
	far := w.Wait(100)
	advance := func(p Pos) {
		mu.Lock()
		durable = p
		w.WakeLocked(outcome)
		mu.Unlock()
	}
	for p := Pos(1); p <= 2; p++ {
		advance(p)
		select {
		case err := <-at3:
			t.Fatalf("the waiter for 3 woken (%v) at %d", err, p)
		default:
		}
		if len(w.waiters) != 2 {
			t.Fatalf("at %d: %d waiters listed, want 2", p, len(w.waiters))
		}
	}
	advance(3)
	if err := Await(context.Background(), at3); err != nil {
		t.Fatalf("the waiter for 3: %v", err)
	}
	if len(w.waiters) != 1 {
		t.Fatalf("%d waiters listed after 3, want the one for 100", len(w.waiters))
	}
	boom := errors.New("boom")
	mu.Lock()
	failed = boom
	w.WakeLocked(outcome)
	mu.Unlock()
	if err := Await(context.Background(), far); !errors.Is(err, boom) {
		t.Fatalf("the waiter for 100: %v, want the failure", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Await(ctx, w.Wait(200)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Await with a done ctx: %v", err)
	}
}

// Callbacks listed out of order run in order of position, the ones for
// one position in the order listed; none before Deliver.
func TestWaitsDeliverInOrder(t *testing.T) {
	var (
		mu      sync.Mutex
		w       Waits
		durable Pos
		got     []string
	)
	outcome := func(p Pos) (error, bool) { return nil, p <= durable }
	rec := func(s string) func(error) { return func(error) { got = append(got, s) } }
	w.Then(2, rec("2a"))
	w.OnDurable(&mu, outcome, 1, rec("1"))
	w.OnDurable(&mu, outcome, 2, rec("2b"))
	w.Then(3, rec("3"))
	mu.Lock()
	durable = 2
	w.WakeLocked(outcome)
	mu.Unlock()
	w.OnDurable(&mu, outcome, 1, rec("1 late")) // due, but Deliver has not run: listed
	if len(got) != 0 {
		t.Fatalf("ran before Deliver: %q", join(got))
	}
	w.Deliver(&mu, outcome)
	if want := "1 1 late 2a 2b"; join(got) != want {
		t.Fatalf("delivered %q, want %q", join(got), want)
	}
	w.OnDurable(&mu, outcome, 2, rec("2 now")) // nothing to deliver: at once
	if want := "1 1 late 2a 2b 2 now"; join(got) != want {
		t.Fatalf("%q, want %q", join(got), want)
	}
	if len(w.callbacks) != 1 || w.callbacks[0].p != 3 {
		t.Fatalf("still listed: %+v, want the one for 3", w.callbacks)
	}
}

// A busy log delivers once per group commit: after the first, Deliver
// reuses its list and allocates nothing.
func TestWaitsDeliverReusesItsList(t *testing.T) {
	var (
		mu      sync.Mutex
		w       Waits
		durable Pos
		ran     int
	)
	outcome := func(p Pos) (error, bool) { return nil, p <= durable }
	fn := func(error) { ran++ }
	commit := func() {
		for i := 0; i < 16; i++ {
			w.Then(durable+1+Pos(i%4), fn)
		}
		mu.Lock()
		durable += 4
		w.WakeLocked(outcome)
		mu.Unlock()
		w.Deliver(&mu, outcome)
	}
	commit()
	if allocs := testing.AllocsPerRun(100, commit); allocs != 0 {
		t.Fatalf("%.1f allocations per group commit, want 0", allocs)
	}
	if ran != 16*102 { // AllocsPerRun runs it once more to warm up
		t.Fatalf("%d callbacks ran, want %d", ran, 16*102)
	}
}
