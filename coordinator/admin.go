package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// ListFilter selects transactions for List. Zero fields select all.
type ListFilter struct {
	States      []txnlog.State
	ProducerIDs []int64
	// MinDuration keeps transactions started at least that long ago
	// (Kafka's DurationFilter; Empty ones have no start and never match).
	MinDuration time.Duration
	// IDPattern, when set, must match the transactional id.
	IDPattern *regexp.Regexp
}

// TxnSummary is one row of List.
type TxnSummary struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	State           string `json:"state"`
	// DurationMs is how long ago the transaction started (-1: Empty).
	DurationMs  int64  `json:"duration_ms"`
	StuckReason string `json:"stuck_reason,omitempty"`
}

// TxnDetail is Describe's view of one transaction.
type TxnDetail struct {
	TransactionalID          string                   `json:"transactional_id"`
	ProducerID               int64                    `json:"producer_id"`
	ProducerEpoch            int16                    `json:"producer_epoch"`
	LastProducerEpoch        int16                    `json:"last_producer_epoch"`
	PrevProducerID           int64                    `json:"prev_producer_id"`
	NextProducerID           int64                    `json:"next_producer_id"`
	State                    string                   `json:"state"`
	TimeoutMs                int32                    `json:"timeout_ms"`
	StartTimestamp           int64                    `json:"start_timestamp_ms"`
	LastUpdateTimestamp      int64                    `json:"last_update_timestamp_ms"`
	Partitions               []txncore.TopicPartition `json:"partitions"`
	ClientTransactionVersion int16                    `json:"client_transaction_version"`
	CoordinatorEpoch         int32                    `json:"coordinator_epoch"`
	Pending                  bool                     `json:"pending"`
	StuckReason              string                   `json:"stuck_reason,omitempty"`
	// Completing is the previous transaction while its markers are still
	// being written and this one is already Ongoing (nil when none).
	Completing *txnlog.Completion `json:"completing,omitempty"`
}

// Stats are the coordinator's counters.
type Stats struct {
	CoordinatorEpoch int32          `json:"coordinator_epoch"`
	ByState          map[string]int `json:"transactions_by_state"`
	Stuck            int            `json:"stuck_transactions"`
	InitProducerID   uint64         `json:"init_producer_id_requests"`
	AddPartitions    uint64         `json:"add_partitions_requests"`
	AddOffsets       uint64         `json:"add_offsets_requests"`
	EndTxn           uint64         `json:"end_txn_requests"`
	TimeoutAborts    uint64         `json:"timeout_aborts"`
	FenceAborts      uint64         `json:"fence_aborts"`
	OperatorAborts   uint64         `json:"operator_aborts"`
	Completions      uint64         `json:"completions"`
	Expirations      uint64         `json:"expirations"`
}

type snapshotRow struct {
	md      Metadata
	pending bool
	stuck   string
}

// snapshot copies every stored transaction.
func (c *Coordinator) snapshot() []snapshotRow {
	c.mu.Lock()
	entries := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	rows := make([]snapshotRow, 0, len(entries))
	for _, e := range entries {
		e.mu.Lock()
		e.settleWrites(c.storeLog)
		if e.md != nil && !e.deleted {
			rows = append(rows, snapshotRow{md: e.md.Clone(), pending: e.pending(), stuck: e.stuck})
		}
		e.mu.Unlock()
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].md.TransactionalID < rows[j].md.TransactionalID })
	return rows
}

func durationMs(m *Metadata, now int64) int64 {
	if m.State == txnlog.Empty || m.StartTimestamp < 0 {
		return -1
	}
	return now - m.StartTimestamp
}

// List returns the transactions matching f, sorted by id.
func (c *Coordinator) List(f ListFilter) []TxnSummary {
	now := c.nowMs()
	var out []TxnSummary
	for _, row := range c.snapshot() {
		if s, ok := f.Summary(&row.md, row.stuck, now); ok {
			out = append(out, s)
		}
	}
	return out
}

// Summary is m as List shows it, if it matches f at now (milliseconds);
// stuck is its stuck reason ("" when none).
func (f ListFilter) Summary(m *Metadata, stuck string, now int64) (TxnSummary, bool) {
	d := durationMs(m, now)
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, m.State):
	case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID):
	case f.MinDuration > 0 && d < f.MinDuration.Milliseconds():
	case f.IDPattern != nil && !f.IDPattern.MatchString(m.TransactionalID):
	default:
		return TxnSummary{
			TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
			State: m.State.String(), DurationMs: d, StuckReason: stuck,
		}, true
	}
	return TxnSummary{}, false
}

