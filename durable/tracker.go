package durable

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed fails the positions a Tracker had not made durable when it was
// closed.
var ErrClosed = errors.New("durable: log closed")

// Tracker is the bookkeeping of a Log for a writer that makes its
// positions durable itself (an etcd writer, a test's log): Next hands out
// positions in order, the writer reports Advance (durable up to a
// position) or Fail (sticky), and the Tracker wakes the waiters and runs
// the callbacks, in order of position, on the goroutine that reported,
// never on one that called Next. It is a Log. The zero value is ready.
type Tracker struct {
	mu      sync.Mutex
	last    Pos
	durable Pos
	// err fails every position after failAfter (and every later Next).
	err       error
	failAfter Pos
	waits     Waits
}

var _ Log = (*Tracker)(nil)

// Next hands out the next position, and registers then (if not nil) for
// its outcome in the same step, so then never runs on this goroutine. It
// fails with the sticky error once the log failed.
func (t *Tracker) Next(then func(error)) (Pos, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	t.last++
	if then != nil {
		t.waits.Then(t.last, then)
	}
	return t.last, nil
}

// Last is the last position handed out.
func (t *Tracker) Last() Pos {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Advance records that every position up to p is durable (a lower p than
// before changes nothing; after a failure, no position it failed) and runs
// the callbacks that fell due.
func (t *Tracker) Advance(p Pos) {
	t.mu.Lock()
	if t.err != nil {
		p = min(p, t.failAfter)
	}
	if p <= t.durable {
		t.mu.Unlock()
		return
	}
	t.durable = min(p, t.last)
	t.changedLocked()
	t.mu.Unlock()
	t.deliver()
}

// Fail stops the log: every position not durable yet, and every later
// Next, fails with err (the first error stays the log's: a Fail after a
// FailAfter fails the positions that one spared with it).
func (t *Tracker) Fail(err error) {
	t.mu.Lock()
	t.failAfterLocked(t.durable, err)
	t.mu.Unlock()
	t.deliver()
}

// FailAfter stops the log after p: every later Next, and every position
// after p, fails with err; the positions up to p may still become durable
// (a writer closed with a write in flight, whose outcome is the write's).
func (t *Tracker) FailAfter(p Pos, err error) {
	t.mu.Lock()
	t.failAfterLocked(max(p, t.durable), err)
	t.mu.Unlock()
	t.deliver()
}

func (t *Tracker) failAfterLocked(p Pos, err error) {
	switch {
	case t.err == nil:
		t.err, t.failAfter = err, p
	case p < t.failAfter:
		t.failAfter = p
	default:
		return
	}
	t.changedLocked()
}

// Durable is the position every write up to which is durable.
func (t *Tracker) Durable() Pos {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.durable
}

// Err is the failure that stopped the log, nil while it writes (positions
// before a FailAfter's may still become durable after it).
func (t *Tracker) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// WaitDurable returns nil once p is durable, the failure if the log
// failed first, ctx.Err() if ctx ends first.
func (t *Tracker) WaitDurable(ctx context.Context, p Pos) error {
	t.mu.Lock()
	if err, known := t.outcomeLocked(p); known {
		t.mu.Unlock()
		return err
	}
	outcome := t.waits.Wait(p)
	t.mu.Unlock()
	return Await(ctx, outcome)
}

// OnDurable calls fn once p's outcome is known: on the goroutine that
// reports it, or at once when it is known already (and no callback is
// being run, which fn must not overtake).
func (t *Tracker) OnDurable(p Pos, fn func(error)) {
	t.waits.OnDurable(&t.mu, t.outcomeLocked, p, fn)
}

func (t *Tracker) outcomeLocked(p Pos) (error, bool) {
	switch {
	case p <= t.durable:
		return nil, true
	case t.err != nil && p > t.failAfter:
		return t.err, true
	}
	return nil, false
}

func (t *Tracker) changedLocked() { t.waits.WakeLocked(t.outcomeLocked) }

// deliver runs the callbacks that fell due, in order of position.
func (t *Tracker) deliver() { t.waits.Deliver(&t.mu, t.outcomeLocked) }
