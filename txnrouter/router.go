package txnrouter

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wire"
)

// MarkerSender is the process's one marker sender; *markersender.Sender
// implements it. The Router starts it with itself as the Completer.
type MarkerSender interface {
	coordinator.MarkerQueue
	Start(markersender.Completer)
}

// Config configures a Router.
type Config struct {
	Member *ownership.Member
	Store  *txnetcd.Store
	// Partitions is transaction_state_partitions; it must be the
	// member's (default txnetcd.DefaultPartitions).
	Partitions int32
	// ProducerIDs is shared by every partition's coordinator (etcd blocks).
	ProducerIDs *coordinator.ProducerIDPool
	Markers     MarkerSender
	// Coordinator is the template of every partition's coordinator
	// config; its Store, Markers, ProducerIDs and Log are the Router's.
	// Its Metrics are ignored: several coordinators would register the
	// same collectors. The Router registers their sum in Metrics instead.
	Coordinator coordinator.Config
	// Metrics, optional, gets the coordinators' stats summed over the
	// partitions (counters include those of partitions since closed), the
	// EndTxn latency of all of them, and the partitions served.
	Metrics prometheus.Registerer
	// Nodes maps the coordinator node ids to their host:port, for
	// FindCoordinator.
	Nodes map[int32]string
	Log   zerolog.Logger
}

// slot is the coordinator of one owned partition.
type slot struct {
	p     int32
	epoch int32
	ready chan struct{} // closed once open has finished, well or not
	// Set before ready is closed; c is nil when the open failed.
	c        *coordinator.Coordinator
	store    *txnetcd.PartitionStore
	handlers map[int16]wire.Handler
	closed   bool // guarded by Router.mu
}

func (s *slot) loaded() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// Router serves the coordinator APIs of the partitions its member owns.
type Router struct {
	cfg Config
	log zerolog.Logger
	reg *wire.Registry // the node's registry, given to every coordinator

	mu     sync.Mutex
	slots  map[int32]*slot
	closed bool

	started chan struct{} // closed by Register: the event loop may open coordinators
	// beforeOpen, when set (tests), runs before a partition's coordinator
	// is opened: holding it keeps the partition loading.
	beforeOpen func(p int32)
	// openFault, when set (tests), fails an attempt to open a
	// partition's coordinator with the error it returns.
	openFault func(p int32) error
	latency   *prometheus.HistogramVec
	// ownership counts the member's events: partitions acquired (a
	// takeover when the partition had an owner before: epoch above 1)
	// and lost.
	ownership *prometheus.CounterVec
	// retired sums the counters of closed coordinators (guarded by mu),
	// so the summed counters never go back when a partition moves.
	retired coordinator.Stats
	wg      sync.WaitGroup
	done    chan struct{}
	peers   *peers // which other coordinators' processes are gone (FindCoordinator)
}

// New starts a router: it starts the marker sender and follows the member's
// events. Coordinators are opened only once Register has been called.
func New(cfg Config) (*Router, error) {
	if cfg.Member == nil || cfg.Store == nil || cfg.ProducerIDs == nil || cfg.Markers == nil || cfg.Coordinator.View == nil {
		return nil, errors.New("txnrouter: Member, Store, ProducerIDs, Markers and Coordinator.View are required")
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = txnetcd.DefaultPartitions
	}
	r := &Router{
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "txnrouter").Int32("node_id", cfg.Member.NodeID()).Logger(),
		slots:   map[int32]*slot{},
		started: make(chan struct{}),
		done:    make(chan struct{}),
		latency: coordinator.NewEndTxnLatency(),
		peers:   newPeers(cfg.Nodes),
		ownership: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txncoord_coordinator_partition_ownership_total",
			Help: "__transaction_state partitions this node acquired (event=acquired), of those the ones another coordinator (or this one before a restart) had owned (event=takeover: epoch above 1), and the ones it lost (event=lost).",
		}, []string{"event"}),
	}
	for _, ev := range []string{"acquired", "takeover", "lost"} {
		r.ownership.WithLabelValues(ev) // shown at 0 before the first
	}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(r.ownership, coordinator.StatsCollector(r.stats), r.latency, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "txncoord_coordinator_partitions_served",
			Help: "__transaction_state partitions whose coordinator this node runs.",
		}, func() float64 { return float64(len(r.Serving())) }))
	}
	cfg.Markers.Start(r)
	r.wg.Add(1)
	go r.follow()
	return r, nil
}

