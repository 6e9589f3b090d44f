package coordinator

// One transactional id's writes, as positions in the store's log.
//
// A decision is taken under the id's lock on its durable state (md), or,
// for the pipelined requests (AddPartitionsToTxn, EndTxn, the completion of
// markers), on the state the last write in flight writes (its spec). The
// write is submitted to the store under the same lock, so one id's writes
// enter the log in decision order, and a log is durable in order: a write
// is durable only with every write of the id before it. Nothing waits on a
// goroutine of its own: the entry reads what is durable from the log's
// position (settle), an answer waits for the position it rests on
// (decision.wait), and one callback per write (written) wakes the
// requests that wait for the id's next change.
//
// The ordering duties, enforced here and in the handlers:
//   - an answer that acknowledges a write waits until its position is
//     durable (invariant 1), except to a caller appending to the same log
//     (durable.Shares: a leader of `txncoord up`), whose own next write
//     carries it;
//   - a Prepare's markers are handed to the marker sender when the Prepare
//     is decided, with its position: the sender gives them only to leaders
//     appending to the same log until that position is durable, and to
//     every leader after (markersender.Txn.At);
//   - a Complete is decided once every marker is written and submitted
//     behind the Prepare, so it is never durable before the Prepare, and,
//     in `txncoord up`, before the markers the leaders appended to the
//     same log.
//
// testdata/idqueue.txt replays it write by write (TestIDQueueScenarios).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// idQueue is the part of an entry that orders its writes. The entry's lock
// guards it.
type idQueue struct {
	md *Metadata // the durable state; nil: no stored metadata
	// writes are the writes submitted and not known durable, oldest
	// first. While there are some, other requests for the id get
	// CONCURRENT_TRANSACTIONS where Kafka does, except the pipelined
	// ones, which are decided on the last one's state.
	writes []write
}

// write is one submitted write of an entry.
type write struct {
	pos   durable.Pos
	state *Metadata // what it puts; nil for a delete
}

// settle moves the writes log has made durable into md, and drops every
// write when log failed (none of them will be): md is then the last
// durable state.
func (q *idQueue) settle(log durable.Log) {
	if len(q.writes) == 0 {
		return
	}
	d := log.Durable()
	n := 0
	for n < len(q.writes) && q.writes[n].pos <= d {
		q.md = q.writes[n].state
		n++
	}
	if n < len(q.writes) && log.Err() != nil {
		n = len(q.writes)
	}
	if n > 0 {
		clear(q.writes[:n])
		if n == len(q.writes) {
			q.writes = q.writes[:0] // the next write reuses the array
		} else {
			q.writes = q.writes[n:]
		}
	}
}

func (q *idQueue) pending() bool { return len(q.writes) > 0 }

// settleWrites is settle for an entry: once nothing is in flight and no
// marker is outstanding, the marker sender's stuck reason no longer holds
// (whoever settles first, the log's writer or a Describe, clears it).
func (e *entry) settleWrites(log durable.Log) {
	e.settle(log)
	if e.stuck != "" && !e.pending() && e.md != nil && txncore.OutstandingMarkers(e.md) == nil {
		e.stuck = ""
	}
}

// last is the position of the last write in flight (0: none).
func (q *idQueue) last() durable.Pos {
	if len(q.writes) == 0 {
		return 0
	}
	return q.writes[len(q.writes)-1].pos
}

// view is what a decision is taken on: the durable state and whether a
// write is pending, or with speculate, while writes are in flight, the
// state the last of them writes (then not pending: it is queued behind).
func (q *idQueue) view(speculate bool) (cur *Metadata, pending, speculated bool) {
	if speculate && len(q.writes) > 0 {
		if spec := q.writes[len(q.writes)-1].state; spec != nil {
			return spec, false, true
		}
	}
	return q.md, q.pending(), false
}

