package txnlog

import (
	"errors"
	"sync"

	"github.com/txncoord/txncoord/durable"
)

// MemoryStore is the in-memory twin of BoltStore, for tests: a batch is
// applied to the state when submitted, in order, and gets a position in a
// log of the store's own (a durable.Tracker), which makes it durable on
// another goroutine at once, or, after Hold, only when the test says
// (Release), as a disk would at its next fdatasync. Fail stops the log as
// a failed write stops the process log.
type MemoryStore struct {
	mu     sync.Mutex
	state  LoadedState
	stats  Stats
	closed bool
	held   bool
	log    durable.Tracker
}

// NewMemory returns an empty store.
func NewMemory() *MemoryStore {
	return &MemoryStore{state: LoadedState{Txns: map[string]TxnMetadata{}}}
}

// Load returns a deep copy of the state.
func (s *MemoryStore) Load() (LoadedState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.state
	out.Txns = make(map[string]TxnMetadata, len(s.state.Txns))
	for id, m := range s.state.Txns {
		out.Txns[id] = m.Clone()
	}
	return out, nil
}

// Submit applies b and returns its position; it is durable at once (on
// another goroutine) unless the store is held.
func (s *MemoryStore) Submit(b Batch) (durable.Pos, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	pos, err := s.log.Next(nil)
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	applyToState(&s.state, b)
	s.stats.Commits++
	s.stats.Batches++
	s.stats.Transitions += uint64(len(b.Puts) + len(b.Deletes))
	held := s.held
	s.mu.Unlock()
	if !held {
		// Never on the submitter's goroutine: it may hold a lock a
		// callback of the log takes.
		go s.log.Advance(pos)
	}
	return pos, nil
}

// Log is the store's own log.
func (s *MemoryStore) Log() durable.Log { return &s.log }

// Err is the failure Fail stopped the store with (ErrClosed after
// Close is not one: a closed store is not a failed disk).
func (s *MemoryStore) Err() error {
	if err := s.log.Err(); err != nil && err != ErrClosed {
		return err
	}
	return nil
}

// Hold keeps later batches from becoming durable until Release.
func (s *MemoryStore) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
}

// Resume ends Hold: every batch submitted is durable (on this goroutine),
// and later ones at once again.
func (s *MemoryStore) Resume() {
	s.mu.Lock()
	s.held = false
	s.mu.Unlock()
	s.log.Advance(s.log.Last())
}

// Release makes the n oldest batches not yet durable durable, and returns
// the position the log is durable up to.
func (s *MemoryStore) Release(n int) durable.Pos {
	p := min(s.log.Durable()+durable.Pos(n), s.log.Last())
	s.log.Advance(p)
	return s.log.Durable()
}

// Fail stops the store's log with err: every batch not durable yet fails,
// and every later Submit (fail-stop, as the process log after a failed
// write).
func (s *MemoryStore) Fail(err error) { s.log.Fail(err) }

func applyToState(st *LoadedState, b Batch) {
	for _, m := range b.Puts {
		st.Txns[m.TransactionalID] = m.Clone()
	}
	for _, id := range b.Deletes {
		delete(st.Txns, id)
	}
	if b.CoordinatorEpoch > 0 {
		st.CoordinatorEpoch = b.CoordinatorEpoch
	}
	if b.ProducerIDHighWater > st.ProducerIDHighWater {
		st.ProducerIDHighWater = b.ProducerIDHighWater
	}
}

// Stats returns the counters.
func (s *MemoryStore) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close marks the store closed; batches not durable yet fail with
// ErrClosed.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.log.Fail(ErrClosed)
	return nil
}

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("txnlog: store closed")
