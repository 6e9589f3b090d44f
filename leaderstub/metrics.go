package leaderstub

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/wal"
)

// metrics are the leader's Prometheus series, labelled with the node id so
// that several leaders can share one registry (txncoord up).
type metrics struct {
	reg       prometheus.Registerer
	commits   prometheus.Counter
	commitOps prometheus.Histogram
	batches   prometheus.Counter
	markers   *prometheus.CounterVec
	// producersExpired counts producer entries forgotten (expire.go).
	producersExpired prometheus.Counter
	// retentionDeleted counts batches deleted by retention, at a write
	// or by the sweep (retention_sweep.go).
	retentionDeleted prometheus.Counter
	// The log cleaner's (cleaner_run.go): bytes of cleanable parts read,
	// records removed, bytes the logs shrank by, each partition's dirty
	// ratio and when it was last cleaned.
	cleanerBytes     prometheus.Counter
	cleanerRemoved   prometheus.Counter
	cleanerShrunk    prometheus.Counter
	cleanerRatio     *prometheus.GaugeVec
	cleanerLastClean prometheus.Gauge
	collectors       []prometheus.Collector
	// fsyncs counts commits, readable without a registry (benchmarks).
	fsyncs atomic.Int64
}

func newMetrics(reg prometheus.Registerer, nodeID int32) *metrics {
	labels := prometheus.Labels{"leader": strconv.Itoa(int(nodeID))}
	m := &metrics{
		reg: reg,
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_commits_total",
			Help: "group commits (one fdatasync each) that carried the leader's records: of its own process log, or in `txncoord up` of the shared one", ConstLabels: labels}),
		commitOps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_leader_commit_ops",
			Help: "records per group commit of the leader's own process log", ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_produced_batches_total",
			Help: "record batches appended", ConstLabels: labels}),
		markers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txncoord_leader_markers_total",
			Help: "WriteTxnMarkers partitions by request version and error code", ConstLabels: labels},
			[]string{"wtm_version", "error_code"}),
		producersExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_producers_expired_total",
			Help: "producer entries forgotten on a partition after ProducerIDExpiration without a write", ConstLabels: labels}),
		retentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_retention_deleted_batches_total",
			Help: "record batches deleted by retention.ms / retention.bytes, at a write or by the periodic sweep", ConstLabels: labels}),
	}
	m.cleanerBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_cleaner_bytes_cleaned_total",
		Help: "bytes of the cleanable parts of compacted partitions the log cleaner read", ConstLabels: labels})
	m.cleanerRemoved = prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_cleaner_records_removed_total",
		Help: "records and transaction markers the log cleaner removed", ConstLabels: labels})
	m.cleanerShrunk = prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_leader_cleaner_bytes_removed_total",
		Help: "bytes compacted partitions shrank by in the log cleaner", ConstLabels: labels})
	m.cleanerRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "txncoord_leader_cleaner_dirty_ratio",
		Help: "dirty bytes over cleanable bytes of a compacted partition, when the log cleaner last looked", ConstLabels: labels},
		[]string{"topic", "partition"})
	m.cleanerLastClean = prometheus.NewGauge(prometheus.GaugeOpts{Name: "txncoord_leader_cleaner_last_clean_timestamp_seconds",
		Help: "when the log cleaner last cleaned a partition (Unix seconds)", ConstLabels: labels})
	m.collectors = []prometheus.Collector{m.commits, m.commitOps, m.batches, m.markers, m.producersExpired, m.retentionDeleted,
		m.cleanerBytes, m.cleanerRemoved, m.cleanerShrunk, m.cleanerRatio, m.cleanerLastClean}
	if reg != nil {
		for _, c := range m.collectors {
			reg.Register(c) // a duplicate (re-opened leader) keeps the first series
		}
	}
	return m
}

// observeSync counts a group commit of the leader's own process log (a
// leader in a separate process; in `txncoord up` the store's series count
// the shared log's).
func (m *metrics) observeSync(s wal.SyncStats) {
	m.fsyncs.Add(1)
	m.commits.Inc()
	m.commitOps.Observe(float64(s.Records))
}

// observeSharedCommit counts a group commit of the shared process log of
// `txncoord up` that carried records of this leader (its records per
// commit are not known there: commitOps stays a separate leader's).
func (m *metrics) observeSharedCommit(wal.SyncStats) {
	m.fsyncs.Add(1)
	m.commits.Inc()
}

func (m *metrics) marker(version, code int16) {
	m.markers.WithLabelValues(strconv.Itoa(int(version)), strconv.Itoa(int(code))).Inc()
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}

// setDirtyRatio records a partition's dirty ratio; a partition that is not
// compacted has no series.
func (m *metrics) setDirtyRatio(topic string, partition int32, compact bool, ratio float64) {
	labels := []string{topic, strconv.Itoa(int(partition))}
	if !compact {
		m.cleanerRatio.DeleteLabelValues(labels...)
		return
	}
	m.cleanerRatio.WithLabelValues(labels...).Set(ratio)
}

// cleaned counts one partition's clean.
func (m *metrics) cleaned(r CleanResult, now time.Time) {
	m.cleanerBytes.Add(float64(r.BytesCleaned))
	m.cleanerRemoved.Add(float64(r.RecordsRemoved))
	m.cleanerShrunk.Add(float64(max(r.BytesRemoved, 0)))
	m.cleanerLastClean.Set(float64(now.UnixMilli()) / 1000)
}
