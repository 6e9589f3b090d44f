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
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/txntimeline"
	"github.com/txncoord/txncoord/wire"
)

// MarkerQueue takes the markers of a transaction when its Prepare is
// decided, with the position of the Prepare's write (markersender.Txn.At,
// Pos), says which partitions have not acknowledged theirs, and drops them
// when the coordinator gives them up or resigns them;
// *markersender.Sender implements it.
type MarkerQueue interface {
	Enqueue(markersender.Txn)
	Undelivered(txnID string) []txncore.TopicPartition
	Forget(txnID string)
}

// Config configures a Coordinator. Zero durations take the defaults.
type Config struct {
	NodeID       int32
	KafkaVersion string
	View         *cluster.View
	Store        txnlog.Store
	Markers      MarkerQueue
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
	// PIDBlockSize is how many producer ids one reservation covers
	// (default 1000). Only the default pool uses it.
	PIDBlockSize int64
	// ProducerIDs, when set, is the pool every producer id comes from
	// instead of the default one, and Open then writes no producer-id
	// high-water mark to Store (only the coordinator epoch). With several
	// coordinators ids come from etcd blocks (one pool over
	// *txnetcd.Store shared by a process's partitions), and a
	// txnetcd.PartitionStore refuses high-water writes: two members'
	// stores would hand out the same ids. Nil (the single coordinator):
	// blocks reserved by raising Store's high-water mark.
	ProducerIDs *ProducerIDPool
	Log         zerolog.Logger
	Metrics     prometheus.Registerer // may be nil
	// EndTxnLatency, optional, is the EndTxn latency histogram to observe
	// (NewEndTxnLatency): one shared by the coordinators of several
	// partitions in a process (txnrouter), who register it themselves.
	EndTxnLatency *prometheus.HistogramVec
	// Timeline, optional, records each decided transition of recent
	// transactions (the admin API's timeline); the marker sender records
	// the markers into the same one.
	Timeline *txntimeline.Recorder
}

// Coordinator owns every transaction's state. Requests for one
// transactional id are serialized by that id's entry lock; different ids
// proceed in parallel, so their writes share the store's group commits.
type Coordinator struct {
	cfg   Config
	epoch int32
	log   zerolog.Logger
	pids  *ProducerIDPool
	// storeLog is cfg.Store's log: the positions of its writes.
	storeLog durable.Log
	// endTxnLatency is observed even without a registry (cheap), so
	// handlers need no nil checks.
	endTxnLatency *prometheus.HistogramVec

	mu      sync.Mutex
	txns    map[string]*entry
	closing bool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // background work and the scan loop
	stop   chan struct{}

	counters counters
	// reg is the node's registry (Register): whether it serves
	// WriteTxnMarkers decides whether __consumer_offsets has a leader.
	reg atomic.Pointer[wire.Registry]
}

type counters struct {
	initPID, addPartitions, addOffsets, endTxn, timeoutAborts, fenceAborts, operatorAborts, completions, expirations, stuck atomic.Uint64
}

