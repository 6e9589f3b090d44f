package groups

import (
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
