package groupcommit

import (
	"fmt"
	"sync"

	"go.etcd.io/bbolt"
)

// Root is where a space's buckets live: the bbolt transaction itself for a
// space that owns the whole file, or its top-level bucket in a shared one.
// Both *bbolt.Tx and *bbolt.Bucket implement it.
type Root interface {
	Bucket(name []byte) *bbolt.Bucket
	CreateBucketIfNotExists(name []byte) (*bbolt.Bucket, error)
}

// SpaceOptions configures a Space.
type SpaceOptions struct {
	// FailStop refuses every op after the space's first failed one: the
	// writer's later ops assumed the earlier ones applied (a partition
	// leader's offsets), so memory is ahead of disk and the space must go
	// offline, as Kafka takes a failed log dir offline.
	FailStop bool
	// OnCommit is called after each commit that carried ops of this
	// space, with their number (one call per fsync round).
	OnCommit func(ops int)
	// Closed is the error ops get once the space is closed (ErrClosed
	// when nil).
	Closed error
}

// Space is one writer's part of a Log.
type Space struct {
	log   *Log
	name  []byte // nil: the whole file
	opts  SpaceOptions
	owned bool // Close closes the log too (OpenSpace)

	mu        sync.Mutex
	err       error
	closed    bool
	inFlight  sync.WaitGroup
	closeOnce sync.Once
}

// Space returns the space of the top-level bucket name (created if needed)
// in a shared file. Names must differ between writers.
func (l *Log) Space(name string, opts SpaceOptions) (*Space, error) {
	if name == "" {
		return nil, fmt.Errorf("groupcommit: a shared space needs a name")
	}
	if err := l.db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(name))
		return err
	}); err != nil {
		return nil, fmt.Errorf("groupcommit: space %q: %w", name, err)
	}
	return &Space{log: l, name: []byte(name), opts: opts}, nil
}

// OpenSpace opens a file with one space that owns all of it, in the
// file's own layout (buckets at the top level). Closing the space closes
// the file.
func OpenSpace(path string, opts Options, sopts SpaceOptions) (*Space, error) {
	l, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	return &Space{log: l, opts: sopts, owned: true}, nil
}

func (s *Space) root(tx *bbolt.Tx) (Root, error) {
	if s.name == nil {
		return tx, nil
	}
	b := tx.Bucket(s.name)
	if b == nil {
		return nil, fmt.Errorf("groupcommit: space %q has no bucket", s.name)
	}
	return b, nil
}

// Submit queues a write behind every write queued before it (on any space
// of the log) and returns at once. apply runs inside the shared Update;
// after that Update is durable, durable runs (in queue order, on the
// writer goroutine: keep it short) and the channel gets nil. On failure the
// channel gets the error and durable does not run. Callers that need their
// writes applied in order submit them in that order.
func (s *Space) Submit(apply func(Root) error, durable func()) <-chan error {
	return s.SubmitAfter(nil, apply, durable).Done()
}

// SubmitAfter is Submit for a write that must never be durable without
// the writes of after (tickets of this Log's ops, of any space, submitted
// before this call): see ticket.go. If one of them fails, this one fails
// with ErrDependencyFailed, is not applied, and stops a FailStop space as
// a failed commit would. A ticket of another Log fails it at once
// (ErrForeignTicket).
func (s *Space) SubmitAfter(after []Ticket, apply func(Root) error, durable func()) Ticket {
	o := &op{space: s, apply: apply, durable: durable, done: make(chan error, 1), finished: make(chan struct{})}
	for _, t := range after {
		if !t.Queued() {
			continue
		}
		if t.o.space.log != s.log {
			o.end(ErrForeignTicket)
			return Ticket{o}
		}
		o.after = append(o.after, t.o)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		o.end(s.closedErr())
		return Ticket{o}
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		o.end(err)
		return Ticket{o}
	}
	s.inFlight.Add(1)
	s.mu.Unlock()
	s.log.enqueue(o)
	return Ticket{o}
}

// Log is the Log the space writes in.
func (s *Space) Log() *Log { return s.log }

// View runs fn in a read-only transaction on the space's root.
func (s *Space) View(fn func(Root) error) error {
	return s.log.db.View(func(tx *bbolt.Tx) error {
		root, err := s.root(tx)
		if err != nil {
			return err
		}
		return fn(root)
	})
}

// Err is the failure that stopped a FailStop space (nil if none).
func (s *Space) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Space) failed(err error) {
	if !s.opts.FailStop {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("commit failed: %w", err)
	}
	s.mu.Unlock()
}

func (s *Space) closedErr() error {
	if s.opts.Closed != nil {
		return s.opts.Closed
	}
	return ErrClosed
}

// Close refuses new ops and waits until the ops already submitted are
// committed (or failed). A space from OpenSpace closes its file too.
func (s *Space) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.inFlight.Wait()
		if s.owned {
			err = s.log.Close()
		}
	})
	return err
}
