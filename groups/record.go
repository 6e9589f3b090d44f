package groups

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/txnrules"
)

// Records (storage.KindGroup) and their state in bbolt.
//
// A record is the list of bbolt changes one step of the core made, in
// order: puts and deletes of keys in the space's buckets. The core
// computes them from its in-memory state (which it keeps whole), so the
// applier needs no logic of its own and a replayed record writes exactly
// what it wrote the first time.
//
//	record  = version(1) count(uvarint) op*
//	op      = kind(0 put, 1 delete) bucket(byte) key(uvarint len, bytes) [value(uvarint len, bytes)]
//
// Buckets and values (JSON, so a later release can add fields):
//
//	groups      group id → groupRecord (stored after a completed sync, a
//	            generation that ends Empty, a static member's new id, a
//	            creation by a commit)
//	offsets     offsetKey(group, 0, tp) → offsetRecord (committed)
//	txnoffsets  offsetKey(group, pid, tp) → offsetRecord (pending their marker)
//	producers   partition(4) pid(8) → producerRecord
//	partitions  partition(4) → the partition's next position (8)
//	share_groups group id → shareGroupRecord (share.go: epochs and members)
const recordVersion = 1

type bucketID byte

const (
	bucketGroups bucketID = iota + 1
	bucketOffsets
	bucketTxn
	bucketProducers
	bucketPartitions
	bucketShareGroups
)

var bucketNames = map[bucketID][]byte{
	bucketGroups:      []byte("groups"),
	bucketOffsets:     []byte("offsets"),
	bucketTxn:         []byte("txnoffsets"),
	bucketProducers:   []byte("producers"),
	bucketPartitions:  []byte("partitions"),
	bucketShareGroups: []byte("share_groups"),
}

// op is one bbolt change; a nil value deletes the key.
type op struct {
	bucket bucketID
	key    []byte
	value  []byte
}

type groupRecord struct {
	Type         Type           `json:"type"`
	ProtocolType string         `json:"protocol_type,omitempty"`
	Protocol     string         `json:"protocol,omitempty"`
	Generation   int32          `json:"generation"`
	Leader       string         `json:"leader,omitempty"`
	StateSince   int64          `json:"state_since_ms"`
	Members      []memberRecord `json:"members,omitempty"`
	// Consumer is a consumer group's KIP-848 state (consumer_record.go).
	Consumer *consumerRecord `json:"consumer,omitempty"`
}

type memberRecord struct {
	ID              string `json:"id"`
	InstanceID      string `json:"instance_id,omitempty"`
	ClientID        string `json:"client_id"`
	ClientHost      string `json:"client_host"`
	SessionMillis   int64  `json:"session_ms"`
	RebalanceMillis int64  `json:"rebalance_ms"`
	Subscription    []byte `json:"subscription"`
	Assignment      []byte `json:"assignment"`
}

type offsetRecord struct {
	Offset        int64  `json:"offset"`
	LeaderEpoch   int32  `json:"leader_epoch"`
	Metadata      string `json:"metadata,omitempty"`
	CommitMillis  int64  `json:"commit_ms"`
	Record        int64  `json:"record"`
	ProducerEpoch int16  `json:"producer_epoch,omitempty"`
}

