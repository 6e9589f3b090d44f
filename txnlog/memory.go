package txnlog

import (
	"context"
	"errors"
	"sync"
)

// MemoryStore is the in-memory twin of BoltStore, for tests. Apply is
// "durable" at once.
type MemoryStore struct {
	mu     sync.Mutex
	state  LoadedState
	stats  Stats
	closed bool
	// failApply, when set, makes Apply fail with it (SetFailure).
	failApply error
}

// NewMemory returns an empty store.
func NewMemory() *MemoryStore {
	return &MemoryStore{state: LoadedState{Txns: map[string]TxnMetadata{}}}
}

// SetFailure makes every later Apply fail with err (nil clears it).
func (s *MemoryStore) SetFailure(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failApply = err
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

// Apply applies b.
func (s *MemoryStore) Apply(ctx context.Context, b Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.failApply != nil {
		return s.failApply
	}
	applyToState(&s.state, b)
	s.stats.Commits++
	s.stats.Batches++
	s.stats.Transitions += uint64(len(b.Puts) + len(b.Deletes))
	return nil
}

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

// Close marks the store closed.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("txnlog: store closed")
