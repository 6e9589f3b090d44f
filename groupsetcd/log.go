package groupsetcd

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wal"
)

// DefaultCommitTimeout bounds one etcd Txn of the writer.
const DefaultCommitTimeout = 10 * time.Second

// Options configures a Log.
type Options struct {
	// OnFail, optional, is called once when the log fails for good
	// (fenced out, or an etcd write failed), with the error every call
	// now returns: the node then closes the group coordinator and, if it
	// still holds the lease, opens a new one, which reloads from etcd. It
	// runs on the writer goroutine after the writer stopped, so it may
	// close the coordinator (and this Log) before it returns.
	OnFail func(error)
	// MaxTxnOps is the etcd server's --max-txn-ops (default
	// txnetcd.DefaultMaxTxnOps).
	MaxTxnOps int
	// CommitTimeout bounds one etcd Txn (default DefaultCommitTimeout):
	// with etcd unreachable, the log fails after that long.
	CommitTimeout time.Duration
	// DataPrefix, optional, is where the records live instead of
	// DataPrefix(layout): PartitionDataPrefix for the groups of one
	// __consumer_offsets partition.
	DataPrefix string
	Log        zerolog.Logger
}

// Log is the group coordinator's record log over etcd, for the holder of
// one fence. Safe for concurrent use.
type Log struct {
	store      *txnetcd.Store
	fence      txnetcd.Fence
	opts       Options
	dataPrefix string
	log        zerolog.Logger

	ctx    context.Context // ends at Close: cuts an etcd call in flight
	cancel context.CancelFunc
	wake   chan struct{} // buffered 1: the queue is not empty
	done   chan struct{} // closed when the writer has stopped

	// positions is the log's durability: positions handed out at
	// Append, durable as the writer commits them, failed for good at the
	// first failure (what every later call returns).
	positions durable.Tracker

	mu      sync.Mutex
	queue   []pending
	stats   Stats
	closing sync.Once

	// beforeCommit, when set (tests), runs before each Txn is sent.
	beforeCommit func()
}

// pending is an appended record: its position and its changes as etcd
// operations, in the record's order.
type pending struct {
	pos wal.Pos
	ops []keyedOp
}

type keyedOp struct {
	key string
	op  clientv3.Op
}

// Stats counts the log's committed work.
type Stats struct {
	Txns    uint64 // etcd Txns committed
	Records uint64 // records made durable
	Keys    uint64 // key changes written (after folding)
}

var _ groups.RecordLog = (*Log)(nil)

// DataPrefix is where the records of the group coordinator of layout
// live: <prefix>/data/.
func DataPrefix(l txnetcd.Layout) string {
	return strings.TrimRight(l.Prefix, "/") + "/data/"
}

// PartitionDataPrefix is where the records of the groups of one
// __consumer_offsets partition live, when each partition has its owner:
// <prefix>/data/<partition>/.
func PartitionDataPrefix(l txnetcd.Layout, partition int32) string {
	return fmt.Sprintf("%s%d/", DataPrefix(l), partition)
}

// Open returns a groups.RecordLog over etcd for the holder of fence f,
// keys under opts.DataPrefix, or DataPrefix(store.Layout()) (f.Partition
// is then 0). The store's
// client is the caller's; Close does not close it.
func Open(store *txnetcd.Store, f txnetcd.Fence, opts Options) *Log {
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = txnetcd.DefaultMaxTxnOps
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	prefix := opts.DataPrefix
	if prefix == "" {
		prefix = DataPrefix(store.Layout())
	}
	l := &Log{store: store, fence: f, opts: opts, dataPrefix: prefix,
		log:  opts.Log.With().Str("component", "groupsetcd").Int32("partition", f.Partition).Logger(),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.write()
	return l
}

// key is the etcd key of a bbolt key of bucket.
func (l *Log) key(bucket, key []byte) string {
	return l.dataPrefix + string(bucket) + "/" + hex.EncodeToString(key)
}

// Append decodes rec and queues its changes behind every record appended
// before it. A record that does not decode is refused and takes no
// position.
func (l *Log) Append(rec []byte) (wal.Pos, error) {
	changes, err := groups.DecodeRecord(rec)
	if err != nil {
		return 0, fmt.Errorf("groupsetcd: %w", err)
	}
	ops := make([]keyedOp, 0, len(changes))
	for _, c := range changes {
		if len(c.Bucket) == 0 || strings.ContainsRune(string(c.Bucket), '/') {
			return 0, fmt.Errorf("groupsetcd: bucket name %q", c.Bucket)
		}
		k := l.key(c.Bucket, c.Key)
		if c.Value == nil {
			ops = append(ops, keyedOp{key: k, op: clientv3.OpDelete(k)})
		} else {
			ops = append(ops, keyedOp{key: k, op: clientv3.OpPut(k, string(c.Value))})
		}
	}
	l.mu.Lock()
	pos, err := l.positions.Next(nil)
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	l.queue = append(l.queue, pending{pos: pos, ops: ops})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return pos, nil
}

// Log is the log itself: nobody else appends to it, so every caller,
// in-process or not, is answered once its record is durable.
func (l *Log) Log() durable.Log { return &l.positions }

// Err is the error that failed or closed the log (nil while it works).
func (l *Log) Err() error { return l.positions.Err() }

// Stats is what the log has committed so far.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// errClosed is the error of a log closed before it failed.
var errClosed = fmt.Errorf("groupsetcd: %w", groups.ErrClosed)

// Close stops the writer (a Txn in flight is cut short: it may still have
// been committed, and its records are not reported durable) and fails
// queued records and waiters with groups.ErrClosed, unless the log had
// failed already (they keep that error). Idempotent; the etcd client is
// the caller's.
func (l *Log) Close() error {
	l.closing.Do(func() {
		l.setErr(errClosed)
		l.cancel()
		<-l.done
	})
	return nil
}

// setErr makes err the log's sticky error unless it has one, drops what
// is queued (it will never be written) and wakes every waiter. It reports
// whether err is now the log's error.
func (l *Log) setErr(err error) bool {
	l.mu.Lock()
	if l.positions.Err() != nil {
		l.mu.Unlock()
		return false
	}
	l.queue = nil
	l.mu.Unlock()
	l.positions.Fail(err)
	return l.positions.Err() == err
}

// failure is the sticky error of a failed commit: it wraps
// groups.ErrClosed, so that the coordinator answers NOT_COORDINATOR and
// clients look for it again, and keeps the cause (txnetcd.ErrNotOwner
// when fenced out).
func failure(cause error) error {
	return fmt.Errorf("groupsetcd: records not written, the group coordinator must reload from etcd: %w (%w)", cause, groups.ErrClosed)
}

// isFenced tells a lost fence from other failures, for the log line.
func isFenced(err error) bool { return errors.Is(err, txnetcd.ErrNotOwner) }