type producerRecord struct {
	Epoch            int16 `json:"epoch"`
	CoordinatorEpoch int32 `json:"coordinator_epoch"`
	TxnOpen          bool  `json:"txn_open"`
	TxnStart         int64 `json:"txn_start"`
	LastTimestamp    int64 `json:"last_ts"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs: cannot fail
	}
	return b
}

// putGroupOp stores g's metadata: with its members only when Stable (a
// rebalance in progress is not stored, as in Kafka: after a restart the
// members rejoin).
func putGroupOp(g *Group) op {
	r := groupRecord{Type: g.Type, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Generation: g.Generation,
		Leader: g.Leader, StateSince: g.StateSince.UnixMilli()}
	if g.State == Stable {
		for _, id := range sortedMembers(g) {
			m := g.Members[id]
			r.Members = append(r.Members, memberRecord{ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID,
				ClientHost: m.ClientHost, SessionMillis: m.SessionTimeout.Milliseconds(), RebalanceMillis: m.RebalanceTimeout.Milliseconds(),
				Subscription: m.metadataFor(g.Protocol), Assignment: m.Assignment})
		}
	} else {
		r.Leader = ""
	}
	if g.consumer != nil {
		r.Consumer = g.consumer.record()
	}
	return op{bucket: bucketGroups, key: []byte(g.ID), value: mustJSON(r)}
}

func offsetKey(group string, pid int64, tp TP) []byte {
	b := binary.AppendUvarint(nil, uint64(len(group)))
	b = append(b, group...)
	b = binary.BigEndian.AppendUint64(b, uint64(pid))
	b = binary.AppendUvarint(b, uint64(len(tp.Topic)))
	b = append(b, tp.Topic...)
	return binary.BigEndian.AppendUint32(b, uint32(tp.Partition))
}

func parseOffsetKey(k []byte) (group string, pid int64, tp TP, err error) {
	bad := errors.New("groups: bad offset key")
	n, w := binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) < n+8 {
		return "", 0, TP{}, bad
	}
	k = k[w:]
	group, k = string(k[:n]), k[n:]
	pid, k = int64(binary.BigEndian.Uint64(k)), k[8:]
	n, w = binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) != n+4 {
		return "", 0, TP{}, bad
	}
	k = k[w:]
	tp.Topic = string(k[:n])
	tp.Partition = int32(binary.BigEndian.Uint32(k[n:]))
	return group, pid, tp, nil
}

func putOffsetOp(bucket bucketID, group string, pid int64, tp TP, o Offset) op {
	return op{bucket: bucket, key: offsetKey(group, pid, tp), value: mustJSON(offsetRecord{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
		Metadata: o.Metadata, CommitMillis: o.CommitTime.UnixMilli(), Record: o.Record, ProducerEpoch: o.ProducerEpoch})}
}

func producerKey(partition int32, pid int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, uint32(partition)), uint64(pid))
}

func putProducerOp(partition int32, pid int64, ps *ProducerState) op {
	return op{bucket: bucketProducers, key: producerKey(partition, pid), value: mustJSON(producerRecord{Epoch: ps.Epoch,
		CoordinatorEpoch: ps.CoordinatorEpoch, TxnOpen: ps.TxnOpen, TxnStart: ps.TxnStart, LastTimestamp: ps.LastTimestamp})}
}

func putPartitionOp(partition int32, next int64) op {
	return op{bucket: bucketPartitions, key: binary.BigEndian.AppendUint32(nil, uint32(partition)),
		value: binary.BigEndian.AppendUint64(nil, uint64(next))}
}

// encodeOps is a record of ops.
func encodeOps(ops []op) []byte {
	b := []byte{recordVersion}
	b = binary.AppendUvarint(b, uint64(len(ops)))
	for _, o := range ops {
		kind := byte(0)
		if o.value == nil {
			kind = 1
		}
		b = append(b, kind, byte(o.bucket))
		b = binary.AppendUvarint(b, uint64(len(o.key)))
		b = append(b, o.key...)
		if kind == 0 {
			b = binary.AppendUvarint(b, uint64(len(o.value)))
			b = append(b, o.value...)
		}
	}
	return b
}

func decodeOps(rec []byte) ([]op, error) {
	bad := func(what string) error { return fmt.Errorf("groups: bad record: %s", what) }
	if len(rec) < 1 || rec[0] != recordVersion {
		return nil, bad("version")
	}
	rec = rec[1:]
	n, w := binary.Uvarint(rec)
	if w <= 0 || n > uint64(len(rec)) {
		return nil, bad("count")
	}
	rec = rec[w:]
	ops := make([]op, 0, n)
	readBytes := func() ([]byte, bool) {
		l, w := binary.Uvarint(rec)
		if w <= 0 || l > uint64(len(rec)-w) {
			return nil, false
		}
		v := rec[w : w+int(l)]
		rec = rec[w+int(l):]
		return v, true
	}
	for range n {
		if len(rec) < 2 {
			return nil, bad("op")
		}
		kind, bucket := rec[0], bucketID(rec[1])
		rec = rec[2:]
		if kind > 1 || bucketNames[bucket] == nil {
			return nil, bad("op kind or bucket")
		}
		key, ok := readBytes()
		if !ok {
			return nil, bad("key")
		}
		o := op{bucket: bucket, key: key}
		if kind == 0 {
			if o.value, ok = readBytes(); !ok {
				return nil, bad("value")
			}
			if o.value == nil {
				o.value = []byte{}
			}
		}
		ops = append(ops, o)
	}
	if len(rec) != 0 {
		return nil, bad("trailing bytes")
	}
	return ops, nil
}

// ApplyRecord is the storage.ApplyFunc of KindGroup: it writes one
// record's changes into the space's buckets.
func ApplyRecord(root storage.Root, rec []byte) error {
	ops, err := decodeOps(rec)
	if err != nil {
		return err
	}
	for _, o := range ops {
		b, err := root.CreateBucketIfNotExists(bucketNames[o.bucket])
		if err != nil {
			return err
		}
		if o.value == nil {
			err = b.Delete(o.key)
		} else {
			err = b.Put(o.key, o.value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// load fills an empty core from the log's buckets: groups with members
// come back Stable, their sessions starting at now; groups without
// members Empty.
func (c *Core) load(eachIn func(bucket []byte, fn func(k, v []byte) error) error, now time.Time) error {
	each := func(b bucketID, fn func(k, v []byte) error) error { return eachIn(bucketNames[b], fn) }
	if err := each(bucketGroups, func(k, v []byte) error {
		var r groupRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("groups: group %q: %w", k, err)
		}
		g := c.newGroup(string(k), time.UnixMilli(r.StateSince))
		if r.Type != "" {
			g.Type = r.Type
		}
		g.ProtocolType, g.Protocol, g.Generation, g.Leader = r.ProtocolType, r.Protocol, r.Generation, r.Leader
		for _, mr := range r.Members {
			m := &Member{ID: mr.ID, InstanceID: mr.InstanceID, ClientID: mr.ClientID, ClientHost: mr.ClientHost,
				ProtocolType: r.ProtocolType, Protocols: []Protocol{{Name: r.Protocol, Metadata: mr.Subscription}},
				SessionTimeout: time.Duration(mr.SessionMillis) * time.Millisecond, RebalanceTimeout: time.Duration(mr.RebalanceMillis) * time.Millisecond,
				Assignment: mr.Assignment}
			m.heartbeatDeadline = now.Add(m.SessionTimeout)
			g.Members[m.ID] = m
			if m.InstanceID != "" {
				g.Static[m.InstanceID] = m.ID
			}
		}
		if len(g.Members) > 0 {
			g.State = Stable
		}
		if r.Consumer != nil {
			return c.loadConsumer(g, r.Consumer, now)
		}
		return nil
	}); err != nil {
		return err
	}
	loadOffset := func(bucket bucketID) error {
		return each(bucket, func(k, v []byte) error {
			gid, pid, tp, err := parseOffsetKey(k)
			if err != nil {
				return err
			}
			var r offsetRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("groups: offset of %q: %w", gid, err)
			}
			g := c.groups[gid]
			if g == nil {
				g = c.newGroup(gid, now)
			}
			o := Offset{Offset: r.Offset, LeaderEpoch: r.LeaderEpoch, Metadata: r.Metadata, CommitTime: time.UnixMilli(r.CommitMillis),
				Record: r.Record, ProducerEpoch: r.ProducerEpoch}
			if bucket == bucketOffsets {
				g.Offsets[tp] = o
			} else {
				if g.Txn[pid] == nil {
					g.Txn[pid] = map[TP]Offset{}
				}
				g.Txn[pid][tp] = o
			}
			return nil
		})
	}
	if err := loadOffset(bucketOffsets); err != nil {
		return err
	}
	if err := loadOffset(bucketTxn); err != nil {
		return err
	}
	if err := each(bucketProducers, func(k, v []byte) error {
		if len(k) != 12 {
			return errors.New("groups: bad producer key")
		}
		var r producerRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		p := int32(binary.BigEndian.Uint32(k))
		c.part(p).producers[int64(binary.BigEndian.Uint64(k[4:]))] = &ProducerState{
			Producer: txnrules.Producer{Epoch: r.Epoch, CoordinatorEpoch: r.CoordinatorEpoch, TxnOpen: r.TxnOpen},
			TxnStart: r.TxnStart, LastTimestamp: r.LastTimestamp}
		return nil
	}); err != nil {
		return err
	}
	if err := each(bucketShareGroups, func(k, v []byte) error {
		return c.loadShareGroup(string(k), v, now)
	}); err != nil {
		return err
	}
	return each(bucketPartitions, func(k, v []byte) error {
		if len(k) != 4 || len(v) != 8 {
			return errors.New("groups: bad partition record")
		}
		c.part(int32(binary.BigEndian.Uint32(k))).next = int64(binary.BigEndian.Uint64(v))
		return nil
	})
}

func offsetsPartitionFor(group string, n int32) int32 { return cluster.OffsetsPartitionFor(group, n) }

func sortTPs(tps []TP) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// subscribed reports whether a member of g subscribes to topic, from the
// consumer protocol metadata of the selected protocol; metadata that does
// not parse counts as subscribed to everything, as in Kafka.
func subscribed(g *Group, topic string) bool {
	if g.consumer != nil {
		return g.consumer.subscribedTo(topic)
	}
	for _, m := range g.Members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.Protocol)); err != nil {
			return true
		}
		for _, t := range md.Topics {
			if t == topic {
				return true
			}
		}
	}
	return false
}
