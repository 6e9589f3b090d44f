package markersender

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/txncore"
)

// Sender delivers transactions' markers to partition leaders. Its state is
// in memory only: after a coordinator restart, the coordinator re-enqueues
// every transaction in Prepare* (as Kafka does on partition load).
//
// Goroutines: one router (assigns partitions to leaders, after backoff) and
// MaxInFlight senders per leader, all stopped by Close.
type Sender struct {
	cfg Config
	log zerolog.Logger
	m   *metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	txns map[string]*txnState
	// waiting holds the partitions the router must (re)assign: new ones
	// and retries. Stale entries (stuck, replaced, forgotten) are dropped
	// by the router, so it never scans every pending transaction.
	waiting   map[*partState]*txnState
	leaders   map[int32]*leaderState
	completer Completer
	started   bool
	closed    bool
	routeWake chan struct{}
}

// txnState is one transaction's markers still to deliver.
type txnState struct {
	txn   Txn
	parts map[txncore.TopicPartition]*partState // removed when done
	// stuck is the reason the transaction is stuck ("" when not): no
	// partition of it is sent until Retry.
	stuck string
}

// partState is one partition's marker.
type partState struct {
	tp txncore.TopicPartition
	// leader is the leader it was last routed to (-1: never routed).
	leader int32
	// routed: in leader's queue or in flight; false: waiting for the
	// router (new, or after an error, once notBefore has passed).
	routed    bool
	queued    bool
	inFlight  bool
	notBefore time.Time
	attempts  int
	v2Closes  int // connection closed on a v2 request to a leader advertising < v2
	// refusals counts the answers in a row that say the marker cannot be
	// delivered where it was sent (no leader, NOT_LEADER_OR_FOLLOWER,
	// UNKNOWN_TOPIC_OR_PARTITION): at Config.StuckAfterRefusals the
	// transaction is reported stuck instead of retried for good.
	refusals int
	// lastCode is the leader's last answer for the partition.
	lastCode int16
	lastErr  string
}

// leaderState is one leader: its queue and its connections (one per
// in-flight slot).
type leaderState struct {
	node   cluster.Node
	conns  []*negotiation.LeaderConn
	queue  []queued
	wake   chan struct{}
	series *leaderSeries
}

type queued struct {
	ts *txnState
	ps *partState
}

