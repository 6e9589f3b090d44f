package storage

import (
	"context"
	"fmt"
	"sync"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/wal"
)

// SpaceOptions configures a Space.
type SpaceOptions struct {
	// OnApplied is called, on the applier, after bbolt holds every record
	// up to the position it gets: the space may drop what it kept in
	// memory for reads until then.
	OnApplied func(wal.Pos)
	// Closed is the error appends get once the space is closed
	// (ErrClosed when nil).
	Closed error
	// OnCommit, when set, is called on the log's writer after each group
	// commit of the store that carried at least one of the space's
	// records (a node's share of the process log's fdatasyncs).
	OnCommit func(wal.SyncStats)
}

// Space is one component's part of a Store.
type Space struct {
	st   *Store
	name string // "": the whole file
	kind Kind
	opts SpaceOptions
	head []byte // recordHead: before each of the space's records in the log

	// uncommitted are the positions of the space's records not yet in a
	// group commit, oldest first (kept only with OnCommit; guarded by
	// the store's mu).
	uncommitted []wal.Pos

	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup
	once     sync.Once
}

// Space returns the space name (a top-level bucket; "" for the whole
// file) whose records kind applies. One component per name.
func (st *Store) Space(name string, kind Kind, opts SpaceOptions) (*Space, error) {
	if len(name) > 255 {
		return nil, fmt.Errorf("storage: space name %q too long", name)
	}
	if st.opts.Kinds[kind] == nil {
		return nil, fmt.Errorf("storage: space %q: no codec for kind %d", name, kind)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.spaces[name]; ok {
		return nil, fmt.Errorf("storage: space %q is open already", name)
	}
	if name != "" {
		if err := st.db.Update(func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists([]byte(name))
			return err
		}); err != nil {
			return nil, fmt.Errorf("storage: space %q: %w", name, err)
		}
	}
	sp := &Space{st: st, name: name, kind: kind, opts: opts, head: recordHead(kind, name)}
	st.spaces[name] = sp
	if opts.OnCommit != nil {
		st.committers = append(st.committers, sp)
	}
	return sp, nil
}

// Store is the store the space writes in.
func (s *Space) Store() *Store { return s.st }

// Append puts rec in the log behind every record appended before it (by
// any space) and returns its position at once. rec is the store's from
// then on (the applier reads it later): the caller must not change it. It is durable once the
// store is durable up to that position (Store.WaitDurable).
func (s *Space) Append(rec []byte) (wal.Pos, error) { return s.AppendWith(rec, durable.Gather) }

// AppendLazy is Append for a record nobody waits for now: the log commits
// it with the next record someone waits for, or after its lazy delay
// (wal.Log.AppendLazy), instead of starting a group commit for it.
func (s *Space) AppendLazy(rec []byte) (wal.Pos, error) { return s.AppendWith(rec, durable.Lazy) }

// AppendWith is Append with the urgency the caller knows (durable.Urgency):
// Append's is durable.Gather, AppendLazy's durable.Lazy.
func (s *Space) AppendWith(rec []byte, u durable.Urgency) (wal.Pos, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, s.closedErr()
	}
	s.mu.Unlock()
	return s.st.append(s, rec, nil, u)
}

// Submit appends rec and returns its position and a channel that gets nil
// once it is durable, or the store's failure. onDurable, if set, runs
// first, in log order with every other space's callbacks, on the log's
// writer: keep it short.
func (s *Space) Submit(rec []byte, onDurable func()) (wal.Pos, <-chan error) {
	ch := make(chan error, 1)
	pos, err := s.submit(rec, func(err error) {
		if err == nil && onDurable != nil {
			onDurable()
		}
		ch <- err
		s.inFlight.Done()
	}, durable.Gather)
	if err != nil {
		ch <- err
	}
	return pos, ch
}

// Write is a record submitted with SubmitTo: its position, and its
// outcome once the log has it durable or failed. It is Submit without a
// channel and a closure per record, for a component that appends a record
// per request: the caller keeps the Write in the struct the record is
// made from, so the write costs no allocation of its own.
type Write struct {
	pos     wal.Pos
	durable Durable
	sp      *Space
	err     error
	done    sync.WaitGroup
}

// Durable is what runs once a Write is durable, on the log's writer, in
// log order with every other space's callbacks: keep it short.
type Durable interface{ Durable() }

// SubmitTo submits rec as w, a zero Write that is not reused; u is
// AppendWith's, onDurable (may be nil) Submit's durable.
func (s *Space) SubmitTo(w *Write, rec []byte, onDurable Durable, u durable.Urgency) {
	w.durable, w.sp = onDurable, s
	w.done.Add(1)
	pos, err := s.submit(rec, w.finish, u)
	if err != nil {
		w.err = err
		w.done.Done()
		return
	}
	w.pos = pos
}

// finish is the write's outcome, on the log's writer (never on the
// submitting goroutine, whose caller may hold a lock durable takes: a
// leader's partition lock).
func (w *Write) finish(err error) {
	if err == nil && w.durable != nil {
		w.durable.Durable()
	}
	w.err = err
	w.sp.inFlight.Done()
	w.done.Done()
}

// Pos is the write's position in the log; 0 when the space refused it.
func (w *Write) Pos() wal.Pos { return w.pos }

// Wait blocks until the write is durable (nil) or failed.
func (w *Write) Wait() error {
	w.done.Wait()
	return w.err
}

// Refused is the error of a write the space refused at once (never
// appended), nil otherwise; it does not wait.
func (w *Write) Refused() error {
	if w.pos != 0 {
		return nil
	}
	return w.err
}

// submit appends rec with then to run once it is durable or failed; then
// must call s.inFlight.Done. On an error then never runs.
func (s *Space) submit(rec []byte, then func(error), u durable.Urgency) (wal.Pos, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, s.closedErr()
	}
	s.inFlight.Add(1)
	s.mu.Unlock()
	// The callback is registered with the append: it never runs on this
	// goroutine, whose caller may hold a lock it takes.
	pos, err := s.st.append(s, rec, then, u)
	if err != nil {
		s.inFlight.Done()
		return 0, err
	}
	return pos, nil
}

// View runs fn in a read-only transaction on the space's root. It sees
// what the applier has written: a component reads there what it does not
// keep in memory (OnApplied says when it may stop keeping it).
func (s *Space) View(fn func(Root) error) error {
	return s.st.db.View(func(tx *bbolt.Tx) error {
		root, err := spaceRoot(tx, s.name, false)
		if err != nil {
			return err
		}
		return fn(root)
	})
}

// Err is the failure that stopped the store's writes, nil if none.
func (s *Space) Err() error { return s.st.Err() }

// Failed is the store's Failed.
func (s *Space) Failed() <-chan struct{} { return s.st.Failed() }

func (s *Space) closedErr() error {
	if s.opts.Closed != nil {
		return s.opts.Closed
	}
	return ErrClosed
}

// Close refuses new appends, waits for the space's submitted records to be
// durable (or failed) and applies them to bbolt, so the space can be opened
// again in the same store and read everything it wrote.
func (s *Space) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.inFlight.Wait()
		if e := s.st.wal.WaitDurable(context.Background(), s.st.wal.Last()); e == nil {
			err = s.st.Apply()
		}
		s.st.mu.Lock()
		delete(s.st.spaces, s.name)
		s.st.mu.Unlock()
	})
	return err
}
