package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/txnlog"
)

// totals is a collector of counters read from one snapshot of a
// component's stats at each scrape: values returns descs' values, in
// order.
type totals struct {
	descs  []*prometheus.Desc
	values func() []uint64
}

func (c totals) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c totals) Collect(ch chan<- prometheus.Metric) {
	for i, v := range c.values() {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
}

func counterDesc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// txnlogTotals exposes the transaction log's group-commit counters: fsync
// rounds of the process log and the state transitions made durable, so
// transitions per fsync is their ratio.
func txnlogTotals(store *txnlog.BoltStore) totals {
	return totals{descs: txnlogDescs, values: func() []uint64 {
		st := store.Stats()
		return []uint64{st.Commits, st.Batches, st.Transitions}
	}}
}

var txnlogDescs = []*prometheus.Desc{
	counterDesc("txncoord_txnlog_fsyncs_total",
		"Group commits (one fdatasync each) of the process log the transaction log writes in."),
	counterDesc("txncoord_txnlog_batches_total",
		"Store writes committed (several share one fsync under group commit)."),
	counterDesc("txncoord_txnlog_transitions_total",
		"Transaction state transitions committed."),
}

// etcdWriterTotals is the etcd mode's counterpart: the shared writer's
// etcd Txns (one Raft proposal each), the coordinator writes they carried
// and the keys they put, so writes per Txn says how much the writer
// groups and keys per transaction what each costs etcd.
func etcdWriterTotals(store *txnetcd.Store) totals {
	return totals{descs: etcdWriterDescs, values: func() []uint64 {
		st := store.Stats()
		return []uint64{st.Txns, st.Batches, st.Transitions, st.Refused}
	}}
}

var etcdWriterDescs = []*prometheus.Desc{
	counterDesc("txncoord_etcd_writer_txns_total",
		"etcd Txns the coordinators' shared writer committed (one Raft proposal each)."),
	counterDesc("txncoord_etcd_writer_batches_total",
		"Coordinator writes (a transactional id's transitions of one step) those Txns carried."),
	counterDesc("txncoord_etcd_writer_keys_total",
		"Keys those Txns put or deleted (writes of one key queued together count once)."),
	counterDesc("txncoord_etcd_writer_refused_total",
		"Txns refused because a partition in them was fenced out (the others' writes went in a later Txn)."),
}

// storeTotals exports a process store's totals: group commits and
// fdatasyncs of the log, bytes written to it, and the applier's bbolt
// commits and pages, from which the benchmark derives bytes written per
// transaction.
func storeTotals(st *storage.Store) totals {
	return totals{descs: storeDescs, values: func() []uint64 {
		s := st.Stats()
		return []uint64{s.Syncs, s.Fdatasyncs, s.Bytes, s.Applies, s.Pages, s.SegmentsFilled, s.SegmentsRecycled}
	}}
}

var storeDescs = []*prometheus.Desc{
	counterDesc("txncoord_store_group_commits_total", "Group commits of the process log."),
	counterDesc("txncoord_store_fdatasync_calls_total",
		"fdatasync calls of the process log: one per group commit, plus one when a new segment file starts."),
	counterDesc("txncoord_store_log_bytes_total", "Bytes written to the process log (records and their frames)."),
	counterDesc("txncoord_store_apply_commits_total", "bbolt commits of the log's applier."),
	counterDesc("txncoord_store_apply_pages_total", "4 KiB pages the log's applier wrote to bbolt."),
	counterDesc("txncoord_store_log_segments_filled_total",
		"Segments of the process log filled with zeros ahead of need (a segment's size written to the disk)."),
	counterDesc("txncoord_store_log_segments_recycled_total",
		"Segments of the process log prepared ahead by reusing one the applier no longer needed (nothing written)."),
}
