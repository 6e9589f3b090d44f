package groupcommit

import (
	"context"
	"errors"
	"sync"
)

// Conditional writes across the spaces of one Log.
//
// The writers that share a Log (the coordinator and the partition leaders
// of `txncoord up`) can make one write conditional on another's: an op
// submitted with SubmitAfter is durable only if every op it names is. The
// Log commits ops in queue order, so an op queued after the ops it names
// lands in the same commit as they do or in a later one; when a shared
// commit fails and its ops are retried one at a time (in order), an op
// whose dependency failed fails too, without being applied.
//
// That lets a callee in the same process answer before its write is
// durable (a Deferral): it hands the caller the ticket of its queued
// write, the caller makes its own write conditional on it and answers its
// own client only once that is durable. Nothing is acknowledged to a
// client before everything it rests on is on disk, and one fsync round is
// saved on the path: the callee's write and the caller's share a commit.

// ErrDependencyFailed fails an op whose dependency (SubmitAfter) failed.
var ErrDependencyFailed = errors.New("groupcommit: a write this one depends on failed")

// ErrForeignTicket fails an op made conditional on an op of another Log,
// which its commit could not include.
var ErrForeignTicket = errors.New("groupcommit: dependency on another log's write")

// Ticket is one submitted op.
type Ticket struct{ o *op }

// Done receives the op's result once, for its submitter: nil once
// durable, else its error.
func (t Ticket) Done() <-chan error { return t.o.done }

// Wait waits for the op's result, for anyone (it consumes nothing).
func (t Ticket) Wait() error {
	<-t.o.finished
	return t.o.err
}

// Queued reports whether t is a submitted op (not the zero Ticket).
func (t Ticket) Queued() bool { return t.o != nil }

// Deferral is how an in-process caller lets a callee that writes in the
// same Log answer once its writes are queued rather than durable: the
// callee adds the tickets of its writes (Defer), the caller reads them
// (Tickets) and submits its own write after them. It travels in the
// request's context (WithDeferral); a callee that finds none, or one for
// another Log, waits for durability as usual. Safe for concurrent use.
type Deferral struct {
	log     *Log
	mu      sync.Mutex
	tickets []Ticket
}

// NewDeferral returns a Deferral for writes in l.
func NewDeferral(l *Log) *Deferral { return &Deferral{log: l} }

// For reports whether d accepts the writes of s (the same Log). A nil d
// accepts nothing.
func (d *Deferral) For(s *Space) bool { return d != nil && s != nil && d.log == s.log }

// Defer adds a queued write the caller's own write must come after.
func (d *Deferral) Defer(t Ticket) {
	if !t.Queued() {
		return
	}
	d.mu.Lock()
	d.tickets = append(d.tickets, t)
	d.mu.Unlock()
}

// Tickets returns the writes deferred so far.
func (d *Deferral) Tickets() []Ticket {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Ticket(nil), d.tickets...)
}

type deferralKey struct{}

// WithDeferral returns ctx carrying d.
func WithDeferral(ctx context.Context, d *Deferral) context.Context {
	return context.WithValue(ctx, deferralKey{}, d)
}

// DeferralFrom returns the Deferral ctx carries, or nil.
func DeferralFrom(ctx context.Context) *Deferral {
	d, _ := ctx.Value(deferralKey{}).(*Deferral)
	return d
}