// decision is a core step's result and the position its answer rests on.
type decision struct {
	Outcome // as decided; wait says whether the write behind it failed
	log     durable.Log
	// pos is the write the answer rests on: the decision's own (own), or,
	// for a decision on a state not yet durable that writes nothing, the
	// last write in flight. 0: nothing (answer at once).
	pos durable.Pos
	own bool
	// e is the id's entry (nil: the id has none) and gen its change
	// count when decided: changed waits for the next change after it.
	e   *entry
	gen uint64
	// co answers a failure of the write at pos (writeErrorCode).
	co *Coordinator
	// short: deciding it needed a producer id the reserved blocks had
	// no more of (tryStep decides again once they are refilled).
	short bool
	// put is the storage of the write's one put (txnlog.Batch.Puts), so
	// that a step allocates its decision and nothing else for it.
	put [1]Metadata
}

// NextPID makes d the PIDSource of the step deciding it.
func (d *decision) NextPID() int64 {
	pid, ok := d.co.pids.next()
	if !ok {
		d.short = true
	}
	return pid
}

// changed returns a channel closed at the entry's next change after the
// decision (a write submitted or made durable): closed already when one
// came since, nil when the id had no entry. Made on demand: most decisions
// are never waited on.
func (d *decision) changed() <-chan struct{} {
	if d.e == nil {
		return nil
	}
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	if d.e.gen != d.gen {
		return closedCh
	}
	return d.e.changedCh()
}

// closedCh is a closed channel: a change that came already.
var closedCh = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// wait blocks until the write the answer rests on is durable and returns
// the outcome: the decided one, or the failure's when its own write
// failed, or when the write it rests on failed and it decided no error.
func (d *decision) wait(ctx context.Context) Outcome {
	if d.pos == 0 {
		return d.Outcome
	}
	if err := d.log.WaitDurable(ctx, d.pos); err != nil && (d.own || d.Err == 0) {
		return fail(d.co.writeErrorCode(err))
	}
	return d.Outcome
}

// peek is the outcome as known without waiting: the decided one, unless
// the write it rests on has failed already. It is what a caller answered
// at append (durable.Shares) gets.
func (d *decision) peek() Outcome {
	if d.pos == 0 || d.log.Durable() >= d.pos {
		return d.Outcome
	}
	if err := d.log.Err(); err != nil && (d.own || d.Err == 0) {
		return fail(d.co.writeErrorCode(err))
	}
	return d.Outcome
}

// step runs decide for id under its lock. An outcome that persists
// something is submitted to the store at once; its answer waits for the
// position (decision.wait), and its markers go to the sender with it.
//
// Pipelining: with speculate set, a request that meets writes in flight is
// decided on the state the last of them writes instead of being refused
// with CONCURRENT_TRANSACTIONS; its own write goes behind them in the log,
// and an answer that writes nothing rests on the last write in flight. So
// a TV2 producer's registration from its second leader, or its next
// transaction's first one right after Complete was decided, shares a
// group commit with the write before it instead of waiting a whole fsync
// for it.
func (c *Coordinator) step(id string, create bool, decide func(cur *Metadata, pending bool, pids PIDSource) Outcome) *decision {
	return c.stepWith(id, stepOpts{create: create}, decide)
}

// stepOpts are how a step decides and writes.
type stepOpts struct {
	create    bool // the id may be new
	speculate bool // decide on the state of the writes in flight (above)
	// urgency: how soon the write must be durable (txnlog.Batch.Urgency):
	// durable.Lazy when nobody waits for it now (its caller appends to the
	// same log, or nobody is answered).
	urgency durable.Urgency
}

func (c *Coordinator) stepWith(id string, o stepOpts, decide func(cur *Metadata, pending bool, pids PIDSource) Outcome) *decision {
	for {
		d, short := c.tryStep(id, o, decide)
		if !short {
			return d
		}
		// The producer-id block ran out: wait for the next one off the
		// id's lock and decide again.
		if err := c.pids.refill(c.ctx); err != nil {
			c.log.Error().Err(err).Str("txn_id", id).Msg("producer id block not durable")
			return &decision{Outcome: fail(c.writeErrorCode(err))}
		}
	}
}

