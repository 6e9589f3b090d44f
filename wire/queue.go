package wire

import "sync"

// replyQueue carries a connection's pending answers from its reader to its
// writer, in request order. It holds at most max entries (push waits for
// room: the reader stops reading). Little of it exists while the
// connection is idle: its storage beyond one entry grows on demand and is
// dropped once drained, and its writer goroutine runs only while there is something to
// answer (push reports when to start one; it ends when pop finds the queue
// empty). A buffered channel of Config.MaxInFlight and a writer parked on
// it held both for the connection's whole life.
type replyQueue struct {
	max int

	mu    sync.Mutex
	items []pending // items[head:] are queued
	head  int
	// one holds items while at most one answer is queued, as it is for a
	// client that sends one request at a time: such a queue allocates
	// nothing per request.
	one [1]pending
	// writing: a writer goroutine runs (from push's start until the pop
	// that finds the queue empty).
	writing bool
	writers sync.WaitGroup
	// room wakes the reader waiting for room (made on first use).
	room     chan struct{}
	roomWait bool
}

// push queues p, waiting while the queue is full. It returns true when the
// caller must start a writer goroutine (none is running). Only the reader
// pushes.
func (q *replyQueue) push(p pending) (startWriter bool) {
	q.mu.Lock()
	for len(q.items)-q.head >= q.max {
		// Full: a writer runs, and its next pop wakes us.
		if q.room == nil {
			q.room = make(chan struct{}, 1)
		}
		q.roomWait = true
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	if len(q.items) == cap(q.items) && q.head > 0 {
		// Reuse the popped front rather than grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	if q.items == nil {
		q.items = q.one[:0]
	}
	q.items = append(q.items, p)
	if !q.writing {
		q.writing, startWriter = true, true
		q.writers.Add(1)
	}
	q.mu.Unlock()
	return startWriter
}

// pop returns the oldest entry. On false the queue is empty and the
// writer must end (calling writerDone): the next push starts another.
func (q *replyQueue) pop() (p pending, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		q.items, q.head = q.one[:0], 0
		q.writing = false
		return pending{}, false
	}
	p = q.items[q.head]
	q.items[q.head] = pending{}
	q.head++
	if q.roomWait {
		q.roomWait = false
		q.room <- struct{}{}
	}
	return p, true
}

// writerDone is the writer's last call.
func (q *replyQueue) writerDone() { q.writers.Done() }

// wait waits until everything queued is written (or dropped). Only the
// reader calls it, after its last push.
func (q *replyQueue) wait() { q.writers.Wait() }
