package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/txnetcd"
)

// leaseHolder runs one instance of a role of the cluster (the group
// coordinator, the topic controller) on whichever coordinator holds the
// role's etcd lease: an ownership.Member over a single partition, so
// exactly one live coordinator holds it at a time, with an epoch from etcd
// that rises at every takeover. On acquiring the lease it opens an
// instance whose writes are fenced by that lease (openAt); on losing it,
// or when the instance's store fails for good (its memory may then be
// ahead of or behind etcd), it closes the instance, and opens a new one
// from etcd while it still holds the lease.
type leaseHolder[T any] struct {
	member *ownership.Member
	// partition is the member's partition this holder follows (0 for a
	// role's single lease); events are its events.
	partition int32
	events    <-chan ownership.Event
	// sharedMember: the member is the caller's (one holder per partition
	// of it), so Close leaves it running.
	sharedMember bool
	role         string // for the log: "group coordinator", "controller"
	log          zerolog.Logger
	// openAt opens an instance writing under fence; failed closes it
	// and reloads (it must not be called before openAt returns).
	openAt  func(fence txnetcd.Fence, failed func(error)) (*T, error)
	closeT  func(*T) error
	current atomic.Pointer[T]

	mu     sync.Mutex // serializes opening and closing instances
	epoch  int32      // of the current instance (0: none)
	closed bool

	done chan struct{}
	wg   sync.WaitGroup
}

// newLeaseHolder returns a holder of m's lease; start follows it.
func newLeaseHolder[T any](m *ownership.Member, role string, log zerolog.Logger,
	openAt func(txnetcd.Fence, func(error)) (*T, error), closeT func(*T) error) *leaseHolder[T] {
	return &leaseHolder[T]{member: m, events: m.Events(), role: role, log: log, openAt: openAt, closeT: closeT, done: make(chan struct{})}
}

// newPartitionHolder returns a holder of partition p of m, whose events
// the caller passes on (one holder per partition of a shared member).
func newPartitionHolder[T any](m *ownership.Member, p int32, events <-chan ownership.Event, role string, log zerolog.Logger,
	openAt func(txnetcd.Fence, func(error)) (*T, error), closeT func(*T) error) *leaseHolder[T] {
	h := newLeaseHolder(m, role, log, openAt, closeT)
	h.partition, h.events, h.sharedMember = p, events, true
	return h
}

// start follows the lease until Close.
func (h *leaseHolder[T]) start() {
	h.wg.Add(1)
	go h.follow()
}

// Current is the instance this node runs, or nil.
func (h *leaseHolder[T]) Current() *T { return h.current.Load() }

// Holder is the node holding the lease, as etcd says.
func (h *leaseHolder[T]) Holder() (node, epoch int32, ok bool) { return h.member.Owner(h.partition) }

func (h *leaseHolder[T]) follow() {
	defer h.wg.Done()
	events := h.events
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				h.drop(-1, "lease member closed")
				return
			}
			if ev.Acquired {
				h.open(ev.Epoch)
			} else {
				h.drop(ev.Epoch, "lease lost")
			}
		case <-h.done:
			return
		}
	}
}

// open opens an instance at epoch, if this node still holds the lease
// with it.
func (h *leaseHolder[T]) open(epoch int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	fence, ok := h.member.Fence(h.partition)
	if !ok {
		return
	}
	if o, err := fence.Owner(); err != nil || o.Epoch != epoch {
		return // a later acquisition's event follows
	}
	h.closeLocked("reopened")
	c, err := h.openAt(fence, func(err error) { h.failed(epoch, err) })
	if err != nil {
		h.log.Error().Err(err).Int32("epoch", epoch).Msgf("%s not opened; retrying", h.role)
		h.retry(epoch)
		return
	}
	h.current.Store(c)
	h.epoch = epoch
	h.log.Info().Int32("epoch", epoch).Msgf("%s: serving (this node holds its lease)", h.role)
}

// failed is the instance's store failing for good (fenced out, or an etcd
// write failed): it is closed, and opened again from etcd while the lease
// is still held.
func (h *leaseHolder[T]) failed(epoch int32, err error) {
	h.log.Warn().Err(err).Int32("epoch", epoch).Msgf("%s's etcd writes failed: closing it, reloading from etcd if this node still holds the lease", h.role)
	go func() {
		h.drop(epoch, "etcd write failed")
		h.retry(epoch)
	}()
}

// retry opens an instance again after a pause, while this node holds the
// lease at epoch.
func (h *leaseHolder[T]) retry(epoch int32) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		select {
		case <-time.After(500 * time.Millisecond):
		case <-h.done:
			return
		}
		if _, e, ok := h.member.Owner(h.partition); ok && e == epoch {
			h.open(epoch)
		}
	}()
}

// drop closes the instance of epoch (any when epoch < 0).
func (h *leaseHolder[T]) drop(epoch int32, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch >= 0 && h.epoch != epoch {
		return
	}
	h.closeLocked(reason)
}

func (h *leaseHolder[T]) closeLocked(reason string) {
	c := h.current.Swap(nil)
	if c == nil {
		return
	}
	h.log.Info().Int32("epoch", h.epoch).Str("reason", reason).Msgf("%s: closed", h.role)
	h.epoch = 0
	h.closeT(c)
}

// Close closes the instance and releases the lease (the next holder takes
// over at once).
func (h *leaseHolder[T]) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.closeLocked("node stopping")
	h.mu.Unlock()
	close(h.done)
	var err error
	if !h.sharedMember {
		err = h.member.Close()
	}
	h.wg.Wait()
	return err
}