// PartitionFor is the partition of a transactional id.
func (r *Router) PartitionFor(id string) int32 { return txnetcd.PartitionFor(id, r.cfg.Partitions) }

// follow applies the member's events until its Events channel closes (the
// member closed) or the router closes.
func (r *Router) follow() {
	defer r.wg.Done()
	select {
	case <-r.started:
	case <-r.done:
		return
	}
	events := r.cfg.Member.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				r.dropAll("member closed")
				return
			}
			if ev.Acquired {
				r.ownership.WithLabelValues("acquired").Inc()
				if ev.Epoch > 1 {
					r.ownership.WithLabelValues("takeover").Inc()
				}
				r.acquired(ev.Partition, ev.Epoch)
			} else {
				r.ownership.WithLabelValues("lost").Inc()
				r.lost(ev.Partition, ev.Epoch)
			}
		case <-r.done:
			return
		}
	}
}

func (r *Router) acquired(p, epoch int32) {
	fence, ok := r.cfg.Member.Fence(p)
	if !ok {
		return // lost again already: its lost event follows
	}
	if o, err := fence.Owner(); err != nil || o.Epoch != epoch {
		return // a later acquisition's event follows
	}
	s := &slot{p: p, epoch: epoch, ready: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	old := r.slots[p]
	r.slots[p] = s
	r.mu.Unlock()
	if old != nil {
		r.closeSlot(old, "reacquired")
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.open(s, fence)
	}()
}

// Backoff of a partition's open that failed while the partition is still
// owned (etcd unavailable, its leader changing): it doubles up to the max.
const (
	openBackoff    = 100 * time.Millisecond
	maxOpenBackoff = 2 * time.Second
)

// open opens the partition's coordinator: it loads the partition from etcd
// and persists the new coordinator epoch (Open), which takes a while.
// Requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS. An open that fails
// is tried again, with a backoff, as long as the member still owns the
// partition at the slot's epoch: a load that failed on a passing etcd
// error ("leader changed" while its Raft leader was being replaced) would
// otherwise leave the partition owned and served by no one, its ids
// answered NOT_COORDINATOR until the lease went (found by the etcd-leader
// kills). A partition that moved on is forgotten; its lost event follows.
func (r *Router) open(s *slot, fence txnetcd.Fence) {
	log := r.log.With().Int32("partition", s.p).Int32("coordinator_epoch", s.epoch).Logger()
	if r.beforeOpen != nil {
		r.beforeOpen(s.p)
	}
	for backoff := openBackoff; ; backoff = min(2*backoff, maxOpenBackoff) {
		err := r.tryOpen(s, fence, log)
		if err == nil {
			return
		}
		log.Warn().Err(err).Dur("retry_in", backoff).Msg("open coordinator failed")
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-r.done:
			t.Stop()
			r.forget(s)
			return
		}
		if !r.stillOwned(s) {
			r.forget(s)
			return
		}
	}
}