// entry is one transactional id. mu guards every field, the queue's too.
type entry struct {
	mu sync.Mutex
	// idQueue holds the durable state (md) and the writes in flight.
	idQueue
	// stuck is the marker sender's reason why a Prepare cannot complete.
	stuck   string
	deleted bool
	// changed is closed (and replaced) after every write of this entry
	// ends, so a request refused with CONCURRENT_TRANSACTIONS can wait for
	// the transition in its way instead of a client-side backoff.
	changed chan struct{}
	// gen counts the changes (notifyChanged), so that a decision can
	// tell whether one came since it was made without a channel each.
	gen uint64
	// onWritten is the outcome callback of every write of the entry
	// (Coordinator.written), made at its first write, not at each.
	onWritten func(error)
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
	e.gen++
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
	c := &Coordinator{cfg: cfg, log: cfg.Log, txns: make(map[string]*entry, len(loaded.Txns)), stop: make(chan struct{}), endTxnLatency: cfg.EndTxnLatency}
	if c.endTxnLatency == nil {
		c.endTxnLatency = NewEndTxnLatency()
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.storeLog = cfg.Store.Log()
	// The new epoch and the first pid block are durable before any marker
	// or producer id uses them (invariant 3: the epoch strictly increases).
	// With a pool of its own the blocks are the pool's business.
	c.epoch = loaded.CoordinatorEpoch + 1
	first := txnlog.Batch{CoordinatorEpoch: c.epoch}
	if cfg.ProducerIDs != nil {
		c.pids = cfg.ProducerIDs
	} else {
		hw := loaded.ProducerIDHighWater
		first.ProducerIDHighWater = hw + cfg.PIDBlockSize
		c.pids = NewProducerIDPool(&highWaterBlocks{store: cfg.Store, hw: first.ProducerIDHighWater}, cfg.PIDBlockSize)
		c.pids.add(hw, first.ProducerIDHighWater)
	}
	if err := txnlog.Apply(c.ctx, cfg.Store, first); err != nil {
		c.cancel()
		return nil, fmt.Errorf("coordinator: persisting coordinator epoch: %w", err)
	}
	var resend []markersender.Txn
	for id, m := range loaded.Txns {
		m := m
		c.txns[id] = &entry{idQueue: idQueue{md: &m}}
		if t := txncore.OutstandingMarkers(&m); t != nil {
			resend = append(resend, markersender.Txn{Markers: *t})
		}
	}
	// Info only when it resends markers: behind txnrouter a coordinator
	// loads per partition, and a start loads every partition at once.
	ev := c.log.Debug()
	if len(resend) > 0 {
		ev = c.log.Info()
	}
	ev.Int32("coordinator_epoch", c.epoch).Int("transactions", len(loaded.Txns)).Int("prepared", len(resend)).Msg("coordinator loaded")
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

// View is the cluster view the coordinator routes by (the admin API asks
// the partitions' leaders through it).
func (c *Coordinator) View() *cluster.View { return c.cfg.View }

// Close stops the scan and waits for its background work. It does not
// close the store (the caller owns it): writes submitted are the store's.
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

// writeErrorCode is the answer to a request whose write failed with err:
// NOT_COORDINATOR when the store says another coordinator owns the id's
// partition now (txnlog.ErrNotOwner: a shared store fenced this one out,
// nothing was written, and the client must look the coordinator up again
// rather than retry here), else storeErrorCode(). The code is taken from
// the write's own error: the store is not stopped by a fenced write (the
// partition may be owned again later), so its Err says nothing of it.
func (c *Coordinator) writeErrorCode(err error) int16 {
	if errors.Is(err, txnlog.ErrNotOwner) {
		return kerr.NotCoordinator.Code
	}
	return c.storeErrorCode()
}

// storeFailed is the store's fail-stop error, nil while it writes.
func (c *Coordinator) storeFailed() error { return c.cfg.Store.Err() }

// forget drops an entry from the map; e must be locked.
func (c *Coordinator) forget(id string, e *entry) {
	e.deleted = true
	c.mu.Lock()
	if c.txns[id] == e {
		delete(c.txns, id)
	}
	c.mu.Unlock()
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
func (c *Coordinator) MarkersWritten(txn markersender.Txn) { c.markersWritten(txn) }

// markersWritten is MarkersWritten; it returns the decision whose write
// persists Complete*, nil when it writes nothing (now).
func (c *Coordinator) markersWritten(txn markersender.Txn) *decision {
	if txn.CoordinatorEpoch != 0 && txn.CoordinatorEpoch != c.epoch {
		c.log.Info().Str("txn_id", txn.TransactionalID).Int32("coordinator_epoch", txn.CoordinatorEpoch).Msg("completion from an older coordinator epoch ignored")
		return nil
	}
	now := c.nowMs()
	wasPending := false
	// Decided on the Prepare in flight, if any (speculate): the markers
	// may have been written before the Prepare was durable (by leaders
	// appending to the same log), and Complete, submitted behind it, is
	// durable only with it and with them (invariant 2). Nobody waits for
	// Complete: it goes to disk with the next write someone waits for
	// (lazy).
	d := c.stepWith(txn.TransactionalID, stepOpts{speculate: true, urgency: durable.Lazy}, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
		wasPending = pending
		return txncore.Complete(cur, pending, txn.Markers, now)
	})
	if !d.own && wasPending && d.e != nil {
		// Another write of the id is still finishing: try again when it
		// has, rather than leave the transaction in Prepare*.
		changed := d.changed()
		c.background(func() {
			select {
			case <-changed:
				c.MarkersWritten(txn)
			case <-c.stop:
			}
		})
		return nil
	}
	if !d.own {
		c.log.Warn().Str("txn_id", txn.TransactionalID).Int64("pid", txn.ProducerID).Int16("epoch", txn.ProducerEpoch).Msg("markers written for a transaction not in that Prepare state: ignored")
		return nil
	}
	// A Complete that fails is not retried: its log stopped (a restart,
	// or the partition's next owner, resends the Prepare's markers).
	c.counters.completions.Add(1)
	return d
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
func (c *Coordinator) MarkersStuck(txn markersender.Txn, tp txncore.TopicPartition, reason string) {
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
		e.settleWrites(c.storeLog)
		if e.md != nil && !e.pending() && (txncore.TimedOut(e.md, now) || txncore.Expired(e.md, false, now, idle)) {
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

// highWaterBlocks reserves producer-id blocks by raising the store's
// high-water mark (the single coordinator): an id is handed out only below
// a durable mark, so a restart never reuses one.
type highWaterBlocks struct {
	store txnlog.Store
	mu    sync.Mutex
	hw    int64 // the mark reserved so far
}

func (b *highWaterBlocks) Reserve(ctx context.Context, n int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := txnlog.Apply(ctx, b.store, txnlog.Batch{ProducerIDHighWater: b.hw + n}); err != nil {
		return 0, err
	}
	first := b.hw
	b.hw += n
	return first, nil
}
