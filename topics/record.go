package topics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/storage"
)

// The bbolt layout of the controller, inside its space:
//
//	topics/ topic name → the topic's record (state.encode)
var bucketTopics = []byte("topics")

// state is everything the controller keeps about one topic name.
type state struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// ReplicationFactor is what the topic was created with (with an
	// assignment, its replica count). txncoord keeps one copy of every
	// partition whatever was asked, on its first replica; Metadata reports
	// the replica lists, the ISR the leader alone.
	ReplicationFactor int16
	// Incarnation counts the creations of the name before this one: 0
	// for a topic never deleted.
	Incarnation uint32
	// Deleted marks a tombstone: the name does not exist now.
	Deleted bool
	Configs map[string]string
	// Assignment are the replica lists placed by hand, by partition (nil
	// or empty: the rule's; see cluster.Topic.Replicas).
	Assignment [][]int32
}

// Record, version 1 (big endian; n is a uvarint):
//
//	u8 version (1)
//	n + name, 16 bytes id, i32 partitions, i16 replication factor,
//	u32 incarnation, u8 deleted (0 or 1)
//	n configs, each: n + name, n + value (sorted by name)
//
// Version 3 (a topic with an assignment; version 2 is the group configs'
// record) is version 1 followed by
//
//	n partitions, each: n replicas, each an i32
const (
	recordVersion           = 1
	recordAssignmentVersion = 3
)

func (s state) encode() []byte {
	version := byte(recordVersion)
	if len(s.Assignment) > 0 {
		version = recordAssignmentVersion
	}
	out := []byte{version}
	out = appendString(out, s.Name)
	out = append(out, s.ID[:]...)
	out = binary.BigEndian.AppendUint32(out, uint32(s.Partitions))
	out = binary.BigEndian.AppendUint16(out, uint16(s.ReplicationFactor))
	out = binary.BigEndian.AppendUint32(out, s.Incarnation)
	if s.Deleted {
		out = append(out, 1)
	} else {
		out = append(out, 0)
	}
	keys := slices.Sorted(maps.Keys(s.Configs))
	out = binary.AppendUvarint(out, uint64(len(keys)))
	for _, k := range keys {
		out = appendString(out, k)
		out = appendString(out, s.Configs[k])
	}
	if version == recordAssignmentVersion {
		out = binary.AppendUvarint(out, uint64(len(s.Assignment)))
		for _, replicas := range s.Assignment {
			out = binary.AppendUvarint(out, uint64(len(replicas)))
			for _, id := range replicas {
				out = binary.BigEndian.AppendUint32(out, uint32(id))
			}
		}
	}
	return out
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadRecord = errors.New("topics: corrupt record")

func decodeState(raw []byte) (state, error) {
	r := recordio.NewReader(raw, errBadRecord)
	v := r.Take(1)
	if v == nil || v[0] != recordVersion && v[0] != recordAssignmentVersion {
		return state{}, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	var s state
	s.Name = r.String()
	copy(s.ID[:], r.Take(16))
	s.Partitions = int32(r.Uint32())
	s.ReplicationFactor = int16(r.Uint16())
	s.Incarnation = r.Uint32()
	s.Deleted = r.Flag()
	for n := r.Uvarint(); n > 0 && r.Err() == nil; n-- {
		if s.Configs == nil {
			s.Configs = map[string]string{}
		}
		k := r.String()
		s.Configs[k] = r.String()
	}
	if v[0] == recordAssignmentVersion {
		n := r.Uvarint()
		if n > r.Len() {
			r.Fail()
		}
		for ; n > 0 && r.Err() == nil; n-- {
			m := r.Uvarint()
			if m > r.Len()/4 {
				r.Fail()
				break
			}
			replicas := make([]int32, m)
			for i := range replicas {
				replicas[i] = int32(r.Uint32())
			}
			s.Assignment = append(s.Assignment, replicas)
		}
	}
	if r.Err() == nil && (r.Len() != 0 || s.Name == "") {
		r.Fail()
	}
	if r.Err() != nil {
		return state{}, r.Err()
	}
	return s, nil
}

// ApplyRecord is the storage codec of KindTopic: it writes one topic's
// state into the controller's bucket.
func ApplyRecord(root storage.Root, raw []byte) error {
	if len(raw) > 0 && raw[0] == groupConfigVersion {
		return applyGroupConfigs(root, raw)
	}
	s, err := decodeState(raw)
	if err != nil {
		return err
	}
	b, err := root.CreateBucketIfNotExists(bucketTopics)
	if err != nil {
		return err
	}
	return b.Put([]byte(s.Name), raw)
}