// tryOpen is one attempt of open; on success the slot is loaded (and
// closed again at once if it was lost meanwhile).
func (r *Router) tryOpen(s *slot, fence txnetcd.Fence, log zerolog.Logger) error {
	if r.openFault != nil {
		if err := r.openFault(s.p); err != nil {
			return err
		}
	}
	ps, err := r.cfg.Store.Partition(fence)
	if err != nil {
		return fmt.Errorf("open partition store: %w", err)
	}
	// A write whose outcome is unknown (etcd's answer lost) leaves the
	// coordinator's memory possibly behind etcd, which it would never
	// notice: reopen the partition from etcd, as a new owner would.
	ps.OnUnknownOutcome(func(err error) { r.reload(s, err) })
	cfg := r.cfg.Coordinator
	// The coordinator names its epoch itself where it matters ("coordinator
	// loaded"): its logger carries the partition only, so no line repeats
	// a key.
	cfg.Store, cfg.Markers, cfg.ProducerIDs, cfg.Metrics = ps, r.cfg.Markers, r.cfg.ProducerIDs, nil
	cfg.Log = r.log.With().Int32("partition", s.p).Logger()
	cfg.EndTxnLatency = r.latency
	c, err := coordinator.Open(cfg)
	if err != nil {
		ps.Close()
		return err
	}
	s.c, s.store, s.handlers = c, ps, c.Handlers(r.reg)
	// ready is closed under mu with closed read: either closeSlot sees
	// the slot loaded and closes it, or this sees it closed.
	r.mu.Lock()
	closed := s.closed
	close(s.ready)
	r.mu.Unlock()
	if closed { // lost while opening
		c.Close()
		ps.Close()
		return nil
	}
	log.Debug().Msg("serving partition") // one line per partition: debug, as the ownership's
	return nil
}

// stillOwned reports whether s is still its partition's current slot and
// the member still owns the partition at s's epoch.
func (r *Router) stillOwned(s *slot) bool {
	r.mu.Lock()
	current := r.slots[s.p] == s && !s.closed && !r.closed
	r.mu.Unlock()
	if !current {
		return false
	}
	fence, ok := r.cfg.Member.Fence(s.p)
	if !ok {
		return false
	}
	o, err := fence.Owner()
	return err == nil && o.Epoch == s.epoch
}

// reload replaces s, if it is still its partition's slot, with a
// coordinator opened again from etcd (its store's write outcome is
// unknown): the load resends the markers of its Prepare* transactions and
// its timeouts abort what was left open.
func (r *Router) reload(s *slot, err error) {
	r.mu.Lock()
	current := r.slots[s.p] == s && !r.closed
	r.mu.Unlock()
	if !current {
		return
	}
	r.log.Warn().Err(err).Int32("partition", s.p).Int32("coordinator_epoch", s.epoch).
		Msg("an etcd write's outcome is unknown: reloading the partition from etcd")
	r.acquired(s.p, s.epoch)
}

// forget removes s, whose open failed, if it is still the partition's
// slot, and marks it loaded (without a coordinator).
func (r *Router) forget(s *slot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots[s.p] == s {
		delete(r.slots, s.p)
	}
	s.closed = true
	close(s.ready)
}

func (r *Router) lost(p, epoch int32) {
	r.mu.Lock()
	s := r.slots[p]
	if s == nil || s.epoch != epoch {
		r.mu.Unlock()
		return
	}
	delete(r.slots, p)
	r.mu.Unlock()
	r.closeSlot(s, "lost")
}

// closeSlot closes a slot already removed from slots: at once if loaded,
// otherwise open closes it when done.
func (r *Router) closeSlot(s *slot, reason string) {
	r.mu.Lock()
	already := s.closed
	s.closed = true
	loaded := s.loaded()
	r.mu.Unlock()
	if already {
		return
	}
	r.log.Info().Int32("partition", s.p).Int32("coordinator_epoch", s.epoch).Str("reason", reason).Msg("closing partition")
	if !loaded {
		return // open closes it when done
	}
	if s.c != nil {
		// Its queued and stuck markers are the next owner's to send now,
		// with its epoch (Kafka's removeMarkersForTxnTopicPartition):
		// kept here they would be reported stuck for good.
		ids := s.c.List(coordinator.ListFilter{})
		s.c.Close()
		s.store.Close()
		r.retire(s.c.Stats())
		for _, t := range ids {
			r.cfg.Markers.Forget(t.TransactionalID)
		}
	}
}