// New returns a Sender; it starts no goroutine until Start. Transactions
// enqueued before Start are kept.
func New(cfg Config) *Sender {
	cfg.defaults()
	s := &Sender{
		cfg:       cfg,
		log:       cfg.Log.With().Str("component", "markersender").Logger(),
		m:         newMetrics(cfg.Metrics),
		txns:      map[string]*txnState{},
		waiting:   map[*partState]*txnState{},
		leaders:   map[int32]*leaderState{},
		routeWake: make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, n := range cfg.Leaders {
		s.leaderLocked(n)
	}
	return s
}

// Start begins delivery; outcomes go to c, which must be safe for
// concurrent use and must not call back into the Sender synchronously
// with a lock the Sender's callers hold.
func (s *Sender) Start(c Completer) {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return
	}
	s.started, s.completer = true, c
	for _, l := range s.leaders {
		s.startLeaderLocked(l)
	}
	var done []Txn
	for id, ts := range s.txns {
		if len(ts.parts) == 0 {
			delete(s.txns, id)
			done = append(done, ts.txn)
		}
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.routeLoop()
	for _, t := range done {
		c.MarkersWritten(t)
	}
	s.kickRouter()
}

// Enqueue hands over a transaction's markers. It replaces any pending entry
// of the same TransactionalID (a newer Prepare supersedes an older one);
// answers to requests already in flight for the replaced entry are ignored.
func (s *Sender) Enqueue(txn Txn) {
	ts := &txnState{txn: txn, parts: make(map[txncore.TopicPartition]*partState, len(txn.Partitions))}
	states := make([]partState, len(txn.Partitions)) // one allocation for all
	for i, tp := range txn.Partitions {
		states[i] = partState{tp: tp, leader: -1}
		ts.parts[tp] = &states[i]
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.log.Warn().Str("txn_id", txn.TransactionalID).Msg("markers enqueued after Close: ignored")
		return
	}
	if old := s.txns[txn.TransactionalID]; old != nil && old.stuck != "" {
		s.m.stuck.Dec()
	}
	if len(ts.parts) == 0 && s.started {
		delete(s.txns, txn.TransactionalID)
		c := s.completer
		s.mu.Unlock()
		c.MarkersWritten(txn)
		return
	}
	s.txns[txn.TransactionalID] = ts
	for _, ps := range ts.parts {
		s.waiting[ps] = ts
	}
	started := s.started
	s.mu.Unlock()
	if started {
		s.kickRouter()
	}
	if !txn.durable() {
		// Held back from leaders elsewhere until durable: wake them then;
		// a Prepare that is never durable has no markers.
		txn.At.OnDurable(txn.Pos, func(err error) {
			if err != nil {
				s.drop(ts)
				return
			}
			s.wakeLeadersOf(ts)
		})
	}
}

// drop forgets ts if it is still the pending entry of its id.
func (s *Sender) drop(ts *txnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txns[ts.txn.TransactionalID] == ts {
		s.forgetLocked(ts.txn.TransactionalID)
	}
}

// wakeLeadersOf wakes the leaders ts's partitions are queued at.
func (s *Sender) wakeLeadersOf(ts *txnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ps := range ts.parts {
		if l := s.leaders[ps.leader]; l != nil {
			wake(l)
		}
	}
}

// Retry resends a transaction's markers now, whether it is stuck or
// waiting in backoff. It reports whether the transaction is pending.
func (s *Sender) Retry(txnID string) bool {
	s.mu.Lock()
	ts := s.txns[txnID]
	if ts == nil {
		s.mu.Unlock()
		return false
	}
	if ts.stuck != "" {
		ts.stuck = ""
		s.m.stuck.Dec()
	}
	now := time.Now()
	for _, ps := range ts.parts {
		ps.attempts, ps.v2Closes, ps.refusals, ps.notBefore = 0, 0, 0, now
		if !ps.inFlight {
			ps.routed = false
			s.waiting[ps] = ts
		}
	}
	s.mu.Unlock()
	s.log.Info().Str("txn_id", txnID).Msg("markers retried by operator")
	s.kickRouter()
	return true
}

// Undelivered returns the partitions of txnID whose markers have not been
// acknowledged, sorted (nil when it has none pending).
func (s *Sender) Undelivered(txnID string) []txncore.TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.txns[txnID]
	if ts == nil {
		return nil
	}
	out := make([]txncore.TopicPartition, 0, len(ts.parts))
	for tp := range ts.parts {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

// Forget drops a transaction's pending markers (after an operator aborted
// it, or the coordinator lost ownership). In-flight answers are ignored.
func (s *Sender) Forget(txnID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(txnID)
}

func (s *Sender) forgetLocked(txnID string) {
	if ts := s.txns[txnID]; ts != nil {
		if ts.stuck != "" {
			s.m.stuck.Dec()
		}
		delete(s.txns, txnID)
	}
}

// Close stops every goroutine and closes the connections. Pending markers
// are dropped: the coordinator resends them from its log after a restart.
func (s *Sender) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leaders {
		for _, c := range l.conns {
			c.Close()
		}
	}
}

// leaderLocked returns the state of node, creating it (and, once started,
// its goroutines) on first sight.
func (s *Sender) leaderLocked(node cluster.Node) *leaderState {
	if l := s.leaders[node.NodeID]; l != nil {
		return l
	}
	l := &leaderState{node: node, wake: make(chan struct{}, 1), series: s.m.forLeader(node.NodeID)}
	for range s.cfg.MaxInFlight {
		conn, err := s.newLeaderConn(node)
		if err != nil {
			// An unknown coordinator version is a configuration error the
			// CLI rejects before this; fall back to 4.2 rather than panic.
			s.log.Error().Err(err).Msg("bad coordinator version; using 4.2")
			s.cfg.CoordinatorVersion = "4.2"
			conn, _ = s.newLeaderConn(node)
		}
		l.conns = append(l.conns, conn)
	}
	s.leaders[node.NodeID] = l
	l.series.inUse.Set(-1)
	if s.started {
		s.startLeaderLocked(l)
	}
	return l
}

// newLeaderConn is a connection to node that negotiates its
// WriteTxnMarkers version as the sender's own do.
func (s *Sender) newLeaderConn(node cluster.Node) (*negotiation.LeaderConn, error) {
	return negotiation.NewLeaderConn(negotiation.LeaderConfig{
		NodeID: node.NodeID, Addr: node.Addr, KafkaVersion: node.KafkaVersion,
		CoordinatorVersion: s.cfg.CoordinatorVersion, Discovery: s.cfg.Discovery,
		Dial: s.cfg.Dial, Log: s.log,
	})
}

func (s *Sender) startLeaderLocked(l *leaderState) {
	for slot, conn := range l.conns {
		s.wg.Add(1)
		go s.runSlot(l, conn, slot)
	}
}

func (s *Sender) kickRouter() {
	select {
	case s.routeWake <- struct{}{}:
	default:
	}
}

func wake(l *leaderState) {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// routeLoop assigns partitions whose backoff has passed to their current
// leader. Partitions with no known leader wait and are re-routed every
// BackoffMax (Kafka's unknown-broker queue).
func (s *Sender) routeLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.route()
		if next > 0 {
			timer.Reset(next)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.routeWake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// route assigns what is due and returns how long until the next partition
// is due (0: nothing waits).
func (s *Sender) route() time.Duration {
	s.mu.Lock()
	now := time.Now()
	var next time.Duration
	due := func(d time.Duration) {
		if next == 0 || d < next {
			next = d
		}
	}
	woken := map[*leaderState]bool{}
	var outs []outcome
	for ps, ts := range s.waiting {
		if ts.stuck != "" || !s.currentLocked(ts) || ts.parts[ps.tp] != ps || ps.routed || ps.inFlight {
			delete(s.waiting, ps) // Retry puts stuck ones back
			continue
		}
		if wait := ps.notBefore.Sub(now); wait > 0 {
			due(wait)
			continue
		}
		node, ok := s.cfg.Router.LeaderOf(ps.tp.Topic, ps.tp.Partition)
		if !ok && ps.lastCode == kerr.UnknownTopicOrPartition.Code {
			// Gone from our metadata, and its leader no longer has it.
			delete(s.waiting, ps)
			outs = s.resolvedLocked(queued{ts, ps}, outs)
			continue
		}
		if !ok {
			// Not in our metadata (deleted, or auto-created elsewhere
			// and not known here yet, as after a restart): the
			// placement rule still names its leader, which says.
			node, ok = s.placed(ps.tp)
		}
		if !ok || node.Addr == "" {
			delete(s.waiting, ps)
			outs = s.refusedLocked(queued{ts, ps}, -1, "no known leader for the partition", "", s.newRetryAt(), outs)
			if ts.stuck == "" {
				due(max(ps.notBefore.Sub(now), time.Millisecond))
			}
			continue
		}
		delete(s.waiting, ps)
		l := s.leaderLocked(node)
		ps.leader, ps.routed, ps.queued = node.NodeID, true, true
		l.queue = append(l.queue, queued{ts, ps})
		woken[l] = true
	}
	s.mu.Unlock()
	for l := range woken {
		wake(l)
	}
	s.run(outs)
	return next
}

// placed is the leader the contract's placement rule gives tp,
// leaders[(fnv32a(topic)+partition) mod len(leaders)], for a partition the
// Router does not know.
func (s *Sender) placed(tp txncore.TopicPartition) (cluster.Node, bool) {
	if len(s.cfg.Leaders) == 0 || tp.Partition < 0 {
		return cluster.Node{}, false
	}
	return s.cfg.Leaders[cluster.LeaderIndex(tp.Topic, tp.Partition, len(s.cfg.Leaders))], true
}

// resolvedLocked ends the marker of a partition of a deleted topic as
// delivered: there is nothing left to mark. It is Kafka's rule
// (TransactionMarkerChannelManager.addTxnMarkersToBrokerQueue, apache/kafka
// core/src/main/scala/kafka/coordinator/transaction/): a leader's
// UNKNOWN_TOPIC_OR_PARTITION is retried
// (TransactionMarkerRequestCompletionHandler), and a retry that finds no
// leader endpoint in the metadata drops the partition from the
// transaction ("these partitions are likely deleted already and hence can
// be skipped") and completes it. Here both must agree: the leader answered
// UNKNOWN_TOPIC_OR_PARTITION and the Router no longer knows the partition.
func (s *Sender) resolvedLocked(q queued, outs []outcome) []outcome {
	txn := q.ts.txn
	s.log.Info().Str("txn_id", txn.TransactionalID).Int64("pid", txn.ProducerID).Int16("epoch", txn.ProducerEpoch).
		Str("topic", q.ps.tp.Topic).Int32("partition", q.ps.tp.Partition).
		Msg("marker skipped: the partition's topic was deleted (its leader and the metadata no longer have it)")
	return s.doneLocked(q, outs)
}

// refusedLocked handles an answer that says the marker cannot be delivered
// where it went (leader -1: it could go nowhere): retried with backoff, and
// after StuckAfterRefusals in a row the transaction is reported stuck
// (metric, one log line, Completer.MarkersStuck) rather than retried
// silently for good, as Kafka does. code is the leader's answer ("" for
// none); a later Retry starts the count again.
func (s *Sender) refusedLocked(q queued, leader int32, what, code string, at *retryAt, outs []outcome) []outcome {
	q.ps.refusals++
	if q.ps.refusals < s.cfg.StuckAfterRefusals {
		s.retryLocked(q, what, at)
		return outs
	}
	reason := fmt.Sprintf("%s-%d: %s (%d times in a row)", q.ps.tp.Topic, q.ps.tp.Partition, what, q.ps.refusals)
	if leader >= 0 {
		reason = fmt.Sprintf("leader %d answers %s for %s-%d (%d times in a row): it does not lead the partition or does not apply its markers",
			leader, code, q.ps.tp.Topic, q.ps.tp.Partition, q.ps.refusals)
		if q.ps.tp.Topic == cluster.OffsetsTopic {
			reason += " (no group coordinator serves __consumer_offsets there)"
		}
	}
	q.ps.attempts++
	return s.stuckLocked(q, reason, outs)
}

// backoff is the capped exponential backoff of the attempts-th retry, with
// "equal jitter": half fixed, half random, so retries of many markers to a
// restarted leader spread out.
func (s *Sender) backoff(attempts int) time.Duration {
	d := s.cfg.BackoffMin
	for i := 1; i < attempts && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.BackoffMax)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// currentLocked reports whether ts is still the live entry of its txn.
func (s *Sender) currentLocked(ts *txnState) bool {
	return s.txns[ts.txn.TransactionalID] == ts && ts.parts != nil
}

// outcome is a callback to run after the lock is released.
type outcome func(Completer)

func (s *Sender) run(outs []outcome) {
	if len(outs) == 0 {
		return
	}
	s.mu.Lock()
	c := s.completer
	s.mu.Unlock()
	for _, o := range outs {
		o(c)
	}
}

// doneLocked marks one partition's marker as delivered; the transaction
// completes when it was the last one.
func (s *Sender) doneLocked(q queued, outs []outcome) []outcome {
	q.ps.inFlight = false
	if !s.currentLocked(q.ts) || q.ts.parts[q.ps.tp] != q.ps {
		return outs
	}
	delete(q.ts.parts, q.ps.tp)
	if len(q.ts.parts) == 0 {
		delete(s.txns, q.ts.txn.TransactionalID)
		txn := q.ts.txn
		if q.ts.stuck != "" {
			s.m.stuck.Dec()
		}
		return append(outs, func(c Completer) { c.MarkersWritten(txn) })
	}
	return outs
}

// retryLocked sends the partition back to the router after the backoff of
// its retry. One failure backs off every partition it hit by the same
// jittered delay (retryAt), so they are retried together in one request.
func (s *Sender) retryLocked(q queued, reason string, at *retryAt) {
	q.ps.inFlight, q.ps.routed = false, false
	q.ps.attempts++
	q.ps.lastErr = reason
	q.ps.notBefore = at.after(q.ps.attempts)
	s.waiting[q.ps] = q.ts
}

// retryAt memoizes one jittered backoff per attempt count for a batch.
type retryAt struct {
	s     *Sender
	now   time.Time
	delay map[int]time.Duration
}

func (s *Sender) newRetryAt() *retryAt {
	return &retryAt{s: s, now: time.Now(), delay: map[int]time.Duration{}}
}

func (r *retryAt) after(attempts int) time.Time {
	d, ok := r.delay[attempts]
	if !ok {
		d = r.s.backoff(attempts)
		r.delay[attempts] = d
	}
	return r.now.Add(d)
}

// stuckLocked stops a transaction's markers until Retry, and reports it
// once: a metric, one log line and Completer.MarkersStuck.
func (s *Sender) stuckLocked(q queued, reason string, outs []outcome) []outcome {
	q.ps.inFlight, q.ps.routed = false, false
	q.ps.lastErr = reason
	if !s.currentLocked(q.ts) || q.ts.stuck != "" {
		return outs
	}
	q.ts.stuck = reason
	s.m.stuck.Inc()
	txn, tp := q.ts.txn, q.ps.tp
	s.log.Error().Str("txn_id", txn.TransactionalID).Int64("pid", txn.ProducerID).Int16("epoch", txn.ProducerEpoch).
		Int8("tv", txn.TransactionVersion).Int32("leader", q.ps.leader).Str("topic", tp.Topic).Int32("partition", tp.Partition).
		Str("reason", reason).Msg("transaction markers stuck: operator action needed (retry or abort)")
	return append(outs, func(c Completer) { c.MarkersStuck(txn, tp, reason) })
}

// sortQueued orders a batch by transaction and partition, so requests are
// deterministic for a given queue.
func sortQueued(b []queued) {
	sort.Slice(b, func(i, j int) bool {
		a, c := b[i], b[j]
		if a.ts.txn.TransactionalID != c.ts.txn.TransactionalID {
			return a.ts.txn.TransactionalID < c.ts.txn.TransactionalID
		}
		if a.ps.tp.Topic != c.ps.tp.Topic {
			return a.ps.tp.Topic < c.ps.tp.Topic
		}
		return a.ps.tp.Partition < c.ps.tp.Partition
	})
}
