package coordinator

// One transactional id's writes: the queue every core decision that
// persists something goes through, and the decision its caller waits on.
//
// A decision is taken under the id's lock on the durable state (md), or,
// for the pipelined requests (AddPartitionsToTxn, EndTxn, the completion of
// markers), on the state the last write in flight writes (spec). Its write
// is submitted to the store at once, under the lock, so the store commits
// one id's writes in decision order; the writes then end in that order too
// (each waits for the one before it), and the newest durable one becomes
// md. There is one store path: a store without Submit is adapted by
// orderedApplier, which applies one id's writes one after another.
// testdata/idqueue.txt replays it step by step (TestIDQueueScenarios).

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// idQueue is the part of an entry that orders its writes. The entry's lock
// guards it.
type idQueue struct {
	md *Metadata // the durable state; nil: no stored metadata
	// pending is set while a transition is being persisted: other
	// requests for the id get CONCURRENT_TRANSACTIONS where Kafka does,
	// except the pipelined ones (AddPartitionsToTxn, EndTxn), which are
	// decided on spec and queued behind the writes in flight.
	pending bool
	// inflight counts the writes queued and not yet finished; spec is the
	// state the last of them writes (nil when none, or a delete).
	inflight int
	spec     *Metadata
	// last is the last write queued; durableSeq is the sequence number of
	// the newest write known durable (md is its state).
	last       *write
	nextSeq    uint64
	durableSeq uint64
}

// write is one queued store write of an entry.
type write struct {
	done  chan struct{} // closed when it ended
	err   error         // set before done is closed
	code  int16         // the answer err maps to (writeErrorCode)
	seq   uint64
	state *Metadata // what it puts; nil for a delete
}

// view is what a decision is taken on: the durable state and whether a
// write is pending, or with speculate, while writes are in flight, the
// state the last of them writes (then not pending: it is queued behind).
func (q *idQueue) view(speculate bool) (cur *Metadata, pending, speculated bool) {
	if speculate && q.inflight > 0 && q.spec != nil {
		return q.spec, false, true
	}
	return q.md, q.pending, false
}

// push queues o's write behind the writes in flight and submits it, so the
// store receives one id's writes in decision order. It returns the write
// and the one queued before it (nil when none).
func (q *idQueue) push(submit submitFunc, id string, o Outcome) (w, prev *write, result <-chan error) {
	batch := txnlog.Batch{}
	var state *Metadata
	if o.Delete {
		batch.Deletes = []string{id}
	} else {
		md := o.Persist.Clone()
		state = &md
		batch.Puts = []txnlog.TxnMetadata{o.Persist.Clone()}
	}
	q.pending = true
	q.inflight++
	q.spec = state
	q.nextSeq++
	w = &write{done: make(chan struct{}), seq: q.nextSeq, state: state}
	prev, q.last = q.last, w
	return w, prev, submit(id, batch)
}

// end records that w ended with err; w's predecessors have ended. durable
// reports that w's state is now the durable one (for a delete: the record
// is gone); idle that no write is left in flight.
func (q *idQueue) end(w *write, err error) (durable, idle bool) {
	q.inflight--
	q.pending = q.inflight > 0
	if err == nil && w.seq > q.durableSeq {
		q.durableSeq = w.seq
		durable = true
		if w.state != nil {
			q.md = w.state
		}
	}
	if q.inflight == 0 {
		q.spec = nil
	}
	return durable, q.inflight == 0
}

// submitFunc queues a batch of id's at the store; writes of one id
// submitted one after another are committed in that order.
type submitFunc func(id string, b txnlog.Batch) <-chan error

// storeSubmit is the store's one write path for the coordinator: Submit, or
// for a store without it, Apply in order per id (orderedApplier).
func storeSubmit(ctx context.Context, store txnlog.Store) (submit submitFunc, native bool) {
	if sub, ok := store.(txnlog.Submitter); ok {
		return func(_ string, b txnlog.Batch) <-chan error { return sub.Submit(b) }, true
	}
	a := &orderedApplier{ctx: ctx, store: store, tails: map[string]chan struct{}{}}
	return a.submit, false
}

