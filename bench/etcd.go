package bench

import (
	"math"
	"strings"
	"time"
)

// The embedded etcd member's counters (its client port serves /metrics;
// go.etcd.io/etcd/server/v3 exports them), kept in Cell.Metrics under
// their own names. Only etcd_ names are kept from that scrape: its go_ and
// process_ series describe the same process as txncoord's admin /metrics.
const (
	etcdMetricPrefix        = "etcd_"
	metricEtcdProposals     = "etcd_server_proposals_committed_total" // Raft entries committed: one per write Txn (and lease grant, ...)
	metricEtcdPuts          = "etcd_mvcc_put_total"                   // keys put, after txnetcd merged a group's writes of one key
	metricEtcdWALFsync      = "etcd_disk_wal_fsync_duration_seconds"  // histogram: one per WAL fsync
	metricEtcdBackendCommit = "etcd_disk_backend_commit_duration_seconds"
)

// EtcdFigures are the embedded etcd's work over a window. NaN: the
// counter was not scraped.
type EtcdFigures struct {
	ProposalsPerSec float64 // Raft proposals committed per second
	ProposalsPerTxn float64 // ... per committed transaction: the etcd Txns a transaction costs after grouping
	PutsPerTxn      float64 // keys written per committed transaction
	WALFsyncsPerSec float64
	WALFsyncMean    time.Duration // mean WAL fsync duration (0 when none)
	// ProposalsPerFsync is how many proposals one WAL fsync made durable:
	// Raft's own batching, on top of txnetcd's grouping.
	ProposalsPerFsync float64
	// DiskBusy is the share of the window spent in WAL fsyncs (their
	// summed durations / the window): near 1 the disk is what bounds etcd.
	DiskBusy             float64
	BackendCommitsPerSec float64 // bbolt commits (batched by etcd, ~every 100 ms)
}

// values are the figures' fields, for taking medians over rounds.
func (f *EtcdFigures) values() []*float64 {
	return []*float64{&f.ProposalsPerSec, &f.ProposalsPerTxn, &f.PutsPerTxn, &f.WALFsyncsPerSec,
		&f.ProposalsPerFsync, &f.DiskBusy, &f.BackendCommitsPerSec}
}

// etcdFigures derives EtcdFigures from the counters' change d over a window
// of elapsed in which committed transactions committed; nil when d holds no
// etcd counter (a target without etcd).
func etcdFigures(d Metrics, elapsed time.Duration, committed int64) *EtcdFigures {
	seen := false
	for name := range d {
		if strings.HasPrefix(name, etcdMetricPrefix) {
			seen = true
			break
		}
	}
	if !seen {
		return nil
	}
	nan := math.NaN()
	get := func(name string) float64 {
		if v, ok := d[name]; ok {
			return v
		}
		return nan
	}
	perSec, perTxn := rates(elapsed, committed)
	proposals := get(metricEtcdProposals)
	fsyncs, fsyncSecs := get(metricEtcdWALFsync+"_count"), get(metricEtcdWALFsync+"_sum")
	f := &EtcdFigures{
		ProposalsPerSec:      perSec(proposals),
		ProposalsPerTxn:      perTxn(proposals),
		PutsPerTxn:           perTxn(get(metricEtcdPuts)),
		WALFsyncsPerSec:      perSec(fsyncs),
		ProposalsPerFsync:    nan,
		DiskBusy:             nan,
		BackendCommitsPerSec: perSec(get(metricEtcdBackendCommit + "_count")),
	}
	if fsyncs > 0 {
		f.ProposalsPerFsync = proposals / fsyncs
		f.WALFsyncMean = time.Duration(fsyncSecs / fsyncs * float64(time.Second))
	}
	if elapsed > 0 {
		f.DiskBusy = fsyncSecs / elapsed.Seconds()
	}
	return f
}

// medianEtcd is the median of each figure over figs (the rounds); nil
// without rounds.
func medianEtcd(figs []EtcdFigures) *EtcdFigures {
	if len(figs) == 0 {
		return nil
	}
	out := &EtcdFigures{}
	for i, dst := range out.values() {
		xs := make([]float64, len(figs))
		for j := range figs {
			xs[j] = *figs[j].values()[i]
		}
		*dst = medianKnown(xs)
	}
	means := make([]float64, len(figs))
	for j := range figs {
		means[j] = float64(figs[j].WALFsyncMean)
	}
	out.WALFsyncMean = time.Duration(median(means))
	return out
}

// keepEtcd adds the etcd_ series of scrape to m.
func keepEtcd(m, scrape Metrics) {
	for name, v := range scrape {
		if strings.HasPrefix(name, etcdMetricPrefix) {
			m[name] = v
		}
	}
}
