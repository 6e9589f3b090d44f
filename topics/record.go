package topics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

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
	// ReplicationFactor is what the topic was created with. txncoord
	// keeps one replica of every partition whatever was asked; answers
	// and Metadata report 1.
	ReplicationFactor int16
	// Incarnation counts the creations of the name before this one: 0
	// for a topic never deleted.
	Incarnation uint32
	// Deleted marks a tombstone: the name does not exist now.
	Deleted bool
	Configs map[string]string
}

// Record, version 1 (big endian; n is a uvarint):
//
//	u8 version (1)
//	n + name, 16 bytes id, i32 partitions, i16 replication factor,
//	u32 incarnation, u8 deleted (0 or 1)
//	n configs, each: n + name, n + value (sorted by name)
const recordVersion = 1

func (s state) encode() []byte {
	out := []byte{recordVersion}
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
	return out
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadRecord = errors.New("topics: corrupt record")

// reader reads a record; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errBadRecord
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	if r.err != nil {
		return ""
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)) {
		r.err = errBadRecord
		return ""
	}
	r.b = r.b[k:]
	return string(r.take(int(n)))
}

func decodeState(raw []byte) (state, error) {
	r := &reader{b: raw}
	if v := r.take(1); v == nil || v[0] != recordVersion {
		return state{}, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	var s state
	s.Name = r.string()
	copy(s.ID[:], r.take(16))
	if v := r.take(4); v != nil {
		s.Partitions = int32(binary.BigEndian.Uint32(v))
	}
	if v := r.take(2); v != nil {
		s.ReplicationFactor = int16(binary.BigEndian.Uint16(v))
	}
	if v := r.take(4); v != nil {
		s.Incarnation = binary.BigEndian.Uint32(v)
	}
	if v := r.take(1); v != nil {
		if v[0] > 1 {
			r.err = errBadRecord
		}
		s.Deleted = v[0] == 1
	}
	if r.err == nil {
		n, k := binary.Uvarint(r.b)
		if k <= 0 || n > uint64(len(r.b)) {
			r.err = errBadRecord
		} else {
			r.b = r.b[k:]
			for ; n > 0 && r.err == nil; n-- {
				if s.Configs == nil {
					s.Configs = map[string]string{}
				}
				k := r.string()
				s.Configs[k] = r.string()
			}
		}
	}
	if r.err == nil && (len(r.b) != 0 || s.Name == "") {
		r.err = errBadRecord
	}
	if r.err != nil {
		return state{}, r.err
	}
	return s, nil
}

// ApplyRecord is the storage codec of KindTopic: it writes one topic's
// state into the controller's bucket.
func ApplyRecord(root storage.Root, raw []byte) error {
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

// load reads every stored topic (tombstones included).
func load(root storage.Root) (map[string]state, error) {
	out := map[string]state{}
	b := root.Bucket(bucketTopics)
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		s, err := decodeState(v)
		if err != nil {
			return fmt.Errorf("topic %q: %w", k, err)
		}
		out[s.Name] = s
		return nil
	})
	return out, err
}
