package node

import (
	"errors"
	"fmt"
	"github.com/txncoord/txncoord/authmeta"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wal"
)

// SharedStoreFile is the bbolt file `txncoord up` keeps every node's state
// in, each node in its own top-level bucket ("coordinator",
// "leader-<id>"); the process log is the folder storage.WALDir beside it.
const SharedStoreFile = "txncoord.db"

// RecordCodecs are the record kinds of every component a process may run:
// what storage.Open needs to replay any process log of txncoord.
var RecordCodecs = map[storage.Kind]storage.ApplyFunc{
	storage.KindTxn:      txnlog.ApplyRecord,
	storage.KindLeader:   leaderstub.ApplyRecord,
	storage.KindGroup:    groups.ApplyRecord,
	storage.KindTopic:    topics.ApplyRecord,
	storage.KindAuthMeta: authmeta.ApplyRecord,
}

// RecordBatchCodecs are the kinds of RecordCodecs the applier writes a
// space's records of at once (storage.BatchApplyFunc).
var RecordBatchCodecs = map[storage.Kind]storage.BatchApplyFunc{
	storage.KindTxn:    txnlog.ApplyRecords,
	storage.KindLeader: leaderstub.ApplyRecords,
}

// openSharedStore opens DATA_DIR/txncoord.db and the process log beside
// it: every node of `txncoord up` appends to that one log, so one
// fdatasync carries the records of every node, and the order of the log
// makes a record durable only with those appended before it (the
// coordinator's registration before the leader's data, a leader's marker
// before the coordinator's Complete).
func openSharedStore(dataDir string, noSync bool, fs wal.FS, reg prometheus.Registerer, log zerolog.Logger) (*storage.Store, error) {
	if legacy, err := hasPerNodeFiles(dataDir); err != nil {
		return nil, err
	} else if legacy {
		return nil, fmt.Errorf("data dir %s has the per-node layout of txncoord before the shared store (coordinator/txnlog.db, leader-N/leader-N.db), "+
			"which `txncoord up` no longer opens: start it with the release that wrote it, or run its nodes as separate processes (txncoord coordinator / txncoord leader), which still open that layout", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	obs := newStoreObserver(reg)
	st, err := storage.Open(filepath.Join(dataDir, SharedStoreFile), storage.Options{NoSync: noSync, Log: log, FS: fs,
		Kinds: RecordCodecs, BatchKinds: RecordBatchCodecs, OnSync: obs.sync, OnApply: obs.apply, CommitDelay: sharedCommitDelay})
	if err != nil {
		return nil, err // it names the data dir or the file
	}
	watchStoreFailure(reg, st)
	if reg != nil {
		reg.MustRegister(storeTotals(st))
	}
	return st, nil
}

// sharedCommitDelay lets a transaction's batches to two leaders, which a
// client sends together, share one fdatasync of the process log when they
// arrive close together: otherwise the second waits for the first's
// fdatasync and then for its own. Measured with one kgo producer, 1
// record to each of 2 partitions: 3.2 group commits a transaction without
// it, 2.6 with 20 µs on a loaded machine; a longer gather costs every
// commit more than it saves (100 µs: 495 txn/s, against 627 at 20 µs).
const sharedCommitDelay = 20 * time.Microsecond

// storeObserver exports a process store's work and its failure.
type storeObserver struct {
	took, records, pages prometheus.Histogram
}

func newStoreObserver(reg prometheus.Registerer) *storeObserver {
	o := &storeObserver{
		took: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_store_commit_seconds",
			Help:    "Duration of one group commit of the process log (the write and its fdatasync).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		records: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_store_commit_ops",
			Help:    "Records (of every node) carried by one group commit of the process log.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		pages: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txncoord_store_apply_pages",
			Help:    "4 KiB pages written by one bbolt commit of the log's applier.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
	}
	if reg != nil {
		reg.MustRegister(o.took, o.records, o.pages)
	}
	return o
}

func (o *storeObserver) sync(s wal.SyncStats) {
	o.took.Observe(s.Took.Seconds())
	o.records.Observe(float64(s.Records))
}

func (o *storeObserver) apply(s storage.ApplyStats) { o.pages.Observe(float64(s.Pages)) }

// watchStoreFailure exports whether st stopped on a failed write.
func watchStoreFailure(reg prometheus.Registerer, st interface{ Err() error }) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "txncoord_store_write_failures_total",
		Help: "Failed writes or fdatasyncs of the process log or its bbolt file: the first one stops every write of the process (fail-stop)."},
		func() float64 {
			if st.Err() != nil {
				return 1
			}
			return 0
		}))
}

// hasPerNodeFiles reports whether dataDir holds the per-node layout of
// txncoord before the shared file (and not the shared file).
func hasPerNodeFiles(dataDir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dataDir, SharedStoreFile)); err == nil {
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

// errStoreFailed wraps a store failure for /readyz.
var errStoreFailed = errors.New("storage failed: every write of this process has stopped; restart it once the cause is fixed")

// PrepareDataDir checks the data dir `txncoord up` is about to open. A dir
// that holds a cluster.yaml has run before, so its store must be there: a
// missing or empty txncoord.db beside it means the state was lost, and
// starting an empty cluster there would silently forget every
// transaction, so it is refused. forceNew starts over instead: the store
// and its log are moved aside (never deleted) and their names returned.
func PrepareDataDir(dataDir string, forceNew bool) (discarded []string, err error) {
	if err := storage.CheckLock(dataDir); err != nil {
		return nil, err
	}
	db := filepath.Join(dataDir, SharedStoreFile)
	if forceNew {
		return storage.Discard(db)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "cluster.yaml")); err != nil {
		return nil, nil // a new data dir
	}
	if legacy, err := hasPerNodeFiles(dataDir); err != nil || legacy {
		return nil, err // openSharedStore says what to do with it
	}
	fi, err := os.Stat(db)
	switch {
	case os.IsNotExist(err):
		return nil, fmt.Errorf("%s is missing, but %s has a cluster.yaml: the cluster's state is gone; "+
			"restore the file, or start over with --force-new-cluster", db, dataDir)
	case err != nil:
		return nil, err
	case fi.Size() == 0:
		return nil, fmt.Errorf("%s is empty (0 bytes), but %s has a cluster.yaml: the cluster's state is gone; "+
			"restore the file, or start over with --force-new-cluster", db, dataDir)
	}
	return nil, nil
}
