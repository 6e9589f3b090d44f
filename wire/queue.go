package wire

import "sync"

// replyQueue carries a connection's pending answers from its reader to its
// writer, in request order. It holds at most max entries (push waits for
// room: the reader stops reading), and its storage grows on demand and is
// dropped when it empties, so an idle connection holds no slots (a buffered
// channel of Config.MaxInFlight would hold them all for the connection's
// life).
type replyQueue struct {
	max int

	mu     sync.Mutex
	items  []pending // items[head:] are queued
	head   int
	closed bool
	// popWait / pushWait are set while the writer / reader sleeps.
	popWait, pushWait bool
	popWake, pushWake chan struct{}
}

func newReplyQueue(max int) *replyQueue {
	return &replyQueue{max: max, popWake: make(chan struct{}, 1), pushWake: make(chan struct{}, 1)}
}

// push queues p, waiting while the queue is full. Only the reader pushes
// (and closes).
func (q *replyQueue) push(p pending) {
	q.mu.Lock()
	for len(q.items)-q.head >= q.max {
		q.pushWait = true
		q.mu.Unlock()
		<-q.pushWake
		q.mu.Lock()
	}
	if len(q.items) == cap(q.items) && q.head > 0 {
		// Reuse the popped front rather than grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, p)
	if q.popWait {
		q.popWait = false
		q.popWake <- struct{}{}
	}
	q.mu.Unlock()
}

// close tells the writer that nothing more comes; what is queued is still
// popped.
func (q *replyQueue) close() {
	q.mu.Lock()
	q.closed = true
	if q.popWait {
		q.popWait = false
		q.popWake <- struct{}{}
	}
	q.mu.Unlock()
}

// pop returns the oldest entry, waiting for one; false once the queue is
// closed and empty. empty reports whether the queue is empty after it.
func (q *replyQueue) pop() (p pending, empty, ok bool) {
	q.mu.Lock()
	for q.head == len(q.items) {
		if q.closed {
			q.mu.Unlock()
			return pending{}, true, false
		}
		q.popWait = true
		q.mu.Unlock()
		<-q.popWake
		q.mu.Lock()
	}
	p = q.items[q.head]
	q.items[q.head] = pending{}
	q.head++
	if q.head == len(q.items) {
		// Drained: keep a small array for the next burst, drop a large
		// one.
		if cap(q.items) > 16 {
			q.items = nil
		} else {
			q.items = q.items[:0]
		}
		q.head = 0
	}
	if q.pushWait {
		q.pushWait = false
		q.pushWake <- struct{}{}
	}
	empty = q.head == len(q.items)
	q.mu.Unlock()
	return p, empty, true
}
