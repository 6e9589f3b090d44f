package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txncoord/txncoord/groupcommit"
)

// SharedLogFile is the file `txncoord up` keeps every node's data in.
const SharedLogFile = "txncoord.db"

// openSharedLog opens DATA_DIR/txncoord.db, the one bbolt file the
// embedded coordinator and leaders write in, each in its own top-level
// bucket ("coordinator", "leader-<id>"). One group commit then carries the
// writes of every node: at 64 producers one fsync round instead of one per
// node, which is most of the disk's and much of the CPU's work.
//
// A data dir written by an earlier txncoord keeps its per-node files
// (coordinator/txnlog.db, leader-<id>/leader-<id>.db): opening it returns
// nil and the nodes use those files, so nothing already stored is lost.
func openSharedLog(dataDir string, noSync bool, reg prometheus.Registerer) (*groupcommit.Log, error) {
	legacy, err := hasPerNodeFiles(dataDir)
	if err != nil || legacy {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_store_commit_seconds",
		Help:    "Duration of one group commit of the shared data file (bbolt Update, fdatasync included).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)})
	ops := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_store_commit_ops",
		Help:    "Writes (of every node) carried by one group commit of the shared data file.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	pages := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_store_commit_pages",
		Help:    "4 KiB pages written by one group commit of the shared data file.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	if reg != nil {
		reg.MustRegister(took, ops, pages)
	}
	l, err := groupcommit.Open(filepath.Join(dataDir, SharedLogFile), groupcommit.Options{NoSync: noSync,
		Observe: func(c groupcommit.CommitStats) {
			ops.Observe(float64(c.Ops))
			pages.Observe(float64(c.Pages))
			took.Observe(c.Took.Seconds())
		}})
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	return l, nil
}

// hasPerNodeFiles reports whether dataDir holds the per-node layout of
// txncoord before the shared file (and not the shared file).
func hasPerNodeFiles(dataDir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dataDir, SharedLogFile)); err == nil {
		return false, nil
	}
	matches, err := filepath.Glob(filepath.Join(dataDir, "leader-*", "leader-*.db"))
	if err != nil {
		return false, err
	}
	if len(matches) > 0 {
		return true, nil
	}
	_, err = os.Stat(filepath.Join(dataDir, "coordinator", "txnlog.db"))
	return err == nil, nil
}
