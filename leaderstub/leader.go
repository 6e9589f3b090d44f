package leaderstub

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wire"
)

// DefaultRetentionBytes is the per-partition retention (1 GiB).
const DefaultRetentionBytes = 1 << 30

// Config configures a Leader.
type Config struct {
	NodeID       int32
	KafkaVersion string // this leader's profile ("4.2"); may differ from the cluster file (upgrade tests)
	View         *cluster.View
	DataDir      string // the bbolt file is DataDir/leader-<NodeID>.db and its log DataDir/wal, unless Shared is set
	// Shared, when set, is the store of this process shared with its
	// other nodes (`txncoord up`): the leader writes in its bucket
	// "leader-<NodeID>" and its records share the process log with
	// theirs. It must know KindLeader. The caller closes it after the
	// leader. DataDir and NoSync are then unused.
	Shared         *storage.Store
	Coordinator    coordclient.Client
	RetentionBytes int64 // per partition, default 1 GiB
	NoSync         bool  // only for an explicit unsafe opt-in; never the default
	Log            zerolog.Logger
	Now            func() time.Time
	Metrics        prometheus.Registerer // may be nil

	// RegistrationsInFlight bounds the AddPartitionsToTxn requests this
	// leader has in flight to each coordinator at once (default
	// coordclient.DefaultRegistrationsInFlight).
	RegistrationsInFlight int
	// PrevTxnMarkerWait caps how long a transactional batch at a bumped
	// epoch waits for the marker of its producer's previous transaction on
	// that partition (00_produce.go): the Produce request's timeout, at
	// most this (default DefaultPrevTxnMarkerWait). Tests shorten it.
	PrevTxnMarkerWait time.Duration
	// ProducerIDExpiration is how long a producer with no open
	// transaction is kept on a partition after its last write (Kafka's
	// producer.id.expiration.ms; default DefaultProducerIDExpiration),
	// checked every ProducerIDExpirationCheck (default
	// DefaultProducerIDExpirationCheck, or the expiration if shorter).
	// See expire.go.
	ProducerIDExpiration      time.Duration
	ProducerIDExpirationCheck time.Duration
	// RetentionCheckInterval is how often retention is applied to every
	// partition, written or idle (Kafka's
	// log.retention.check.interval.ms; default
	// DefaultRetentionCheckInterval). See retention_sweep.go.
	RetentionCheckInterval time.Duration
	// CleanerBackoff is how often the log cleaner looks at the
	// partitions of compacted topics (Kafka's log.cleaner.backoff.ms;
	// default DefaultCleanerBackoff). See cleaner_run.go.
	CleanerBackoff time.Duration
}

// shareLockSweep is how often expired share acquisition locks are
// released (Kafka times each lock; a record is redelivered at most this
// much later than its lock's end).
const shareLockSweep = 200 * time.Millisecond

// DefaultPrevTxnMarkerWait is the default Config.PrevTxnMarkerWait.
const DefaultPrevTxnMarkerWait = 10 * time.Second

// Leader is one partition leader: it owns the partitions the cluster view
// assigns to NodeID.
type Leader struct {
	cfg       Config
	log       zerolog.Logger
	space     *storage.Space
	own       *storage.Store // the leader's own store (no Config.Shared)
	registrar *coordclient.Registrar
	metrics   *metrics

	mu         sync.Mutex
	partitions map[string]*partition // by partitionKey

	changeMu sync.Mutex
	changed  chan struct{} // closed whenever a watermark moves; nil until a Fetch waits

	markersMu sync.Mutex
	markers   markerRing

	sessions *fetchSessionCache // Fetch sessions (fetch_sessions.go)
	shares   *shareState        // share partitions and sessions (share_partitions.go)

	cleanMu sync.Mutex // one CleanLogs at a time (cleaner_run.go)

	stop       chan struct{}
	background sync.WaitGroup // the every loops (producer expiry, retention); Close waits for them
	closeOnce  sync.Once
}

// ReceivedMarker is one partition of a WriteTxnMarkers request as this
// leader received and answered it.
type ReceivedMarker struct {
	RequestVersion     int16
	TransactionVersion int8
	ProducerID         int64
	ProducerEpoch      int16
	Commit             bool
	CoordinatorEpoch   int32
	Topic              string
	Partition          int32
	ErrorCode          int16
}

// receivedMarkersCap bounds the ReceivedMarkers ring.
const receivedMarkersCap = 10000

