package coordinator

import (
	"context"
	"sync"
)

// ProducerIDBlocks reserves blocks of producer ids: Reserve returns the
// first of n ids that no one was, or will be, given, across restarts too.
// It may write (an fsync, an etcd compare-and-swap): the pool calls it off
// every id's lock, ahead of need.
type ProducerIDBlocks interface {
	Reserve(ctx context.Context, n int64) (first int64, err error)
}

// ProducerIDPool hands out producer ids from blocks reserved ahead. A core
// step takes ids without I/O (next); when the ids in hand fall to half a
// block the next block is reserved in the background, so a step finds the
// pool empty only in a burst of more than half a block of new producers
// within one reservation's time, and then waits for it off the id's lock
// (refill) and decides again. One pool may serve several coordinators (the
// partitions of a process on etcd).
type ProducerIDPool struct {
	blocks ProducerIDBlocks
	size   int64

	mu sync.Mutex
	// ranges are the ids in hand, [first, end) each, in order.
	ranges [][2]int64
	// reserving is closed when the reservation in flight ends (nil: none);
	// err is the last one's failure.
	reserving chan struct{}
	err       error
}

// NewProducerIDPool returns a pool reserving blocks of size ids from
// blocks; it holds no id until the first reservation (or add).
func NewProducerIDPool(blocks ProducerIDBlocks, size int64) *ProducerIDPool {
	if size <= 0 {
		size = 1000
	}
	return &ProducerIDPool{blocks: blocks, size: size}
}

// add puts [first, end) in hand (a block reserved by the caller).
func (p *ProducerIDPool) add(first, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if first < end {
		p.ranges = append(p.ranges, [2]int64{first, end})
	}
}

// next takes an id in hand, without I/O; false when none is left.
func (p *ProducerIDPool) next() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	left := int64(0)
	for _, r := range p.ranges {
		left += r[1] - r[0]
	}
	if left <= p.size/2 {
		p.reserveLocked()
	}
	if len(p.ranges) == 0 {
		return -1, false
	}
	id := p.ranges[0][0]
	if p.ranges[0][0]++; p.ranges[0][0] == p.ranges[0][1] {
		p.ranges = p.ranges[1:]
	}
	return id, true
}

// reserveLocked starts a reservation unless one is in flight.
func (p *ProducerIDPool) reserveLocked() {
	if p.reserving != nil {
		return
	}
	done := make(chan struct{})
	p.reserving = done
	go func() {
		first, err := p.blocks.Reserve(context.Background(), p.size)
		p.mu.Lock()
		p.err = err
		if err == nil {
			p.ranges = append(p.ranges, [2]int64{first, first + p.size})
		}
		p.reserving = nil
		p.mu.Unlock()
		close(done)
	}()
}

// refill waits until the pool holds an id again (a reservation ended with
// one), or returns the reservation's error, or ctx's.
func (p *ProducerIDPool) refill(ctx context.Context) error {
	for {
		p.mu.Lock()
		if len(p.ranges) > 0 {
			p.mu.Unlock()
			return nil
		}
		if p.reserving == nil && p.err != nil {
			err := p.err
			p.err = nil // the next wait tries again
			p.mu.Unlock()
			return err
		}
		p.reserveLocked()
		done := p.reserving
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NextID takes an id, waiting for a reservation when none is in hand: for
// callers outside a core step (an idempotent producer's InitProducerId).
func (p *ProducerIDPool) NextID(ctx context.Context) (int64, error) {
	for {
		if id, ok := p.next(); ok {
			return id, nil
		}
		if err := p.refill(ctx); err != nil {
			return -1, err
		}
	}
}
