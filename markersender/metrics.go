package markersender

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/internal/promreg"
)

type metrics struct {
	sent         *prometheus.CounterVec // leader, version
	errors       *prometheus.CounterVec // error
	stuck        prometheus.Gauge       // transactions
	versionInUse *prometheus.GaugeVec   // leader
	perRequest   prometheus.Histogram   // partition markers per request
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txncoord_markers_sent_total",
			Help: "Partition markers sent in WriteTxnMarkers requests, by leader and request version.",
		}, []string{"leader", "version"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txncoord_marker_errors_total",
			Help: "Partition marker failures, by Kafka error name (CONNECTION for a failed request).",
		}, []string{"error"}),
		stuck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "txncoord_marker_stuck_transactions",
			Help: "Transactions whose markers are stuck until an operator retries or aborts them.",
		}),
		versionInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "txncoord_marker_version_in_use",
			Help: "WriteTxnMarkers version negotiated with each leader (-1 before the first negotiation).",
		}, []string{"leader"}),
		perRequest: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "txncoord_markers_per_request",
			Help:    "Partition markers per WriteTxnMarkers request.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
	}
	if reg != nil {
		m.sent = promreg.Register(reg, m.sent)
		m.errors = promreg.Register(reg, m.errors)
		m.stuck = promreg.Register(reg, m.stuck)
		m.versionInUse = promreg.Register(reg, m.versionInUse)
		m.perRequest = promreg.Register(reg, m.perRequest)
	}
	return m
}

func leaderLabel(id int32) string { return strconv.Itoa(int(id)) }

// leaderSeries are one leader's series, looked up once: a labelled lookup
// hashes and compares its label strings on every request. A version's
// sent series is made at its first use, so a version never sent to the
// leader has none.
type leaderSeries struct {
	m     *metrics
	label string
	inUse prometheus.Gauge
	sent  [3]atomic.Pointer[prometheus.Counter] // by request version
}

func (m *metrics) forLeader(id int32) *leaderSeries {
	label := leaderLabel(id)
	return &leaderSeries{m: m, label: label, inUse: m.versionInUse.WithLabelValues(label)}
}

// sentAt is the leader's txncoord_markers_sent_total series for version v.
func (ls *leaderSeries) sentAt(v int16) prometheus.Counter {
	if v < 0 || int(v) >= len(ls.sent) {
		return ls.m.sent.WithLabelValues(ls.label, strconv.Itoa(int(v)))
	}
	if c := ls.sent[v].Load(); c != nil {
		return *c
	}
	c := ls.m.sent.WithLabelValues(ls.label, strconv.Itoa(int(v)))
	ls.sent[v].Store(&c) // a racing first use stores the same series
	return c
}