// Open opens (or creates) the leader's store and recovers every partition.
func Open(cfg Config) (*Leader, error) {
	if cfg.View == nil {
		return nil, errors.New("leaderstub: no cluster view")
	}
	if cfg.Coordinator == nil {
		return nil, errors.New("leaderstub: no coordinator client")
	}
	if cfg.RetentionBytes <= 0 {
		cfg.RetentionBytes = DefaultRetentionBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PrevTxnMarkerWait <= 0 {
		cfg.PrevTxnMarkerWait = DefaultPrevTxnMarkerWait
	}
	if cfg.ProducerIDExpiration <= 0 {
		cfg.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	if cfg.ProducerIDExpirationCheck <= 0 {
		// A short expiration (tests, throwaway clusters) is checked
		// as often as it lasts.
		cfg.ProducerIDExpirationCheck = min(DefaultProducerIDExpirationCheck, cfg.ProducerIDExpiration)
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if cfg.CleanerBackoff <= 0 {
		cfg.CleanerBackoff = DefaultCleanerBackoff
	}
	l := &Leader{
		cfg:        cfg,
		log:        cfg.Log.With().Int32("leader", cfg.NodeID).Logger(),
		partitions: map[string]*partition{},
		stop:       make(chan struct{}),
		sessions:   newFetchSessionCache(cfg.Now),
		shares:     newShareState(),
	}
	l.metrics = newMetrics(cfg.Metrics, cfg.NodeID)
	sopts := storage.SpaceOptions{Closed: errStoreClosed, OnApplied: l.applied}
	if cfg.Shared != nil {
		// The process log's group commits that carried this leader's
		// records: its commits, as its own log's would be.
		sopts.OnCommit = l.metrics.observeSharedCommit
	}
	name := "leader-" + strconv.Itoa(int(cfg.NodeID))
	st := cfg.Shared
	if st == nil {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			l.metrics.unregister()
			return nil, fmt.Errorf("leaderstub: data dir: %w", err)
		}
		var err error
		st, err = storage.Open(filepath.Join(cfg.DataDir, name+".db"), storage.Options{NoSync: cfg.NoSync, Log: l.log,
			Kinds:      map[storage.Kind]storage.ApplyFunc{storage.KindLeader: ApplyRecord},
			BatchKinds: map[storage.Kind]storage.BatchApplyFunc{storage.KindLeader: ApplyRecords}, OnSync: l.metrics.observeSync})
		if err != nil {
			l.metrics.unregister()
			return nil, fmt.Errorf("leaderstub: %w", err)
		}
		if cfg.NoSync {
			l.log.Warn().Msg("NoSync is on: acknowledged writes can be lost on a crash")
		}
		l.own = st
		name = "" // a file of its own: the leader's buckets at its top level
	}
	var err error
	if l.space, err = st.Space(name, storage.KindLeader, sopts); err != nil {
		if l.own != nil {
			l.own.Close()
		}
		l.metrics.unregister()
		return nil, fmt.Errorf("leaderstub: %w", err)
	}
	if err := l.recover(); err != nil {
		l.closeStore()
		l.metrics.unregister()
		return nil, err
	}
	l.registrar = coordclient.NewRegistrar(cfg.Coordinator, cfg.RegistrationsInFlight, l.log)
	for _, p := range []struct {
		interval time.Duration
		task     func() (int, error)
		failed   string
	}{
		{shareLockSweep, l.expireShareLocks, "expired share locks not written"},
		{l.cfg.ProducerIDExpirationCheck, l.ExpireProducers, "producer expiry not written"},
		{l.cfg.RetentionCheckInterval, l.SweepRetention, "retention sweep not written"},
		{l.cfg.CleanerBackoff, l.cleanLoop, "log cleaner: clean not written"},
	} {
		l.background.Add(1)
		go l.every(p.interval, p.task, p.failed)
	}
	return l, nil
}

func (l *Leader) recover() error {
	return l.space.View(func(r storage.Root) error {
		if err := l.recoverShares(r); err != nil {
			return err
		}
		root := r.Bucket(bucketPartitions)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(k []byte) error {
			topic, index, err := parsePartitionKey(k)
			if err != nil {
				return err
			}
			p, err := loadPartition(topic, index, root.Bucket(k))
			if err != nil {
				return fmt.Errorf("leaderstub: recover %s/%d: %w", topic, index, err)
			}
			// A topic auto-created before the restart is created
			// again: every node derives the same one from its name.
			if _, ok := l.cfg.View.Topic(topic); !ok {
				l.cfg.View.EnsureTopic(topic)
			}
			l.partitions[string(p.key)] = p
			l.log.Info().Str("topic", topic).Int32("partition", index).Int64("log_start", p.logStart).
				Int64("log_end", p.nextOffset).Int("producers", len(p.producers)).Int64("lso", p.lso()).Msg("partition recovered")
			return nil
		})
	})
}

// Register adds the leader's handlers: Produce, Fetch, ListOffsets,
// InitProducerId (null transactional id, forwarded), WriteTxnMarkers,
// DescribeProducers, DeleteRecords, OffsetForLeaderEpoch and
// DescribeLogDirs. Metadata, FindCoordinator and ApiVersions come from the
// node assembly.
func (l *Leader) Register(reg *wire.Registry) {
	apis.Register(reg, l)
	reg.OnDisconnect(l.connectionEnded)
}

// Close stops the registrar, commits what is queued, and closes the store.
func (l *Leader) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.stop)
		l.background.Wait()
		l.registrar.Close()
		err = l.closeStore()
		l.metrics.unregister()
	})
	return err
}