// Describe returns one transaction.
func (c *Coordinator) Describe(txnID string) (TxnDetail, bool) {
	e := c.lock(txnID, false)
	if e == nil {
		return TxnDetail{}, false
	}
	defer e.mu.Unlock()
	e.settleWrites(c.storeLog)
	if e.md == nil {
		return TxnDetail{}, false
	}
	d := DetailOf(e.md, c.epoch)
	d.Pending, d.StuckReason = e.pending(), e.stuck
	return d, true
}

// DetailOf is stored metadata as Describe shows it, for a coordinator at
// epoch (the admin API of a node reading another node's partition from
// etcd: nothing pending or stuck is known of it).
func DetailOf(m *Metadata, epoch int32) TxnDetail {
	return TxnDetail{
		TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		LastProducerEpoch: m.LastProducerEpoch, PrevProducerID: m.PrevProducerID, NextProducerID: m.NextProducerID,
		State: m.State.String(), TimeoutMs: m.TimeoutMs, StartTimestamp: m.StartTimestamp,
		LastUpdateTimestamp: m.LastUpdateTimestamp, Partitions: append([]txncore.TopicPartition{}, m.Partitions...),
		ClientTransactionVersion: m.ClientTransactionVersion, CoordinatorEpoch: epoch,
		Completing: m.Clone().Completing,
	}
}

// Abort is AbortWith without Force.
func (c *Coordinator) Abort(ctx context.Context, txnID string) error {
	_, err := c.AbortWith(ctx, txnID, AbortOptions{})
	return err
}

// AbortOptions are an operator's abort (`txn abort`).
type AbortOptions struct {
	// Force ends a transaction in Prepare* whose markers are not all
	// delivered (see AbortWith); without it only a stuck PrepareAbort is.
	Force bool
}

// AbortResult is what an operator's abort did.
type AbortResult struct {
	// Completed is the state written: CompleteAbort, or CompleteCommit for
	// a forced PrepareCommit; "" when it aborted an Ongoing transaction
	// (PrepareAbort, whose markers then go out as a timeout's do).
	Completed string
	// GaveUp are the partitions whose markers were not delivered and are
	// no longer sent: their leaders keep the transaction open there until
	// an operator ends it (`txn find-hanging`).
	GaveUp []txncore.TopicPartition
}

