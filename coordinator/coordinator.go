package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// MarkerQueue takes the markers of a transaction whose Prepare is durable;
// *markersender.Sender implements it.
type MarkerQueue interface{ Enqueue(markersender.Txn) }

// Config configures a Coordinator. Zero durations take the defaults.
type Config struct {
	NodeID       int32
	KafkaVersion string
	View         *cluster.View
	Store        txnlog.Store
	Markers      MarkerQueue
	// EarlyMarkers hands a Prepare's markers to Markers as soon as the
	// Prepare is queued in a Submitter store, gated by Txn.Durable, which
	// Markers must honour (markersender does: only leaders that append to
	// the same log get them early). `txncoord up` sets it: Prepare,
	// markers and Complete then share one group commit. Otherwise the
	// markers are enqueued once the Prepare is durable.
	EarlyMarkers bool
	Now          func() time.Time
	// AbortScanInterval is how often timed-out transactions are aborted
	// and idle ids expired (default 10 s, Kafka's).
	AbortScanInterval time.Duration
	// IDExpiration removes an Empty/Complete* id idle that long (default
	// 7 days, transactional.id.expiration.ms).
	IDExpiration time.Duration
	// MaxTransactionTimeout caps InitProducerId timeouts (default 15 min,
	// transaction.max.timeout.ms); above it INVALID_TRANSACTION_TIMEOUT.
	MaxTransactionTimeout time.Duration
	// PIDBlockSize is how many producer ids one durable reservation
	// covers (default 1000).
	PIDBlockSize int64
	Log          zerolog.Logger
	Metrics      prometheus.Registerer // may be nil
}

// Coordinator owns every transaction's state. Requests for one
// transactional id are serialized by that id's entry lock; different ids
// proceed in parallel, so their writes share the store's group commits.
type Coordinator struct {
	cfg   Config
	epoch int32
	log   zerolog.Logger
	pids  *pidAllocator
	// endTxnLatency is observed even without a registry (cheap), so
	// handlers need no nil checks.
	endTxnLatency *prometheus.HistogramVec

	mu      sync.Mutex
	txns    map[string]*entry
	closing bool

	ctx    context.Context // cancelled by Close, after in-flight writes end
	cancel context.CancelFunc
	wg     sync.WaitGroup // transitions in flight and the scan loop
	stop   chan struct{}

	counters counters
}

type counters struct {
	initPID, addPartitions, addOffsets, endTxn, timeoutAborts, fenceAborts, operatorAborts, completions, expirations, stuck atomic.Uint64
}

// entry is one transactional id. mu guards every field.
type entry struct {
	mu sync.Mutex
	md *Metadata // nil: no stored metadata
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
	// stuck is the marker sender's reason why a Prepare cannot complete.
	stuck   string
	deleted bool
	// changed is closed (and replaced) after every write of this entry
	// ends, so a request refused with CONCURRENT_TRANSACTIONS can wait for
	// the transition in its way instead of a client-side backoff.
	changed chan struct{}
}

