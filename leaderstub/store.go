package leaderstub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/bbolt"
)

// The bbolt layout of a leader (one file per leader, DataDir/leader-<id>.db):
//
//	partitions/<topic>\x00<partition>/
//	    log/      base offset (8 bytes BE) → the batch as stored and fetched
//	    producers/ producer id (8 bytes BE) → producerEntry.marshal()
//	    aborted/  marker offset (8 bytes BE) → AbortedTxn (34 bytes, Kafka's .txnindex entry)
//	    meta/     "log_start" → int64
var (
	bucketPartitions = []byte("partitions")
	bucketLog        = []byte("log")
	bucketProducers  = []byte("producers")
	bucketAborted    = []byte("aborted")
	bucketMeta       = []byte("meta")
	keyLogStart      = []byte("log_start")
)

func partitionKey(topic string, partition int32) []byte {
	return []byte(topic + "\x00" + strconv.Itoa(int(partition)))
}

func parsePartitionKey(k []byte) (string, int32, error) {
	topic, p, ok := strings.Cut(string(k), "\x00")
	n, err := strconv.Atoi(p)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("leaderstub: bad partition bucket %q", k)
	}
	return topic, int32(n), nil
}

func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// partitionBuckets opens (creating) the sub-buckets of one partition.
func partitionBuckets(tx *bbolt.Tx, key []byte) (log, producers, aborted, meta *bbolt.Bucket, err error) {
	root, err := tx.CreateBucketIfNotExists(bucketPartitions)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	pb, err := root.CreateBucketIfNotExists(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	get := func(name []byte) *bbolt.Bucket {
		if err != nil {
			return nil
		}
		var b *bbolt.Bucket
		b, err = pb.CreateBucketIfNotExists(name)
		return b
	}
	log, producers, aborted, meta = get(bucketLog), get(bucketProducers), get(bucketAborted), get(bucketMeta)
	return log, producers, aborted, meta, err
}

// writeOp is one durable change. apply runs inside the shared bbolt
// transaction; durable runs after the commit (fsync) succeeded, in the
// order the ops were queued, and may advance in-memory watermarks.
type writeOp struct {
	apply   func(tx *bbolt.Tx) error
	durable func()
	done    chan error
}

// wait blocks until the op is durable or failed.
func (op *writeOp) wait() error { return <-op.done }

// committer is the single writer: it drains every queued op into one bbolt
// Update (one fsync for all of them) without waiting on a timer, as
// hashicorp/raft's group commit does. While one Update is syncing, new ops
// pile up and go into the next one.
type committer struct {
	db       *bbolt.DB
	perOp    bool // one Update per op: the baseline for the benchmark
	mu       sync.Mutex
	queue    []*writeOp
	failed   error
	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	onCommit func(ops int)
}

func newCommitter(db *bbolt.DB, perOp bool, onCommit func(int)) *committer {
	c := &committer{db: db, perOp: perOp, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}), onCommit: onCommit}
	go c.loop()
	return c
}

var errStoreClosed = errors.New("leaderstub: store closed")

// enqueue queues an op. Callers enqueue while holding the partition lock,
// so a partition's ops are committed in offset order.
func (c *committer) enqueue(op *writeOp) {
	op.done = make(chan error, 1)
	c.mu.Lock()
	if c.failed != nil {
		err := c.failed
		c.mu.Unlock()
		op.done <- err
		return
	}
	c.queue = append(c.queue, op)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *committer) loop() {
	defer close(c.stopped)
	for {
		select {
		case <-c.wake:
			c.flush()
		case <-c.stop:
			// Commit what was queued before Close, then refuse more.
			c.flush()
			c.fail(errStoreClosed, nil)
			return
		}
	}
}

// flush commits queued ops until the queue is empty.
func (c *committer) flush() {
	for {
		ops := c.take(!c.perOp)
		if len(ops) == 0 {
			return
		}
		err := c.db.Update(func(tx *bbolt.Tx) error {
			for _, op := range ops {
				if err := op.apply(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			// A failed commit leaves memory ahead of disk: stop
			// accepting writes, as Kafka takes a failed log dir
			// offline (KAFKA_STORAGE_ERROR).
			c.fail(fmt.Errorf("leaderstub: commit: %w", err), ops)
			return
		}
		if c.onCommit != nil {
			c.onCommit(len(ops))
		}
		for _, op := range ops {
			if op.durable != nil {
				op.durable()
			}
			op.done <- nil
		}
	}
}

func (c *committer) take(all bool) []*writeOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	if !all {
		op := c.queue[0]
		c.queue = c.queue[1:]
		return []*writeOp{op}
	}
	ops := c.queue
	c.queue = nil
	return ops
}

func (c *committer) fail(err error, ops []*writeOp) {
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	ops = append(ops, c.queue...)
	c.queue = nil
	c.mu.Unlock()
	for _, op := range ops {
		op.done <- err
	}
}

// err reports a failed store.
func (c *committer) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// close stops the loop after the ops already taken; queued ops fail.
func (c *committer) close() {
	close(c.stop)
	<-c.stopped
}
