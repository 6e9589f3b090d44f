package wire

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// DefaultMaxInFlightRequestBytes is the default memory budget for requests
// in flight (512 MiB), as Kafka's queued.max.request.bytes.
const DefaultMaxInFlightRequestBytes = 512 << 20

// ErrRequestTooLarge is the answer to a charge that would take one
// request's share past the whole budget: it could never fit.
var ErrRequestTooLarge = errors.New("wire: request larger than the memory budget for requests in flight")

// errBudgetStopped ends a wait for the budget when the connection stops.
var errBudgetStopped = errors.New("wire: connection closed while waiting for the memory budget")

// Budget bounds the memory that requests in flight hold, across every
// Server that shares it (`txncoord up`'s nodes share one, see Limits): the
// bytes of a frame count from when they are read until its response is
// written (or dropped: Produce acks=0), and handlers charge what they hold
// while they work on a request (leaderstub's decompression) through
// BudgetFrom. A request that does not fit waits, and while it waits its
// connection is not read (back-pressure onto the client's socket); a
// request that alone needs more than the whole budget is refused.
//
// Frames are charged as they arrive (see conn.readBody), so a request holds
// budget while it grows. Two requests that each hold part of the budget
// and wait for more could wait for each other for good; so of the requests
// that hold budget and are still growing (being read or handled), the one
// that got budget first may go past the limit, up to twice the limit in
// total; the others wait, in arrival order. It never waits for a younger
// one, so every request gets through in turn, and no set of requests can
// hold the budget against each other. A request that holds nothing yet
// always waits for the limit: only a request already part-way in goes
// past it. So memory stays under twice the limit, and past the limit only
// by what such requests need to finish (at most the largest request,
// unless responses are slow to be written).
type Budget struct {
	limit int64

	mu   sync.Mutex
	used int64
	peak int64
	// growers are the tickets still being read or handled that hold
	// budget, in the order they first got some: the first one may
	// overcommit.
	growers ticketList
	// queue holds the waiting tickets in arrival order.
	queue   ticketList
	waiting int

	// waits counts charges that had to wait (a metric).
	waits atomic.Uint64
}

// NewBudget returns a budget of limit bytes (DefaultMaxInFlightRequestBytes
// when limit <= 0).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultMaxInFlightRequestBytes
	}
	return &Budget{limit: limit}
}

// processBudget is the budget of servers whose Limits name none.
var processBudget = sync.OnceValue(func() *Budget { return NewBudget(0) })

// ProcessBudget is the budget every Server of this process shares unless
// its Config names another (DefaultMaxInFlightRequestBytes).
func ProcessBudget() *Budget { return processBudget() }

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// BudgetStats is a snapshot of a budget.
type BudgetStats struct {
	// Peak is the most Used has been.
	Limit, Used, Peak int64
	// Waiting is the number of requests waiting for budget now; Waits
	// counts every wait so far.
	Waiting int
	Waits   uint64
}

// Stats returns the budget's current use.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetStats{Limit: b.limit, Used: b.used, Peak: b.peak, Waiting: b.waiting, Waits: b.waits.Load()}
}

// MemoryBudget is a request's share of its server's Budget, for memory a
// handler holds while it works on the request (see BudgetFrom).
type MemoryBudget interface {
	// Charge adds n bytes to the request's share, waiting until they fit.
	// It fails with ErrRequestTooLarge when the share would exceed the
	// whole budget, and with an error when the connection closes while it
	// waits. Charge only from the handler (before it returns), not from
	// its Reply.
	Charge(n int64) error
	// Release gives back n bytes charged earlier. What is not released is
	// released with the request's frame once it is answered.
	Release(n int64)
}

type budgetKey struct{}

// BudgetFrom returns the budget share of the request whose handler got
// ctx. Requests that hold no frame (LocalClient calls, handlers called by
// tests) get a share that charges nothing.
func BudgetFrom(ctx context.Context) MemoryBudget {
	if t, ok := ctx.Value(budgetKey{}).(*ticket); ok && t != nil {
		return t
	}
	return noBudget{}
}

type noBudget struct{}

func (noBudget) Charge(int64) error { return nil }
func (noBudget) Release(int64)      {}

// ticket is one request's share of a Budget, from the first byte of its
// frame until its response is written. It is also the context its handler
// runs with (the server's, answering BudgetFrom), which saves an
// allocation per request.
type ticket struct {
	context.Context // the server's
	b               *Budget
	// stop ends a wait: closed when the connection stops.
	stop <-chan struct{}

	// Guarded by b.mu.
	held     int64
	growing  bool
	listed   bool // in b.growers
	finished bool
	// want > 0 while waiting for that many bytes; granted is closed
	// when they are.
	want    int64
	granted chan struct{}
	// links in b.growers and b.queue
	growPrev, growNext   *ticket
	queuePrev, queueNext *ticket
}

func (t *ticket) Value(key any) any {
	if _, ok := key.(budgetKey); ok {
		return t
	}
	return t.Context.Value(key)
}