// changedCh returns the channel closed at the entry's next write; e must be
// locked.
func (e *entry) changedCh() chan struct{} {
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// notifyChanged wakes the waiters of changedCh; e must be locked.
func (e *entry) notifyChanged() {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// Open loads the store, bumps and persists the coordinator epoch, hands
// the markers of every Prepare* transaction to the marker sender (with the
// new epoch) and starts the timeout scan.
func Open(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil || cfg.Markers == nil || cfg.View == nil {
		return nil, errors.New("coordinator: Store, Markers and View are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AbortScanInterval <= 0 {
		cfg.AbortScanInterval = 10 * time.Second
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.MaxTransactionTimeout <= 0 {
		cfg.MaxTransactionTimeout = 15 * time.Minute
	}
	if cfg.PIDBlockSize <= 0 {
		cfg.PIDBlockSize = 1000
	}
	loaded, err := cfg.Store.Load()
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	c := &Coordinator{cfg: cfg, log: cfg.Log, txns: make(map[string]*entry, len(loaded.Txns)), stop: make(chan struct{}), endTxnLatency: newEndTxnLatency()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// The new epoch and the first pid block are durable before any marker
	// or producer id uses them (invariant 3: the epoch strictly increases).
	c.epoch = loaded.CoordinatorEpoch + 1
	c.pids = &pidAllocator{store: cfg.Store, block: cfg.PIDBlockSize, next: loaded.ProducerIDHighWater, limit: loaded.ProducerIDHighWater + cfg.PIDBlockSize}
	if err := cfg.Store.Apply(c.ctx, txnlog.Batch{CoordinatorEpoch: c.epoch, ProducerIDHighWater: c.pids.limit}); err != nil {
		return nil, fmt.Errorf("coordinator: persisting coordinator epoch: %w", err)
	}
	var resend []markersender.Txn
	for id, m := range loaded.Txns {
		m := m
		c.txns[id] = &entry{md: &m}
		if t := txncore.OutstandingMarkers(&m); t != nil {
			resend = append(resend, senderTxn(*t))
		}
	}
	c.log.Info().Int32("coordinator_epoch", c.epoch).Int("transactions", len(loaded.Txns)).Int("prepared", len(resend)).Msg("coordinator loaded")
	c.registerMetrics()
	for _, txn := range resend {
		c.sendMarkers(txn)
	}
	c.wg.Add(1)
	go c.scanLoop()
	return c, nil
}

// Epoch is the coordinator epoch stamped into every marker.
func (c *Coordinator) Epoch() int32 { return c.epoch }

// Close stops the scan and waits for transitions in flight. It does not
// close the store (the caller owns it).
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
	c.cancel()
	return nil
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// entry returns the entry of id, creating it when create is set.
func (c *Coordinator) entry(id string, create bool) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.txns[id]
	if e == nil && create {
		e = &entry{}
		c.txns[id] = e
	}
	return e
}

// lock returns id's entry locked, or nil (unlocked) when it does not exist
// and create is false.
func (c *Coordinator) lock(id string, create bool) *entry {
	for {
		e := c.entry(id, create)
		if e == nil {
			return nil
		}
		e.mu.Lock()
		if !e.deleted {
			return e
		}
		e.mu.Unlock() // expired meanwhile: look again
	}
}

// storeErrorCode is the answer when the store cannot persist a transition:
// KAFKA_STORAGE_ERROR once the store has stopped on a failed write
// (fail-stop: nothing is written until a restart, and a client must see
// that at once rather than retry into a hang), else
// COORDINATOR_NOT_AVAILABLE, which clients retry after rediscovering the
// coordinator.
func (c *Coordinator) storeErrorCode() int16 {
	if c.storeFailed() != nil {
		return kerr.KafkaStorageError.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// storeFailed is the store's fail-stop error, nil while it writes (or when
// the store cannot tell).
func (c *Coordinator) storeFailed() error {
	if f, ok := c.cfg.Store.(interface{ Err() error }); ok {
		return f.Err()
	}
	return nil
}

// write is one queued store write of an entry.
type write struct {
	done chan struct{} // closed when it ended
	err  error         // set before done is closed
	code int16         // the answer err maps to (storeErrorCode)
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

// step runs decide for id under its lock. If the outcome persists
// something, the write is queued and runs in a goroutine owned by the
// coordinator; Err is set to storeErrorCode() if it fails. Markers are sent only
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
		pid, err := c.pids.nextID(c.ctx)
		if err != nil && pidErr == nil {
			pidErr = err
		}
		return pid
	}
	done := make(chan struct{})
	d := &decision{done: done}
	e := c.lock(id, create)
	var cur *Metadata
	pending := false
	speculated := false
	if e != nil {
		cur, pending = e.md, e.pending
		if speculate && e.inflight > 0 && e.spec != nil {
			cur, pending, speculated = e.spec, false, true
		}
		d.changed = e.changedCh()
	}
	d.Outcome = decide(cur, pending, pids)
	if pidErr != nil {
		c.log.Error().Err(pidErr).Str("txn_id", id).Msg("producer id block not durable")
		d.Outcome = fail(c.storeErrorCode())
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
	batch := txnlog.Batch{}
	var state *Metadata
	if d.Delete {
		batch.Deletes = []string{id}
	} else {
		md := d.Persist.Clone()
		state = &md
		batch.Puts = []txnlog.TxnMetadata{d.Persist.Clone()}
	}
	e.pending = true
	e.inflight++
	e.spec = state
	e.nextSeq++
	seq := e.nextSeq
	w := &write{done: make(chan struct{})}
	d.own = w
	prev := e.last
	e.last = w
	// Queue the write now, under the entry lock, so one id's writes
	// reach the store in decision order.
	var result <-chan error
	if sub, ok := c.cfg.Store.(txnlog.Submitter); ok {
		result = sub.Submit(batch)
	}
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
	if d.Markers != nil && result != nil && c.cfg.EarlyMarkers {
		durable = make(chan struct{})
		m := senderTxn(*d.Markers)
		m.Durable = durable
		c.sendMarkers(m)
	}
	go func() {
		defer c.wg.Done()
		var err error
		if result != nil {
			select {
			case err = <-result:
			case <-c.ctx.Done():
				err = c.ctx.Err()
			}
			// Finish in queue order too: a later write's goroutine may
			// wake first, and would otherwise send a Prepare's markers
			// while the entry still counts the earlier write as in
			// flight, so their completion would be refused as pending.
			if prev != nil {
				<-prev.done
			}
		} else {
			if prev != nil {
				<-prev.done // a store without Submit: keep the order by waiting
			}
			err = c.cfg.Store.Apply(c.ctx, batch)
		}
		e.mu.Lock()
		e.inflight--
		e.pending = e.inflight > 0
		if err == nil && seq > e.durableSeq {
			e.durableSeq = seq
			if d.Delete {
				c.forget(id, e)
			} else {
				e.md = state
				if txncore.OutstandingMarkers(state) == nil {
					e.stuck = ""
				}
			}
		}
		if e.inflight == 0 {
			e.spec = nil
			if e.md == nil {
				c.forget(id, e)
			}
		}
		w.err = err
		if err != nil {
			w.code = c.storeErrorCode()
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
			} else {
				c.log.Error().Err(err).Str("txn_id", id).Msg("transaction log write failed")
			}
			d.Outcome = fail(w.code)
			close(done)
			return
		}
		markers := d.Markers
		if durable != nil {
			close(durable)
			markers = nil // sent already, gated on durable
		}
		close(done)
		// Durable: now the markers may go out (invariant 1 for the
		// answer, which the caller releases on done).
		if markers != nil {
			c.sendMarkers(senderTxn(*markers))
		}
	}()
	return d
}

// forget drops an entry from the map; e must be locked.
func (c *Coordinator) forget(id string, e *entry) {
	e.deleted = true
	c.mu.Lock()
	if c.txns[id] == e {
		delete(c.txns, id)
	}
	c.mu.Unlock()
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

func (c *Coordinator) sendMarkers(txn markersender.Txn) {
	txn.CoordinatorEpoch = c.epoch
	c.log.Debug().Str("txn_id", txn.TransactionalID).Int64("pid", txn.ProducerID).Int16("epoch", txn.ProducerEpoch).
		Int8("tv", txn.TransactionVersion).Bool("commit", txn.Commit).Int("partitions", len(txn.Partitions)).Msg("markers enqueued")
	if len(txn.Partitions) == 0 {
		// Nothing to mark (an abort bump of an empty transaction):
		// complete at once.
		c.MarkersWritten(txn)
		return
	}
	c.cfg.Markers.Enqueue(txn)
}

// MarkersWritten persists Complete* once every marker of txn is written
// (invariant 2). The write runs in the background; a completion that does
// not match the stored Prepare* is ignored.
func (c *Coordinator) MarkersWritten(txn markersender.Txn) {
	if txn.CoordinatorEpoch != 0 && txn.CoordinatorEpoch != c.epoch {
		c.log.Info().Str("txn_id", txn.TransactionalID).Int32("coordinator_epoch", txn.CoordinatorEpoch).Msg("completion from an older coordinator epoch ignored")
		return
	}
	now := c.nowMs()
	wasPending := false
	// Markers written by leaders of this process may not be durable yet:
	// Complete is appended after them to the same log, so it is durable
	// only if they are (invariant 2).
	// Decided on the Prepare in flight, if any (speculate): the markers
	// may have been written before the Prepare was durable (sendMarkers'
	// Durable gate), and Complete, queued behind it, shares its commit.
	d := c.stepWith(txn.TransactionalID, false, true, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
		wasPending = pending
		return txncore.Complete(cur, pending, coreMarkers(txn), now)
	})
	if d.own == nil && wasPending && d.changed != nil {
		// Another write of the id is still finishing: try again when it
		// has, rather than leave the transaction in Prepare*.
		c.background(func() {
			select {
			case <-d.changed:
				c.MarkersWritten(txn)
			case <-c.stop:
			}
		})
		return
	}
	if d.own == nil { // not d.Persist: a failing write may already be rewriting d.Outcome
		c.log.Warn().Str("txn_id", txn.TransactionalID).Int64("pid", txn.ProducerID).Int16("epoch", txn.ProducerEpoch).Msg("markers written for a transaction not in that Prepare state: ignored")
		return
	}
	c.counters.completions.Add(1)
	// A failed Complete write is retried, or the transaction would sit in
	// Prepare* until the next restart.
	c.background(func() {
		if d.wait().Err == 0 || c.storeFailed() != nil {
			return // done, or nothing is written until a restart, which resends the markers
		}
		select {
		case <-c.stop:
		case <-time.After(time.Second):
			c.MarkersWritten(txn)
		}
	})
}

// background runs fn on a goroutine Close waits for, unless Close has
// begun (then fn never runs).
func (c *Coordinator) background(fn func()) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// MarkersStuck remembers why a transaction's markers cannot be applied; the
// transaction stays in Prepare* and the reason shows in Describe and List.
func (c *Coordinator) MarkersStuck(txn markersender.Txn, tp markersender.TopicPartition, reason string) {
	e := c.lock(txn.TransactionalID, false)
	if e == nil {
		return
	}
	defer e.mu.Unlock()
	e.stuck = fmt.Sprintf("%s-%d: %s", tp.Topic, tp.Partition, reason)
	c.counters.stuck.Add(1)
	// The marker sender logged it, once, with the reason (invariant 6's
	// one log line); a second line here would make it two.
}

func (c *Coordinator) serverTV() int16 { return c.cfg.View.TransactionVersion() }

// scanLoop aborts timed-out transactions and expires idle ids.
func (c *Coordinator) scanLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.AbortScanInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.scan()
		}
	}
}

// scan runs one timeout/expiry pass. It waits for nothing: writes complete
// in the background.
func (c *Coordinator) scan() {
	now := c.nowMs()
	idle := c.cfg.IDExpiration.Milliseconds()
	// A cheap look under each entry's lock first: with a million idle
	// ids, a full step (closures, channels) per id every 10 s would cost
	// seconds of CPU. step decides again under the lock for candidates.
	type idEntry struct {
		id string
		e  *entry
	}
	c.mu.Lock()
	entries := make([]idEntry, 0, len(c.txns))
	for id, e := range c.txns {
		entries = append(entries, idEntry{id, e})
	}
	c.mu.Unlock()
	var ids []string
	for _, ie := range entries {
		id, e := ie.id, ie.e
		e.mu.Lock()
		if e.md != nil && !e.pending && (txncore.TimedOut(e.md, now) || txncore.Expired(e.md, false, now, idle)) {
			ids = append(ids, id)
		}
		e.mu.Unlock()
	}
	for _, id := range ids {
		var what string
		c.step(id, false, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
			switch {
			case cur == nil || pending:
			case txncore.TimedOut(cur, now):
				what = "timeout"
				return txncore.AbortTimedOut(cur, pending, now, c.serverTV(), pids)
			case txncore.Expired(cur, pending, now, idle):
				what = "expire"
				return Outcome{Delete: true}
			}
			return Outcome{}
		})
		switch what {
		case "timeout":
			c.counters.timeoutAborts.Add(1)
			c.log.Info().Str("txn_id", id).Msg("aborting timed-out transaction")
		case "expire":
			c.counters.expirations.Add(1)
			c.log.Info().Str("txn_id", id).Msg("expiring idle transactional id")
		}
	}
}

// pidAllocator hands out producer ids from blocks whose end is durable
// before any id of the block is used, so a restart never reuses an id.
type pidAllocator struct {
	mu          sync.Mutex
	store       txnlog.Store
	block       int64
	next, limit int64
}

func (a *pidAllocator) nextID(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.limit {
		if err := a.store.Apply(ctx, txnlog.Batch{ProducerIDHighWater: a.limit + a.block}); err != nil {
			return -1, err
		}
		a.limit += a.block
	}
	id := a.next
	a.next++
	return id, nil
}