// AbortWith ends a transaction for an operator (invariant 10: `txn abort`
// can always end a transaction).
//
//   - Ongoing: aborted as a timeout would (epoch bump, markers with the
//     cluster TV); it returns once the PrepareAbort is durable.
//   - PrepareAbort whose markers are stuck (or any PrepareAbort with
//     Force): written CompleteAbort at once; the undelivered markers are
//     given up (AbortResult.GaveUp). The decision was already abort, so
//     no data changes fate: only the leaders that did not get their
//     marker keep the transaction open.
//   - PrepareCommit, only with Force: written CompleteCommit; the
//     partitions that acknowledged are committed, the others are given up
//     (their data stays uncommitted, the transaction open at their
//     leaders). A commit cannot be turned into an abort: its answer has
//     been given and some leaders may have applied it.
//
// Other cases are refused with an error wrapping the Kafka code:
// TRANSACTIONAL_ID_NOT_FOUND, CONCURRENT_TRANSACTIONS (a transition in
// flight, markers still being delivered, or a PrepareCommit without
// Force) or INVALID_TXN_STATE.
func (c *Coordinator) AbortWith(ctx context.Context, txnID string, opts AbortOptions) (AbortResult, error) {
	now := c.nowMs()
	var state, stuck string
	if e := c.lock(txnID, false); e != nil {
		// Read before the step (its decide runs under this lock): a
		// reason cleared meanwhile comes with a state that is no longer
		// Prepare*, which the step sees.
		stuck = e.stuck
		e.mu.Unlock()
	}
	var missing, complete bool
	var markers *txncore.Markers
	d := c.step(txnID, false, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
		switch {
		case cur == nil:
			missing = true
			return fail(kerr.TransactionalIDNotFound.Code)
		case pending:
			state = cur.State.String()
			return fail(kerr.ConcurrentTransactions.Code)
		case isPrepare(cur.State):
			state = cur.State.String()
			if cur.State == txnlog.PrepareCommit && !opts.Force || cur.State == txnlog.PrepareAbort && !opts.Force && stuck == "" {
				return fail(kerr.ConcurrentTransactions.Code)
			}
			markers = txncore.OutstandingMarkers(cur)
			complete = true
			return txncore.Complete(cur, pending, *markers, now)
		case cur.Completing != nil:
			state = "Ongoing while its previous transaction's markers are written"
			return fail(kerr.ConcurrentTransactions.Code)
		case cur.State != txnlog.Ongoing:
			state = cur.State.String()
			return fail(kerr.InvalidTxnState.Code)
		}
		return txncore.AbortTimedOut(cur, pending, now, c.serverTV(), pids)
	})
	// Given up now, before the write ends: a delivery meanwhile only
	// finds the transaction complete and is ignored.
	var gaveUp []txncore.TopicPartition
	if complete && d.Err == 0 {
		gaveUp = c.giveUpMarkers(txnID)
	}
	o := d.wait(ctx)
	if err := ctx.Err(); err != nil {
		return AbortResult{}, err
	}
	switch {
	case missing:
		return AbortResult{}, fmt.Errorf("transaction %q: %w", txnID, kerr.TransactionalIDNotFound)
	case o.Err == kerr.ConcurrentTransactions.Code && state == txnlog.PrepareCommit.String():
		why := "its markers are being delivered"
		if stuck != "" {
			why = "its markers are stuck: " + stuck
		}
		return AbortResult{}, fmt.Errorf("transaction %q is PrepareCommit (%s); a commit cannot be aborted: --force completes it as "+
			"committed for the partitions that acknowledged and gives up on the others: %w", txnID, why, kerr.ConcurrentTransactions)
	case o.Err == kerr.ConcurrentTransactions.Code && state == txnlog.PrepareAbort.String():
		return AbortResult{}, fmt.Errorf("transaction %q is PrepareAbort, its markers are being delivered (not stuck): wait, "+
			"or --force completes it as aborted and gives up on the partitions that have not acknowledged: %w", txnID, kerr.ConcurrentTransactions)
	case o.Err == kerr.ConcurrentTransactions.Code && state != "":
		return AbortResult{}, fmt.Errorf("transaction %q is %s, already ending: %w", txnID, state, kerr.ConcurrentTransactions)
	case o.Err == kerr.InvalidTxnState.Code:
		return AbortResult{}, fmt.Errorf("transaction %q is %s, not Ongoing: nothing to abort: %w", txnID, state, kerr.InvalidTxnState)
	case o.Err != 0:
		return AbortResult{}, fmt.Errorf("transaction %q: %w", txnID, kerr.ErrorForCode(o.Err))
	}
	c.counters.operatorAborts.Add(1)
	if !complete {
		c.log.Warn().Str("txn_id", txnID).Msg("transaction aborted by an operator")
		return AbortResult{}, nil
	}
	res := AbortResult{Completed: txnlog.CompleteAbort.String(), GaveUp: gaveUp}
	if markers.Commit {
		res.Completed = txnlog.CompleteCommit.String()
	}
	c.log.Warn().Str("txn_id", txnID).Int64("pid", markers.ProducerID).Int16("epoch", markers.ProducerEpoch).
		Str("state", state).Str("completed", res.Completed).Str("stuck_reason", stuck).Str("gave_up", fmt.Sprint(gaveUp)).Bool("force", opts.Force).
		Msg("transaction ended by an operator without all its markers: the leaders of the given-up partitions keep it open (txn find-hanging)")
	return res, nil
}

// giveUpMarkers stops the marker sender's delivery of txnID's markers and
// returns the partitions that had not acknowledged.
func (c *Coordinator) giveUpMarkers(txnID string) []txncore.TopicPartition {
	out := c.cfg.Markers.Undelivered(txnID)
	c.cfg.Markers.Forget(txnID)
	return out
}