// newTicket starts a request's share: it is growing until doneGrowing.
func (b *Budget) newTicket(ctx context.Context, stop <-chan struct{}) *ticket {
	return &ticket{Context: ctx, b: b, stop: stop, growing: true}
}

// add grants n bytes to t.
func (b *Budget) add(t *ticket, n int64) {
	t.held += n
	b.used += n
	b.peak = max(b.peak, b.used)
	if t.growing && !t.listed {
		t.listed = true
		b.growers.pushBack(t, growLinks)
	}
}

// unlist takes t off the growers: it asks for no more.
func (b *Budget) unlist(t *ticket) {
	t.growing = false
	if t.listed {
		t.listed = false
		b.growers.remove(t, growLinks)
	}
}

// Charge implements MemoryBudget.
func (t *ticket) Charge(n int64) error {
	_, err := t.charge(n)
	return err
}

// charge adds n bytes to the ticket, waiting until they fit; waited
// reports whether it had to wait.
func (t *ticket) charge(n int64) (waited bool, err error) {
	if n <= 0 {
		return false, nil
	}
	b := t.b
	b.mu.Lock()
	if t.finished {
		// A charge after the answer (a handler's goroutine that outlived
		// it) is not tracked.
		b.mu.Unlock()
		return false, nil
	}
	if t.held+n > b.limit {
		b.mu.Unlock()
		return false, ErrRequestTooLarge
	}
	if b.fits(t, n) && (b.queue.head == nil || b.privileged(t)) {
		b.add(t, n)
		b.mu.Unlock()
		return false, nil
	}
	t.want, t.granted = n, make(chan struct{})
	b.queue.pushBack(t, queueLinks)
	b.waiting++
	b.waits.Add(1)
	granted := t.granted
	b.mu.Unlock()

	select {
	case <-granted:
		return true, nil
	case <-t.stop:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.want == 0 { // granted meanwhile: held counts it, finish returns it
		return true, nil
	}
	b.queue.remove(t, queueLinks)
	b.waiting--
	t.want = 0
	b.dispatch() // those behind it may fit now
	return true, errBudgetStopped
}

// fits reports whether n more bytes for t fit: under the limit, or for the
// privileged request (the first of the growers) under twice the limit.
func (b *Budget) fits(t *ticket, n int64) bool {
	if b.used+n <= b.limit {
		return true
	}
	return b.privileged(t) && b.used+n <= 2*b.limit
}

func (b *Budget) privileged(t *ticket) bool { return t.listed && b.growers.head == t }

// dispatch grants what fits now: the privileged request first (it may
// overcommit), then the queue in order, stopping at the first that does
// not fit so that a large request is not starved by small ones.
func (b *Budget) dispatch() {
	if t := b.growers.head; t != nil && t.want > 0 && b.fits(t, t.want) {
		b.grant(t)
	}
	for t := b.queue.head; t != nil && b.used+t.want <= b.limit; t = b.queue.head {
		b.grant(t)
	}
}

func (b *Budget) grant(t *ticket) {
	b.queue.remove(t, queueLinks)
	b.waiting--
	b.add(t, t.want)
	t.want = 0
	close(t.granted)
}

// Release implements MemoryBudget.
func (t *ticket) Release(n int64) {
	if n <= 0 {
		return
	}
	b := t.b
	b.mu.Lock()
	n = min(n, t.held)
	t.held -= n
	b.used -= n
	b.dispatch()
	b.mu.Unlock()
}

// doneGrowing marks the request read and handled: it holds its share until
// finish, but asks for no more, so the next of the growers may overcommit.
func (t *ticket) doneGrowing() {
	b := t.b
	b.mu.Lock()
	if t.growing {
		b.unlist(t)
		b.dispatch()
	}
	b.mu.Unlock()
}

// finish returns the whole share: the request was answered, or dropped.
func (t *ticket) finish() {
	if t == nil {
		return
	}
	b := t.b
	b.mu.Lock()
	b.unlist(t)
	t.finished = true
	b.used -= t.held
	t.held = 0
	b.dispatch()
	b.mu.Unlock()
}

// ticketList is an intrusive doubly linked list of tickets (no allocation
// per request); links selects which of a ticket's two pairs of links.
type ticketList struct{ head, tail *ticket }

type linkSel func(t *ticket) (prev, next **ticket)

func growLinks(t *ticket) (prev, next **ticket)  { return &t.growPrev, &t.growNext }
func queueLinks(t *ticket) (prev, next **ticket) { return &t.queuePrev, &t.queueNext }

func (l *ticketList) pushBack(t *ticket, links linkSel) {
	prev, next := links(t)
	*prev, *next = l.tail, nil
	if l.tail != nil {
		_, tailNext := links(l.tail)
		*tailNext = t
	} else {
		l.head = t
	}
	l.tail = t
}

func (l *ticketList) remove(t *ticket, links linkSel) {
	prev, next := links(t)
	if *prev != nil {
		_, pn := links(*prev)
		*pn = *next
	} else {
		l.head = *next
	}
	if *next != nil {
		np, _ := links(*next)
		*np = *prev
	} else {
		l.tail = *prev
	}
	*prev, *next = nil, nil
}