// tryStep is one attempt of stepWith; short reports that decide needed a
// producer id the reserved blocks had no more of (nothing was written).
func (c *Coordinator) tryStep(id string, o stepOpts, decide func(cur *Metadata, pending bool, pids PIDSource) Outcome) (*decision, bool) {
	d := &decision{log: c.storeLog, co: c}
	e := c.lock(id, o.create)
	var cur *Metadata
	pending, speculated := false, false
	if e != nil {
		e.settleWrites(c.storeLog)
		cur, pending, speculated = e.view(o.speculate)
		d.e, d.gen = e, e.gen
	}
	d.Outcome = decide(cur, pending, d)
	if d.short {
		if e != nil {
			e.mu.Unlock()
		}
		return nil, true
	}
	if d.Err == kerr.ConcurrentTransactions.Code && c.storeFailed() != nil {
		// What it would wait for (markers, a Complete) can never be
		// written until a restart: clients retry 51 forever (kgo's
		// InitProducerId does), so say why instead.
		d.Outcome = fail(kerr.KafkaStorageError.Code)
	}
	if e == nil || (d.Persist == nil && !d.Delete) {
		if e != nil {
			// An answer decided on a state not yet durable waits
			// for it, except CONCURRENT_TRANSACTIONS, which claims
			// nothing (and is what Kafka answers at once).
			if speculated && d.Err != kerr.ConcurrentTransactions.Code {
				d.pos = e.last()
			}
			if e.md == nil && !e.pending() {
				c.forget(id, e)
			}
			e.mu.Unlock()
		}
		return d, false
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		e.mu.Unlock()
		d.Outcome = fail(kerr.NotCoordinator.Code)
		return d, false
	}
	batch := txnlog.Batch{Urgency: o.urgency}
	var state *Metadata
	if d.Delete {
		batch.Deletes = []string{id}
	} else {
		// The write's state and the batch's put are one value, the
		// core's own (txncore.Outcome.Persist shares nothing with cur):
		// neither is changed after this.
		d.put[0] = *d.Persist
		batch.Puts = d.put[:]
		state = &d.put[0]
		d.Persist = state
	}
	pos, err := c.cfg.Store.Submit(batch)
	if err != nil {
		if e.md == nil && !e.pending() {
			c.forget(id, e)
		}
		e.mu.Unlock()
		c.logWriteFailure(id, err)
		d.Outcome = fail(c.writeErrorCode(err))
		return d, false
	}
	e.writes = append(e.writes, write{pos: pos, state: state})
	d.pos, d.own = pos, true
	// Under the id's lock, so its events are recorded in decision order.
	c.recordStep(cur, state)
	// Waiters for the next decision (a registration held back by a
	// Prepare) may now decide on top of this one.
	e.notifyChanged()
	if e.onWritten == nil {
		e.onWritten = func(err error) { c.written(id, e, err) }
	}
	onWritten := e.onWritten
	e.mu.Unlock()
	c.storeLog.OnDurable(pos, onWritten)
	if d.Markers != nil {
		c.sendMarkers(markersender.Txn{Markers: *d.Markers, At: c.storeLog, Pos: pos})
	}
	return d, false
}

// written is the outcome of one of e's writes, on the log's writer: the
// entry takes what is durable, forgets a deleted id, and wakes the
// requests waiting for its next change.
func (c *Coordinator) written(id string, e *entry, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settleWrites(c.storeLog)
	if !e.pending() && e.md == nil {
		c.forget(id, e)
	}
	e.notifyChanged()
	if err != nil {
		c.logWriteFailure(id, err)
	}
}

// logWriteFailure says why a write of id failed, once per write unless
// the store itself stopped (it said so once).
func (c *Coordinator) logWriteFailure(id string, err error) {
	switch {
	case c.storeFailed() != nil && !errors.Is(err, txnlog.ErrNotOwner):
		c.log.Debug().Err(err).Str("txn_id", id).Msg("transaction log write failed: the store has stopped")
	case errors.Is(err, txnlog.ErrNotOwner):
		// Not a fault here: another coordinator took the partition
		// over and this one was fenced out.
		c.log.Warn().Err(err).Str("txn_id", id).Msg("transaction log write refused: another coordinator owns the partition")
	default:
		c.log.Error().Err(err).Str("txn_id", id).Msg("transaction log write failed")
	}
}