// Stats returns the counters and the transactions by state.
func (c *Coordinator) Stats() Stats {
	s := Stats{
		CoordinatorEpoch: c.epoch, ByState: map[string]int{},
		InitProducerID: c.counters.initPID.Load(), AddPartitions: c.counters.addPartitions.Load(),
		AddOffsets: c.counters.addOffsets.Load(), EndTxn: c.counters.endTxn.Load(),
		TimeoutAborts: c.counters.timeoutAborts.Load(), FenceAborts: c.counters.fenceAborts.Load(),
		OperatorAborts: c.counters.operatorAborts.Load(), Completions: c.counters.completions.Load(),
		Expirations: c.counters.expirations.Load(),
	}
	for _, row := range c.snapshot() {
		s.ByState[row.md.State.String()]++
		if row.stuck != "" {
			s.Stuck++
		}
	}
	return s
}

// Add adds o's counters, transactions by state and stuck count to s (the
// coordinators of several partitions as one); CoordinatorEpoch becomes -1.
func (s *Stats) Add(o Stats) {
	s.CoordinatorEpoch = -1
	if s.ByState == nil {
		s.ByState = map[string]int{}
	}
	for k, v := range o.ByState {
		s.ByState[k] += v
	}
	s.Stuck += o.Stuck
	s.InitProducerID += o.InitProducerID
	s.AddPartitions += o.AddPartitions
	s.AddOffsets += o.AddOffsets
	s.EndTxn += o.EndTxn
	s.TimeoutAborts += o.TimeoutAborts
	s.FenceAborts += o.FenceAborts
	s.OperatorAborts += o.OperatorAborts
	s.Completions += o.Completions
	s.Expirations += o.Expirations
}

// registerMetrics exposes Stats to Prometheus, computed at scrape time.
func (c *Coordinator) registerMetrics() {
	if c.cfg.Metrics == nil {
		return
	}
	c.cfg.Metrics.MustRegister(StatsCollector(c.Stats), c.endTxnLatency)
}

// NewEndTxnLatency is the EndTxn latency histogram: from the request's
// handling to its answer, which waits for the durable Prepare.
func NewEndTxnLatency() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "txncoord_coordinator_end_txn_seconds",
		Help:    "EndTxn latency until the answer (after the Prepare record is durable), by result.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100 µs .. 3.3 s
	}, []string{"result"})
}

var (
	descTxns   = prometheus.NewDesc("txncoord_coordinator_transactions", "Transactions by state.", []string{"state"}, nil)
	descEpoch  = prometheus.NewDesc("txncoord_coordinator_epoch", "Coordinator epoch.", nil, nil)
	descStuck  = prometheus.NewDesc("txncoord_coordinator_stuck_transactions", "Transactions whose markers are stuck.", nil, nil)
	descReqs   = prometheus.NewDesc("txncoord_coordinator_requests_total", "Coordinator requests by API.", []string{"api"}, nil)
	descEvents = prometheus.NewDesc("txncoord_coordinator_events_total", "Coordinator-initiated events.", []string{"event"}, nil)
)

// StatsCollector exposes stats() to Prometheus, computed at scrape time:
// one coordinator's Stats, or the sum of several (txnrouter; Add), whose
// CoordinatorEpoch is then left out (each partition has its own).
func StatsCollector(stats func() Stats) prometheus.Collector { return statsCollector{stats} }

type statsCollector struct{ stats func() Stats }

func (sc statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTxns, descEpoch, descStuck, descReqs, descEvents} {
		ch <- d
	}
}

func (sc statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := sc.stats()
	for i := txnlog.Empty; i <= txnlog.CompleteAbort; i++ {
		ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, float64(s.ByState[i.String()]), i.String())
	}
	if s.CoordinatorEpoch >= 0 {
		ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(s.CoordinatorEpoch))
	}
	ch <- prometheus.MustNewConstMetric(descStuck, prometheus.GaugeValue, float64(s.Stuck))
	for api, v := range map[string]uint64{"InitProducerId": s.InitProducerID, "AddPartitionsToTxn": s.AddPartitions, "AddOffsetsToTxn": s.AddOffsets, "EndTxn": s.EndTxn} {
		ch <- prometheus.MustNewConstMetric(descReqs, prometheus.CounterValue, float64(v), api)
	}
	for ev, v := range map[string]uint64{"timeout_abort": s.TimeoutAborts, "fence_abort": s.FenceAborts, "operator_abort": s.OperatorAborts, "complete": s.Completions, "expire": s.Expirations} {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(v), ev)
	}
}
