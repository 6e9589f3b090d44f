package durable

import "context"

// Pos is a position in a log: the first write is 1; 0 is "nothing".
type Pos uint64

// Log is a writer's durability: how far its writes are durable, and the
// outcome of each position.
type Log interface {
	// Durable is the position every write up to which is durable.
	Durable() Pos
	// WaitDurable returns nil once p is durable, the log's failure if it
	// failed first, ctx.Err() if ctx ends first.
	WaitDurable(ctx context.Context, p Pos) error
	// OnDurable calls fn(nil) once p is durable, fn(err) if the log fails
	// first. fn runs on the log's writer (keep it short, take no lock a
	// writer of the log may hold while it appends), or at once on the
	// caller's goroutine when the outcome is already known.
	OnDurable(p Pos, fn func(error))
	// Err is the failure that stopped the log, nil while it writes.
	Err() error
}

// Shares reports whether a caller appending to caller may be answered as
// soon as a write to mine is appended: the two are one log (and not nil,
// which no log is: a caller over TCP has none), so whatever the caller
// appends next is durable only with it.
func Shares(caller, mine Log) bool { return caller != nil && caller == mine }

// Urgency is how soon a log that commits in groups commits a write: what
// the caller knows of who waits for it and of what follows it.
type Urgency uint8

const (
	// Gather: someone waits for the write, and writes someone else waits
	// for may be appended right behind it (a transaction's records to
	// two partitions, sent together by the client): a writer woken from
	// idle by it waits a few microseconds for them, so that they share
	// its group commit.
	Gather Urgency = iota
	// Now: someone waits for the write, and nothing anybody waits for is
	// expected right behind it (a transaction's Prepare: its client waits
	// for the answer before it sends anything else): commit at once.
	Now
	// Lazy: nobody waits for the write now (its caller appends to the
	// same log and was answered at append, or it only records an
	// outcome): it starts no group commit of its own and is taken into
	// the next one, or committed after the log's lazy delay. Order is
	// unchanged: it is durable before every write appended after it.
	Lazy
)
