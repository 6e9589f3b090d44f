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
	TransactionalID          string                  `json:"transactional_id"`
	ProducerID               int64                   `json:"producer_id"`
	ProducerEpoch            int16                   `json:"producer_epoch"`
	LastProducerEpoch        int16                   `json:"last_producer_epoch"`
	PrevProducerID           int64                   `json:"prev_producer_id"`
	NextProducerID           int64                   `json:"next_producer_id"`
	State                    string                  `json:"state"`
	TimeoutMs                int32                   `json:"timeout_ms"`
	StartTimestamp           int64                   `json:"start_timestamp_ms"`
	LastUpdateTimestamp      int64                   `json:"last_update_timestamp_ms"`
	Partitions               []txnlog.TopicPartition `json:"partitions"`
	ClientTransactionVersion int16                   `json:"client_transaction_version"`
	CoordinatorEpoch         int32                   `json:"coordinator_epoch"`
	Pending                  bool                    `json:"pending"`
	StuckReason              string                  `json:"stuck_reason,omitempty"`
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
		if e.md != nil && !e.deleted {
			rows = append(rows, snapshotRow{md: e.md.Clone(), pending: e.pending, stuck: e.stuck})
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
		m := &row.md
		d := durationMs(m, now)
		switch {
		case len(f.States) > 0 && !slices.Contains(f.States, m.State):
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID):
		case f.MinDuration > 0 && d < f.MinDuration.Milliseconds():
		case f.IDPattern != nil && !f.IDPattern.MatchString(m.TransactionalID):
		default:
			out = append(out, TxnSummary{
				TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
				State: m.State.String(), DurationMs: d, StuckReason: row.stuck,
			})
		}
	}
	return out
}

// Describe returns one transaction.
func (c *Coordinator) Describe(txnID string) (TxnDetail, bool) {
	e := c.lock(txnID, false)
	if e == nil {
		return TxnDetail{}, false
	}
	defer e.mu.Unlock()
	if e.md == nil {
		return TxnDetail{}, false
	}
	m := e.md
	return TxnDetail{
		TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		LastProducerEpoch: m.LastProducerEpoch, PrevProducerID: m.PrevProducerID, NextProducerID: m.NextProducerID,
		State: m.State.String(), TimeoutMs: m.TimeoutMs, StartTimestamp: m.StartTimestamp,
		LastUpdateTimestamp: m.LastUpdateTimestamp, Partitions: append([]txnlog.TopicPartition{}, m.Partitions...),
		ClientTransactionVersion: m.ClientTransactionVersion, CoordinatorEpoch: c.epoch,
		Pending: e.pending, StuckReason: e.stuck, Completing: m.Clone().Completing,
	}, true
}

// Abort aborts an Ongoing transaction as a timeout would (epoch bump,
// markers with the cluster TV) and returns once the PrepareAbort is
// durable. Other states are refused with an error wrapping the Kafka code:
// TRANSACTIONAL_ID_NOT_FOUND, CONCURRENT_TRANSACTIONS (a transition is in
// flight or markers are being written) or INVALID_TXN_STATE.
func (c *Coordinator) Abort(ctx context.Context, txnID string) error {
	now := c.nowMs()
	var state string
	var missing bool
	d := c.step(txnID, false, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
		switch {
		case cur == nil:
			missing = true
			return fail(kerr.TransactionalIDNotFound.Code)
		case pending || isPrepare(cur.State):
			state = cur.State.String()
			return fail(kerr.ConcurrentTransactions.Code)
		case cur.Completing != nil:
			state = "Ongoing while its previous transaction's markers are written"
			return fail(kerr.ConcurrentTransactions.Code)
		case cur.State != txnlog.Ongoing:
			state = cur.State.String()
			return fail(kerr.InvalidTxnState.Code)
		}
		return txncore.AbortTimedOut(cur, pending, now, c.serverTV(), pids)
	})
	select {
	case <-d.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case missing:
		return fmt.Errorf("transaction %q: %w", txnID, kerr.TransactionalIDNotFound)
	case d.Err == kerr.ConcurrentTransactions.Code && state != "":
		return fmt.Errorf("transaction %q is %s, already ending: %w", txnID, state, kerr.ConcurrentTransactions)
	case d.Err == kerr.InvalidTxnState.Code:
		return fmt.Errorf("transaction %q is %s, not Ongoing: nothing to abort: %w", txnID, state, kerr.InvalidTxnState)
	case d.Err != 0:
		return fmt.Errorf("transaction %q: %w", txnID, kerr.ErrorForCode(d.Err))
	}
	c.counters.operatorAborts.Add(1)
	c.log.Warn().Str("txn_id", txnID).Msg("transaction aborted by an operator")
	return nil
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

// registerMetrics exposes Stats to Prometheus, computed at scrape time.
func (c *Coordinator) registerMetrics() {
	if c.cfg.Metrics == nil {
		return
	}
	c.cfg.Metrics.MustRegister(statsCollector{c}, c.endTxnLatency)
}

// newEndTxnLatency is the EndTxn latency histogram: from the request's
// handling to its answer, which waits for the durable Prepare.
func newEndTxnLatency() *prometheus.HistogramVec {
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

type statsCollector struct{ c *Coordinator }

func (sc statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTxns, descEpoch, descStuck, descReqs, descEvents} {
		ch <- d
	}
}

func (sc statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := sc.c.Stats()
	for i := txnlog.Empty; i <= txnlog.CompleteAbort; i++ {
		ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, float64(s.ByState[i.String()]), i.String())
	}
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(s.CoordinatorEpoch))
	ch <- prometheus.MustNewConstMetric(descStuck, prometheus.GaugeValue, float64(s.Stuck))
	for api, v := range map[string]uint64{"InitProducerId": s.InitProducerID, "AddPartitionsToTxn": s.AddPartitions, "AddOffsetsToTxn": s.AddOffsets, "EndTxn": s.EndTxn} {
		ch <- prometheus.MustNewConstMetric(descReqs, prometheus.CounterValue, float64(v), api)
	}
	for ev, v := range map[string]uint64{"timeout_abort": s.TimeoutAborts, "fence_abort": s.FenceAborts, "operator_abort": s.OperatorAborts, "complete": s.Completions, "expire": s.Expirations} {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(v), ev)
	}
}