// retire keeps a closed coordinator's counters (not its transactions: the
// partition's next owner counts those).
func (r *Router) retire(st coordinator.Stats) {
	st.ByState, st.Stuck = nil, 0
	r.mu.Lock()
	r.retired.Add(st)
	r.mu.Unlock()
}

// stats is every open coordinator's Stats plus the retired counters.
func (r *Router) stats() coordinator.Stats {
	r.mu.Lock()
	sum := r.retired
	sum.ByState = map[string]int{}
	open := make([]*coordinator.Coordinator, 0, len(r.slots))
	for _, s := range r.slots {
		if s.loaded() && s.c != nil {
			open = append(open, s.c)
		}
	}
	r.mu.Unlock()
	for _, c := range open {
		sum.Add(c.Stats())
	}
	sum.CoordinatorEpoch = -1
	return sum
}

func (r *Router) dropAll(reason string) {
	r.mu.Lock()
	slots := r.slots
	r.slots = map[int32]*slot{}
	r.mu.Unlock()
	for _, s := range slots {
		r.closeSlot(s, reason)
	}
}

// Close stops following the member and closes every coordinator. It does
// not close the member, the store or the marker sender.
func (r *Router) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.done)
	r.wg.Wait()
	r.dropAll("router closed")
	return nil
}

// Serving is the partitions whose coordinator is open, with their epochs.
func (r *Router) Serving() map[int32]int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int32]int32{}
	for p, s := range r.slots {
		if s.loaded() && s.c != nil {
			out[p] = s.epoch
		}
	}
	return out
}

// Coordinator is partition p's open coordinator, if any.
func (r *Router) Coordinator(p int32) (*coordinator.Coordinator, bool) {
	r.mu.Lock()
	s := r.slots[p]
	r.mu.Unlock()
	if s == nil || !s.loaded() || s.c == nil {
		return nil, false
	}
	return s.c, true
}

// route finds partition p's handlers, or the error code to answer: NOT_COORDINATOR
// when this process does not own p (or its lease may have expired),
// COORDINATOR_LOAD_IN_PROGRESS while its coordinator opens.
func (r *Router) route(p int32) (map[int16]wire.Handler, int16) {
	if _, ok := r.cfg.Member.Fence(p); !ok {
		return nil, kerr.NotCoordinator.Code
	}
	r.mu.Lock()
	s := r.slots[p]
	r.mu.Unlock()
	switch {
	case s == nil:
		return nil, kerr.NotCoordinator.Code
	case !s.loaded():
		return nil, kerr.CoordinatorLoadInProgress.Code
	case s.c == nil:
		return nil, kerr.NotCoordinator.Code
	}
	return s.handlers, 0
}

// owned lists the partitions this router routes to, ascending.
func (r *Router) owned() []int32 {
	r.mu.Lock()
	ps := make([]int32, 0, len(r.slots))
	for p := range r.slots {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// MarkersWritten routes the sender's completion to the coordinator of the
// transaction's partition, if it still serves it at the epoch the markers
// were sent with; otherwise the partition's next owner resends them.
func (r *Router) MarkersWritten(txn markersender.Txn) {
	if c := r.completer(txn); c != nil {
		c.MarkersWritten(txn)
	}
}

// MarkersStuck routes the sender's report like MarkersWritten.
func (r *Router) MarkersStuck(txn markersender.Txn, tp txncore.TopicPartition, reason string) {
	if c := r.completer(txn); c != nil {
		c.MarkersStuck(txn, tp, reason)
	}
}

func (r *Router) completer(txn markersender.Txn) *coordinator.Coordinator {
	c, ok := r.Coordinator(r.PartitionFor(txn.TransactionalID))
	if !ok || c.Epoch() != txn.CoordinatorEpoch {
		r.log.Debug().Str("txn_id", txn.TransactionalID).Int32("coordinator_epoch", txn.CoordinatorEpoch).Msg("markers of a partition no longer served: dropped")
		return nil
	}
	return c
}