// orderedApplier adapts a store without Submit: a write is applied once
// the one submitted before it for the same id has ended (other ids' writes
// run concurrently and share the store's group commits).
type orderedApplier struct {
	ctx   context.Context
	store txnlog.Store
	mu    sync.Mutex
	tails map[string]chan struct{} // per id, closed when its last submitted write ended
}

func (a *orderedApplier) submit(id string, b txnlog.Batch) <-chan error {
	out := make(chan error, 1)
	ended := make(chan struct{})
	a.mu.Lock()
	prev := a.tails[id]
	a.tails[id] = ended
	a.mu.Unlock()
	go func() {
		if prev != nil {
			<-prev
		}
		err := a.store.Apply(a.ctx, b)
		a.mu.Lock()
		if a.tails[id] == ended {
			delete(a.tails, id)
		}
		a.mu.Unlock()
		close(ended)
		out <- err
	}()
	return out
}

// decision is a core step's result after the durable write, if any.
type decision struct {
	Outcome
	done <-chan struct{} // closed once the write ended (or at once)
	// after, for a decision taken on a state not yet durable that writes
	// nothing itself, is the write it depends on: the answer waits for it
	// and fails if it failed.
	after *write
	// changed is closed at the entry's next write after this decision
	// (nil when the id has no entry).
	changed <-chan struct{}
	// decided is Err as decided, before any write failure; own is the
	// decision's own write (nil if it writes nothing). Both are set
	// before the write runs, so they can be read without waiting.
	decided int16
	own     *write
	// asDecided is the Outcome as decided, never rewritten: what an
	// answer that does not wait for the write (an in-process caller,
	// answered once appended) reads, while a failing write may be
	// replacing Outcome (now).
	asDecided Outcome
}

// now is the outcome as known without waiting: the final one (as wait
// gives it: a failed write the decision rests on fails it too) once every
// write it depends on ended, the decided one while one runs.
func (d *decision) now() Outcome {
	select {
	case <-d.done:
	default:
		return d.asDecided
	}
	if d.after != nil {
		select {
		case <-d.after.done:
		default:
			return d.asDecided
		}
	}
	return d.wait()
}

// wait blocks until d's write (or the write it depends on) ended.
func (d *decision) wait() Outcome {
	<-d.done
	if d.after != nil {
		<-d.after.done
		if d.after.err != nil && d.Err == 0 {
			return fail(d.after.code)
		}
	}
	return d.Outcome
}

// step runs decide for id under its lock. If the outcome persists
// something, the write is queued and runs in a goroutine owned by the
// coordinator; Err is set to writeErrorCode(err) if it fails. Markers are sent only
// after the write is durable.
//
// Pipelining: with speculate set, a request that meets writes in flight is
// decided on the state the last of them writes (spec) instead of being
// refused with CONCURRENT_TRANSACTIONS; its own write is queued behind
// them (the store commits one id's writes in order), and an answer that
// writes nothing waits for the last write in flight. So a TV2 producer's
// registration from its second leader, or its next transaction's first
// one right after Complete was decided, shares a group commit with the
// write before it instead of waiting a whole fsync for it.
func (c *Coordinator) step(id string, create bool, decide func(cur *Metadata, pending bool, pids PIDSource) Outcome) *decision {
	return c.stepWith(id, create, false, decide)
}

