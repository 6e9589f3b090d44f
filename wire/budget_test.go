package wire

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"
)

func chargeAsync(t *ticket, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- t.Charge(n) }()
	return done
}

func expectBlocked(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: returned %v, want it to wait", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

func expectGranted(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting", what)
	}
}

// A request that does not fit waits until one in flight is answered; the
// oldest request still growing is never made to wait for a younger one (it
// may go past the limit, up to twice it); waiting requests are granted in
// arrival order; a request larger than the whole budget is refused.
func TestBudgetWaitsInOrder(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	stop := make(chan struct{})
	first := b.newTicket(ctx, stop)
	second := b.newTicket(ctx, stop)
	third := b.newTicket(ctx, stop)
	if err := first.Charge(60); err != nil {
		t.Fatal(err)
	}
	if err := second.Charge(30); err != nil {
		t.Fatal(err)
	}
	big := chargeAsync(second, 30) // 120 > 100, and second is not the oldest
	expectBlocked(t, big, "second's charge past the limit")
	small := chargeAsync(third, 5) // fits, but second waits first
	expectBlocked(t, small, "third's charge behind a waiting one")
	if st := b.Stats(); st.Waiting != 2 || st.Used != 90 {
		t.Fatalf("stats %+v, want 2 waiting, 90 used", st)
	}
	// The oldest may overcommit: it never waits for younger ones.
	if err := first.Charge(40); err != nil {
		t.Fatal(err)
	}
	if err := first.Charge(100); !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("a charge past the whole budget: %v", err)
	}
	first.doneGrowing()
	// second is the oldest growing now: 130+30 fits twice the limit.
	expectGranted(t, big, "second as the oldest")
	expectBlocked(t, small, "third while 160 are used")
	first.finish() // 60 used
	expectGranted(t, small, "third after the first was answered")
	second.finish()
	third.finish()
	if st := b.Stats(); st.Used != 0 || st.Waiting != 0 || st.Peak != 160 {
		t.Fatalf("stats %+v, want nothing used, peak 160", st)
	}
}

// Only a request that already holds budget may go past the limit: a new
// one waits even when no other request is growing.
func TestBudgetNewRequestsWait(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	answered := b.newTicket(ctx, nil)
	if err := answered.Charge(100); err != nil {
		t.Fatal(err)
	}
	answered.doneGrowing() // read and handled, its response not written yet
	fresh := b.newTicket(ctx, nil)
	done := chargeAsync(fresh, 10)
	expectBlocked(t, done, "a new request at the limit")
	answered.finish()
	expectGranted(t, done, "the new request once the other was answered")
	fresh.finish()
}

// A wait ends when the connection stops, and the ones queued behind it
// move up.
func TestBudgetWaitEndsWhenStopped(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	holder := b.newTicket(ctx, nil)
	if err := holder.Charge(100); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	waiter := b.newTicket(ctx, stop)
	behind := b.newTicket(ctx, nil)
	w := chargeAsync(waiter, 80)
	expectBlocked(t, w, "waiter")
	bh := chargeAsync(behind, 10)
	expectBlocked(t, bh, "behind")
	close(stop)
	if err := <-w; !errors.Is(err, errBudgetStopped) {
		t.Fatalf("stopped wait: %v", err)
	}
	waiter.finish()
	holder.Release(50)
	expectGranted(t, bh, "behind after the stopped one left")
	holder.finish()
	behind.finish()
	if st := b.Stats(); st.Used != 0 || st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Many requests that each grow in chunks, hold, and are answered later
// never wait for each other for good, and together never hold more than
// twice the budget.
func TestBudgetNoDeadlock(t *testing.T) {
	const limit = 1000
	b := NewBudget(limit)
	ctx := context.Background()
	var wg sync.WaitGroup
	answer := make(chan *ticket, 64)
	go func() { // the writers: answer in a while
		for tk := range answer {
			go func() {
				time.Sleep(time.Duration(rand.Intn(3)) * time.Millisecond)
				tk.finish()
				wg.Done()
			}()
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var readers sync.WaitGroup
		for r := range 16 { // 16 connections
			readers.Add(1)
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewSource(int64(r)))
				for range 200 {
					wg.Add(1)
					tk := b.newTicket(ctx, nil)
					size := 1 + rng.Intn(limit)
					for got := 0; got < size; {
						n := min(1+rng.Intn(200), size-got)
						if err := tk.Charge(int64(n)); err != nil {
							t.Error(err)
							return
						}
						got += n
					}
					tk.doneGrowing()
					answer <- tk
				}
			}()
		}
		readers.Wait()
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("requests still waiting: %+v", b.Stats())
	}
	close(answer)
	st := b.Stats()
	if st.Used != 0 || st.Peak > 2*limit {
		t.Fatalf("stats %+v: want nothing used and a peak within twice the limit", st)
	}
	t.Logf("peak %d of a %d budget, %d waits", st.Peak, limit, st.Waits)
}
