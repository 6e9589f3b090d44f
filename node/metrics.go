package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/txnetcd"
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

// etcdWriterCollector exposes the etcd mode's counterpart: the shared
// writer's etcd Txns (one Raft proposal each), the coordinator writes they
// carried and the keys they put, so writes per Txn says how much the
// writer groups and keys per transaction what each costs etcd.
type etcdWriterCollector struct {
	store *txnetcd.Store
}

var (
	descEtcdTxns = prometheus.NewDesc("txncoord_etcd_writer_txns_total",
		"etcd Txns the coordinators' shared writer committed (one Raft proposal each).", nil, nil)
	descEtcdBatches = prometheus.NewDesc("txncoord_etcd_writer_batches_total",
		"Coordinator writes (a transactional id's transitions of one step) those Txns carried.", nil, nil)
	descEtcdKeys = prometheus.NewDesc("txncoord_etcd_writer_keys_total",
		"Keys those Txns put or deleted (writes of one key queued together count once).", nil, nil)
	descEtcdRefused = prometheus.NewDesc("txncoord_etcd_writer_refused_total",
		"Txns refused because a partition in them was fenced out (the others' writes went in a later Txn).", nil, nil)
)

func (c etcdWriterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEtcdTxns
	ch <- descEtcdBatches
	ch <- descEtcdKeys
	ch <- descEtcdRefused
}

func (c etcdWriterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	ch <- prometheus.MustNewConstMetric(descEtcdTxns, prometheus.CounterValue, float64(st.Txns))
	ch <- prometheus.MustNewConstMetric(descEtcdBatches, prometheus.CounterValue, float64(st.Batches))
	ch <- prometheus.MustNewConstMetric(descEtcdKeys, prometheus.CounterValue, float64(st.Transitions))
	ch <- prometheus.MustNewConstMetric(descEtcdRefused, prometheus.CounterValue, float64(st.Refused))
}