// ReceivedMarkers returns what this leader received in WriteTxnMarkers,
// newest last.
func (l *Leader) ReceivedMarkers() []ReceivedMarker {
	l.markersMu.Lock()
	defer l.markersMu.Unlock()
	return l.markers.all()
}

func (l *Leader) recordMarkers(ms []ReceivedMarker) {
	l.markersMu.Lock()
	l.markers.add(ms)
	l.markersMu.Unlock()
}

// markerRing keeps the last receivedMarkersCap markers: its array grows by
// append up to the cap, then is written over in turn, so that recording a
// marker allocates nothing. (A slice trimmed by copying regrew from the cap
// to twice it and was copied again, ~4 MB allocated every 10,000 markers.)
type markerRing struct {
	buf  []ReceivedMarker
	next int // once full, where the next marker goes: buf[next:] are the oldest
}

func (r *markerRing) add(ms []ReceivedMarker) {
	for _, m := range ms {
		if len(r.buf) < receivedMarkersCap {
			r.buf = append(r.buf, m)
			continue
		}
		r.buf[r.next] = m
		r.next = (r.next + 1) % len(r.buf)
	}
}

// all returns a copy of the ring, oldest first.
func (r *markerRing) all() []ReceivedMarker {
	out := make([]ReceivedMarker, 0, len(r.buf))
	return append(append(out, r.buf[r.next:]...), r.buf[:r.next]...)
}

// partitionFor resolves a partition this leader serves: an unknown topic or
// partition is UNKNOWN_TOPIC_OR_PARTITION, another node's partition
// NOT_LEADER_OR_FOLLOWER.
func (l *Leader) partitionFor(topic string, index int32) (*partition, *kerr.Error) {
	t, ok := l.cfg.View.Topic(topic)
	if !ok || index < 0 || index >= t.Partitions {
		return nil, kerr.UnknownTopicOrPartition
	}
	if n, ok := l.cfg.View.LeaderOf(topic, index); !ok || n.NodeID != l.cfg.NodeID {
		return nil, kerr.NotLeaderForPartition
	}
	key := partitionKey(topic, index)
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.partitions[string(key)]
	if !ok {
		p = newPartition(topic, index)
		l.partitions[string(key)] = p
	}
	return p, nil
}

// topicName resolves a request topic: by id from the versions that carry
// ids, else by name. An unknown id is UNKNOWN_TOPIC_ID.
func (l *Leader) topicName(name string, id [16]byte, byID bool) (string, *kerr.Error) {
	if !byID {
		return name, nil
	}
	t, ok := l.cfg.View.TopicByID(id)
	if !ok {
		return "", kerr.UnknownTopicID
	}
	return t.Name, nil
}

// notify wakes every waiting Fetch. The channel is made by the first
// waiter (changes): every durable write notifies, most with nobody
// waiting.
func (l *Leader) notify() {
	l.changeMu.Lock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.changeMu.Unlock()
}

// changes is closed at the next notify.
func (l *Leader) changes() <-chan struct{} {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// sortedPartitions lists the partitions (for tests, DescribeProducers of
// everything and producer expiry).
func (l *Leader) sortedPartitions() []*partition {
	l.mu.Lock()
	out := make([]*partition, 0, len(l.partitions))
	for _, p := range l.partitions {
		out = append(out, p)
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].index < out[j].index
	})
	return out
}

func (l *Leader) nowMillis() int64 { return l.cfg.Now().UnixMilli() }

// errCode turns an error into a Kafka error code.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, errStoreClosed) {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.KafkaStorageError.Code
}

// closeStore closes the leader's space, and its store if it owns one.
func (l *Leader) closeStore() error {
	err := l.space.Close()
	if l.own != nil {
		err = errors.Join(err, l.own.Close())
	}
	return err
}

// applied drops the in-memory bytes of the batches the process log's
// applier has written to bbolt.
func (l *Leader) applied(pos wal.Pos) {
	l.mu.Lock()
	parts := make([]*partition, 0, len(l.partitions))
	for _, p := range l.partitions {
		parts = append(parts, p)
	}
	l.mu.Unlock()
	for _, p := range parts {
		p.applied(pos)
	}
}

// every runs task each interval until Close (Kafka's periodic log-manager
// checks: producer-id expiration, retention); a failed task is logged
// with failed, and the loop goes on (its store is offline then, as after
// any failed write). The caller has added it to l.background.
func (l *Leader) every(interval time.Duration, task func() (int, error), failed string) {
	defer l.background.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if _, err := task(); err != nil {
				l.log.Error().Err(err).Msg(failed)
			}
		}
	}
}
