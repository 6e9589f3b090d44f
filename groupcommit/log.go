package groupcommit

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// Options configures a Log.
type Options struct {
	// NoSync skips fdatasync: acknowledged writes can be lost on a crash.
	// Only for the explicit --unsafe-no-fsync opt-in and benchmarks.
	NoSync bool
	// PerOp commits one op per Update (one fsync pair per write): the
	// baseline group commit is measured against.
	PerOp bool
	// OpenTimeout bounds waiting for the file lock (default 5 s), so a
	// second process on the same file fails instead of hanging.
	OpenTimeout time.Duration
	// Observe, if set, is called after each successful commit with what
	// it carried and cost, on the writer goroutine.
	Observe func(CommitStats)
}

// CommitStats describes one successful commit.
type CommitStats struct {
	Ops   int           // ops carried, of every space
	Pages int64         // pages written (data, then meta), 4 KiB each
	Took  time.Duration // the whole Update, fdatasyncs included
}

// ErrClosed answers ops submitted to a closed Log or Space that has no
// error of its own (SpaceOptions.Closed).
var ErrClosed = errors.New("groupcommit: closed")

// Log owns one bbolt file and its writer goroutine.
type Log struct {
	db   *bbolt.DB
	opts Options

	mu      sync.Mutex
	queue   []*op
	closing bool

	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// op is one queued write of one space.
type op struct {
	space   *Space
	apply   func(Root) error
	durable func()
	done    chan error
	// after are the ops this one is conditional on (SubmitAfter): ops of
	// the same Log, queued before it.
	after []*op
	// err is the op's result, written before finished is closed: what a
	// dependent op queued later checks (on the writer goroutine), and
	// Ticket.Wait reads, without consuming done.
	err      error
	finished chan struct{}
}

// end records the op's result and answers its caller.
func (o *op) end(err error) {
	o.err = err
	close(o.finished)
	o.done <- err
}

// finish answers the op's caller; the space stops counting it in flight.
func (o *op) finish(err error) {
	o.end(err)
	o.space.inFlight.Done()
}

// afterErr is the failure of an op this one is conditional on, nil if none
// failed. It runs on the writer goroutine when o is about to be applied: an
// op o depends on was queued before it, so it has ended or is earlier in
// the same batch (which is then applied first, in the same Update).
func (o *op) afterErr() error {
	for _, d := range o.after {
		select {
		case <-d.finished:
			if d.err != nil {
				return fmt.Errorf("%w: %w", ErrDependencyFailed, d.err)
			}
		default: // earlier in this batch
		}
	}
	return nil
}

// Open opens (creating) the bbolt file at path and starts its writer.
func Open(path string, opts Options) (*Log, error) {
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = 5 * time.Second
	}
	// NoFreelistSync and the hashmap freelist: one page less written per
	// commit and cheap allocation in a growing file. Committed data is as
	// durable as before: data pages, then the meta page, each fdatasync'd
	// in that order; the freelist is rebuilt by a scan at open.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.OpenTimeout, NoSync: opts.NoSync,
		NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	l := &Log{db: db, opts: opts, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.loop()
	return l, nil
}

// Close commits the ops already queued, refuses new ones and closes the
// file. Spaces of the log should be closed first; their later ops fail.
func (l *Log) Close() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.stopped
		err = l.db.Close()
	})
	return err
}

func (l *Log) enqueue(o *op) {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		o.finish(o.space.closedErr())
		return
	}
	l.queue = append(l.queue, o)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *Log) loop() {
	defer close(l.stopped)
	for {
		select {
		case <-l.wake:
			l.flush()
		case <-l.stop:
			l.mu.Lock()
			l.closing = true
			l.mu.Unlock()
			l.flush() // what was queued before Close
			return
		}
	}
}

// flush commits queued ops until the queue is empty.
func (l *Log) flush() {
	for {
		ops := l.take()
		if len(ops) == 0 {
			return
		}
		l.commit(ops)
	}
}

func (l *Log) take() []*op {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		return nil
	}
	if l.opts.PerOp {
		o := l.queue[0]
		l.queue = l.queue[1:]
		return []*op{o}
	}
	ops := l.queue
	l.queue = nil
	return ops
}

// commit writes ops in one Update. If it fails as a whole, each op is
// retried alone, in order.
func (l *Log) commit(ops []*op) {
	live := ops[:0:0]
	for _, o := range ops {
		if err := o.space.Err(); err != nil {
			o.finish(err) // a failed FailStop space: nothing after its failure applies
			continue
		}
		if err := o.afterErr(); err != nil {
			// As if its own commit had failed: a FailStop writer
			// applied it in memory already.
			o.space.failed(err)
			o.finish(err)
			continue
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	start, pages := time.Now(), int64(0)
	if l.opts.Observe != nil {
		pages = l.pagesWritten()
	}
	err := l.db.Update(func(tx *bbolt.Tx) error {
		for _, o := range live {
			root, err := o.space.root(tx)
			if err != nil {
				return err
			}
			if err := o.apply(root); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && len(live) > 1 {
		for _, o := range live {
			l.commit([]*op{o})
		}
		return
	}
	if err != nil {
		live[0].space.failed(err)
		live[0].finish(err)
		return
	}
	if l.opts.Observe != nil {
		l.opts.Observe(CommitStats{Ops: len(live), Took: time.Since(start), Pages: l.pagesWritten() - pages})
	}
	l.committed(live)
}

func (l *Log) pagesWritten() int64 {
	st := l.db.Stats()
	return st.TxStats.GetWrite()
}

// committed runs the durable callbacks in queue order, then tells each
// space how many of its ops the commit carried, then answers the callers.
func (l *Log) committed(ops []*op) {
	counts := map[*Space]int{}
	for _, o := range ops {
		if o.durable != nil {
			o.durable()
		}
		counts[o.space]++
	}
	for s, n := range counts {
		if s.opts.OnCommit != nil {
			s.opts.OnCommit(n)
		}
	}
	for _, o := range ops {
		o.finish(nil)
	}
}
