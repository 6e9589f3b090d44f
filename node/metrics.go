package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/txnlog"
)

// storeCollector exposes the transaction log's group-commit counters:
// fsync rounds of the process log and the state transitions made durable,
// so transitions per fsync is their ratio.
type storeCollector struct {
	store *txnlog.BoltStore
}

var (
	descLogCommits = prometheus.NewDesc("txncoord_txnlog_fsyncs_total",
		"Group commits (one fdatasync each) of the process log the transaction log writes in.", nil, nil)
	descLogBatches = prometheus.NewDesc("txncoord_txnlog_batches_total",
		"Store writes committed (several share one fsync under group commit).", nil, nil)
	descLogTransitions = prometheus.NewDesc("txncoord_txnlog_transitions_total",
		"Transaction state transitions committed.", nil, nil)
)

func (s storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLogCommits
	ch <- descLogBatches
	ch <- descLogTransitions
}

func (s storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.store.Stats()
	ch <- prometheus.MustNewConstMetric(descLogCommits, prometheus.CounterValue, float64(st.Commits))
	ch <- prometheus.MustNewConstMetric(descLogBatches, prometheus.CounterValue, float64(st.Batches))
	ch <- prometheus.MustNewConstMetric(descLogTransitions, prometheus.CounterValue, float64(st.Transitions))
}
