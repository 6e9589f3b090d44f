package leaderstub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/groupcommit"
)

// The bbolt layout of a leader, at the top level of its own file
// (DataDir/leader-<id>.db) or inside its bucket of a file shared by the
// nodes of `txncoord up` (Config.Log):
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
func partitionBuckets(tx groupcommit.Root, key []byte) (log, producers, aborted, meta *bbolt.Bucket, err error) {
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

// writeOp is one queued durable change of this leader.
type writeOp struct {
	ticket groupcommit.Ticket // also handed to a Deferral (27_write_txn_markers.go)
}

// wait blocks until the op is durable or failed.
func (op *writeOp) wait() error { return <-op.ticket.Done() }

var errStoreClosed = errors.New("leaderstub: store closed")

// enqueue queues a change behind every change queued before it; durable
// runs once it is fsync'd. Callers enqueue while holding the partition
// lock, so a partition's changes are committed in offset order. The space
// is FailStop: after a failed commit memory is ahead of disk, so the
// leader refuses every later write (KAFKA_STORAGE_ERROR), as Kafka takes a
// failed log dir offline.
func (l *Leader) enqueue(apply func(groupcommit.Root) error, durable func()) *writeOp {
	return l.enqueueAfter(nil, apply, durable)
}

// enqueueAfter is enqueue for a change durable only with the writes of
// after (the coordinator's registration of a transaction whose data this
// is, answered before it was durable): if one of them fails, this change
// fails unwritten and the space stops, as on a failed commit.
func (l *Leader) enqueueAfter(after []groupcommit.Ticket, apply func(groupcommit.Root) error, durable func()) *writeOp {
	return &writeOp{ticket: l.space.SubmitAfter(after, apply, durable)}
}
