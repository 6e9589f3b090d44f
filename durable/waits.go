package durable

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// Outcome is what a log answers for position p now: known is false while
// p's outcome is not known yet. A log calls the methods of its Waits with
// its own outcome, under its own lock unless said otherwise.
type Outcome func(p Pos) (err error, known bool)

// Waits is the part every log shares of a position's outcome: who waits
// for it (WaitDurable) and what runs at it (OnDurable, a callback of an
// append). The log keeps it under its own lock, and after each change of
// its outcomes (a group commit, a failure, a close) calls WakeLocked and
// then, unlocked, Deliver.
//
// A waiter is woken once, when its own outcome is known, not at every
// group commit: a waiter for a position far ahead (one that watches for
// the log's failure) costs nothing while the log writes. Callbacks run in
// order of position on the goroutine that calls Deliver, the ones for one
// position in the order they were listed; until Deliver has run, OnDurable
// lists even a callback whose outcome is known, so that it cannot overtake
// one for an earlier position.
type Waits struct {
	callbacks []callback
	waiters   []waiter
	// delivering: callbacks fell due and Deliver has not run them yet.
	delivering bool
	// spare is the list Deliver ran last, kept for its next round:
	// Deliver runs at every group commit, and a new list each time would
	// be a good share of a busy log's garbage. Taken under the lock, so
	// that two Delivers at once never share it.
	spare []due
}

// due is a callback whose outcome is known.
type due struct {
	callback
	err error
}

type callback struct {
	p  Pos
	fn func(error)
}

type waiter struct {
	p       Pos
	outcome chan error // buffered: one send
}

// Then lists fn for p's outcome (an append's callback: listed in the
// same step as the position is handed out, so it never runs on the
// appender's goroutine).
func (w *Waits) Then(p Pos, fn func(error)) {
	w.callbacks = append(w.callbacks, callback{p, fn})
}

// Wait lists a waiter for p and returns the channel its outcome is sent
// on, once. Buffered: the log never blocks on a waiter that left.
func (w *Waits) Wait(p Pos) <-chan error {
	outcome := make(chan error, 1)
	w.waiters = append(w.waiters, waiter{p, outcome})
	return outcome
}

// Await returns what Wait's channel receives, or ctx.Err() if ctx ends
// first. Not under the log's lock.
func Await(ctx context.Context, outcome <-chan error) error {
	select {
	case err := <-outcome:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// OnDurable runs fn at once, on the caller's goroutine, when p's outcome
// is known and no callback waits to be delivered; otherwise it lists fn.
// mu is the log's lock, not held by the caller.
func (w *Waits) OnDurable(mu sync.Locker, outcome Outcome, p Pos, fn func(error)) {
	mu.Lock()
	if err, known := outcome(p); known && !w.delivering {
		mu.Unlock()
		fn(err)
		return
	}
	w.callbacks = append(w.callbacks, callback{p, fn})
	mu.Unlock()
}

// WakeLocked wakes the waiters whose outcome is known now and marks the
// callbacks for Deliver.
func (w *Waits) WakeLocked(outcome Outcome) {
	keep := w.waiters[:0]
	for _, wt := range w.waiters {
		if err, known := outcome(wt.p); known {
			wt.outcome <- err
		} else {
			keep = append(keep, wt)
		}
	}
	clear(w.waiters[len(keep):])
	w.waiters = keep
	w.delivering = len(w.callbacks) > 0
}

// Deliver runs the callbacks whose outcome is known, in order of
// position, until none is left. mu is the log's lock, not held by the
// caller; the callbacks run without it.
func (w *Waits) Deliver(mu sync.Locker, outcome Outcome) {
	var ready []due
	for {
		mu.Lock()
		if ready == nil {
			ready, w.spare = w.spare, nil
		}
		ready = ready[:0]
		keep := w.callbacks[:0]
		for _, cb := range w.callbacks {
			if err, known := outcome(cb.p); known {
				ready = append(ready, due{cb, err})
			} else {
				keep = append(keep, cb)
			}
		}
		clear(w.callbacks[len(keep):])
		w.callbacks = keep
		w.delivering = len(ready) > 0
		if len(ready) == 0 {
			w.spare = ready
			mu.Unlock()
			return
		}
		mu.Unlock()
		// Stable: callbacks for one position run in the order listed.
		slices.SortStableFunc(ready, func(a, b due) int { return cmp.Compare(a.p, b.p) })
		for _, d := range ready {
			d.fn(d.err)
		}
		clear(ready) // the callbacks that ran are not kept alive
	}
}
