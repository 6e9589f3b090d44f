package ownership

import "sync"

// queue delivers events in order on out without ever blocking the
// producer: a slow consumer makes the queue grow, not the member stall.
type queue struct {
	mu     sync.Mutex
	items  []Event
	closed bool
	signal chan struct{}
	out    chan Event
}

func newQueue() *queue {
	q := &queue{signal: make(chan struct{}, 1), out: make(chan Event)}
	go q.deliver()
	return q
}

func (q *queue) push(e Event) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, e)
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// close delivers what is queued, then closes out.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *queue) deliver() {
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		closed := q.closed
		q.mu.Unlock()
		for _, e := range items {
			q.out <- e
		}
		if closed && len(items) == 0 {
			close(q.out)
			return
		}
		if len(items) == 0 {
			<-q.signal
		}
	}
}