func (c *Coordinator) stepWith(id string, create, speculate bool, decide func(cur *Metadata, pending bool, pids PIDSource) Outcome) *decision {
	var pidErr error
	pids := func() int64 {
		pid, err := c.pids.NextID(c.ctx)
		if err != nil && pidErr == nil {
			pidErr = err
		}
		return pid
	}
	done := make(chan struct{})
	d := &decision{done: done}
	e := c.lock(id, create)
	var cur *Metadata
	pending, speculated := false, false
	if e != nil {
		cur, pending, speculated = e.view(speculate)
		d.changed = e.changedCh()
	}
	d.Outcome = decide(cur, pending, pids)
	if pidErr != nil {
		c.log.Error().Err(pidErr).Str("txn_id", id).Msg("producer id block not durable")
		d.Outcome = fail(c.writeErrorCode(pidErr))
	}
	if d.Err == kerr.ConcurrentTransactions.Code && c.storeFailed() != nil {
		// What it would wait for (markers, a Complete) can never be
		// written until a restart: clients retry 51 forever (kgo's
		// InitProducerId does), so say why instead.
		d.Outcome = fail(kerr.KafkaStorageError.Code)
	}
	d.decided, d.asDecided = d.Err, d.Outcome
	if e == nil || (d.Persist == nil && !d.Delete) {
		if e != nil {
			// An answer decided on a state not yet durable waits
			// for it, except CONCURRENT_TRANSACTIONS, which claims
			// nothing (and is what Kafka answers at once).
			if speculated && d.Err != kerr.ConcurrentTransactions.Code {
				d.after = e.last
			}
			if e.md == nil && !e.pending {
				c.forget(id, e)
			}
			e.mu.Unlock()
		}
		close(done)
		return d
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		e.mu.Unlock()
		d.Outcome = fail(kerr.NotCoordinator.Code)
		close(done)
		return d
	}
	c.wg.Add(1)
	c.mu.Unlock()
	w, prev, result := e.push(c.submit, id, d.Outcome)
	d.own = w
	// Waiters for the next decision (a registration held back by a
	// Prepare) may now decide on top of this one.
	e.notifyChanged()
	e.mu.Unlock()
	// With a store that queues writes in order, the markers go to the
	// sender at once, gated on this write: the sender holds them back
	// from leaders in other processes until it is durable (invariant 1),
	// and hands them at once to the leaders of this process, which append
	// them to the same log after it. Prepare, markers and Complete then
	// share one group commit, and the log's order makes each durable only
	// with those before it.
	var durable chan struct{}
	if d.Markers != nil && c.earlyMarkers {
		durable = make(chan struct{})
		m := senderTxn(*d.Markers)
		m.Durable = durable
		c.sendMarkers(m)
	}
	go c.finish(id, e, d, done, w, prev, result, durable)
	return d
}

// finish waits for w (and, to end in queue order, for prev), makes its
// state the durable one, then releases the answer (done) and, unless
// they went early, the markers.
func (c *Coordinator) finish(id string, e *entry, d *decision, done chan struct{}, w, prev *write, result <-chan error, durable chan struct{}) {
	defer c.wg.Done()
	var err error
	select {
	case err = <-result:
	case <-c.ctx.Done():
		err = c.ctx.Err()
	}
	// Finish in queue order too: a later write's goroutine may wake
	// first, and would otherwise send a Prepare's markers while the entry
	// still counts the earlier write as in flight, so their completion
	// would be refused as pending.
	if prev != nil {
		<-prev.done
	}
	e.mu.Lock()
	madeDurable, idle := e.end(w, err)
	if madeDurable {
		if d.Delete {
			c.forget(id, e)
		} else if txncore.OutstandingMarkers(w.state) == nil {
			e.stuck = ""
		}
	}
	if idle && e.md == nil {
		c.forget(id, e)
	}
	w.err = err
	if err != nil {
		w.code = c.writeErrorCode(err)
	}
	close(w.done)
	e.notifyChanged()
	e.mu.Unlock()
	if err != nil {
		if durable != nil {
			// Never durable: the sender must not deliver it.
			if f, ok := c.cfg.Markers.(interface{ Forget(string) }); ok {
				f.Forget(id)
			}
		}
		if c.storeFailed() != nil {
			// The store logged the failure once; one line per
			// transaction would bury it.
			c.log.Debug().Err(err).Str("txn_id", id).Msg("transaction log write failed: the store has stopped")
		} else if w.code == kerr.NotCoordinator.Code {
			// Not a fault here: another coordinator took the
			// partition over and this one was fenced out.
			c.log.Warn().Err(err).Str("txn_id", id).Msg("transaction log write refused: another coordinator owns the partition")
		} else {
			c.log.Error().Err(err).Str("txn_id", id).Msg("transaction log write failed")
		}
		d.Outcome = fail(w.code)
		close(done)
		return
	}
	var markers *markersender.Txn
	if d.Markers != nil && durable == nil {
		m := senderTxn(*d.Markers)
		markers = &m
	}
	if durable != nil {
		close(durable) // the markers went early, gated on it
	}
	// Durable: now the markers may go out (invariant 1), before the
	// answer is released (done), so that an answered EndTxn always has
	// its markers queued. Enqueue does not wait.
	if markers != nil {
		c.sendMarkers(*markers)
	}
	close(done)
}
