package groups

import (
	"encoding/binary"
	"fmt"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wal"
)

// RecordLog is where the coordinator's records go, in the order of its
// steps, and where its state is read from at Open: the process log
// (spaceLog, the default) or, with several coordinators, etcd (package
// groupsetcd), where a partition's owner writes fenced by its lease.
type RecordLog interface {
	// Append queues one record (EncodeRecord's form) and returns its
	// position in Log; positions rise with every Append.
	Append(rec []byte) (wal.Pos, error)
	// Log is the log Append's positions are in: a record is durable once
	// Log is durable up to its position; a caller appending to the same
	// log (the process log) may be answered once a record is appended
	// (durable.Shares).
	Log() durable.Log
	// Load calls fn once, with each: each(bucket, f) calls f for every
	// stored key of the bucket (keys as the records' ops name them).
	Load(fn func(each func(bucket []byte, f func(k, v []byte) error) error) error) error
	Close() error
}

// RecordOp is one change a record makes: a put of Value at Key in
// Bucket, or a delete when Value is nil.
type RecordOp struct {
	Bucket []byte
	Key    []byte
	Value  []byte
}

// DecodeRecord returns the changes of one record, as a RecordLog of its
// own applies them.
func DecodeRecord(rec []byte) ([]RecordOp, error) {
	ops, err := decodeOps(rec)
	if err != nil {
		return nil, err
	}
	out := make([]RecordOp, 0, len(ops))
	for _, o := range ops {
		out = append(out, RecordOp{Bucket: bucketNames[o.bucket], Key: o.key, Value: o.value})
	}
	return out, nil
}

// EncodeRecord is DecodeRecord's inverse: the record of ops, in order
// (a nil Value deletes). A bucket other than the coordinator's is an
// error.
func EncodeRecord(ops []RecordOp) ([]byte, error) {
	out := make([]op, 0, len(ops))
	for _, o := range ops {
		id, ok := bucketByName(o.Bucket)
		if !ok {
			return nil, fmt.Errorf("groups: unknown bucket %q", o.Bucket)
		}
		out = append(out, op{bucket: id, key: o.Key, value: o.Value})
	}
	return encodeOps(out), nil
}

func bucketByName(name []byte) (bucketID, bool) {
	for id, n := range bucketNames {
		if string(n) == string(name) {
			return id, true
		}
	}
	return 0, false
}

// spaceLog is the process log: the group coordinator's space of the
// process store, whose records the store applies to bbolt (KindGroup).
type spaceLog struct{ space *storage.Space }

func (s spaceLog) Append(rec []byte) (wal.Pos, error) { return s.space.Append(rec) }
func (s spaceLog) Log() durable.Log                   { return s.space.Store() }
func (s spaceLog) Close() error                       { return s.space.Close() }

func (s spaceLog) Load(fn func(each func(bucket []byte, f func(k, v []byte) error) error) error) error {
	return s.space.View(func(root storage.Root) error {
		return fn(func(bucket []byte, f func(k, v []byte) error) error {
			bk := root.Bucket(bucket)
			if bk == nil {
				return nil
			}
			return bk.ForEach(f)
		})
	})
}

// RecordPartition is the __consumer_offsets partition (of partitions)
// whose groups' state a stored key of bucket belongs to, and the group it
// belongs to ("" for the keys of a partition's own state: its producers
// and its next position). It lets the state of a coordinator of every
// partition be split into the states of each partition's coordinator.
func RecordPartition(bucket, key []byte, partitions int32) (partition int32, group string, err error) {
	id, ok := bucketByName(bucket)
	if !ok {
		return 0, "", fmt.Errorf("groups: unknown bucket %q", bucket)
	}
	switch id {
	case bucketGroups, bucketShareGroups:
		group = string(key)
	case bucketOffsets, bucketTxn:
		if group, _, _, err = parseOffsetKey(key); err != nil {
			return 0, "", err
		}
	case bucketProducers, bucketPartitions:
		if len(key) < 4 {
			return 0, "", fmt.Errorf("groups: bad %s key %x", bucket, key)
		}
		p := int32(binary.BigEndian.Uint32(key))
		if p < 0 || p >= partitions {
			return 0, "", fmt.Errorf("groups: %s key of partition %d, not one of %d", bucket, p, partitions)
		}
		return p, "", nil
	}
	return offsetsPartitionFor(group, partitions), group, nil
}
