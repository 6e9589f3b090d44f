package authmeta

import (
	"errors"
	"fmt"
	"slices"

	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

// Records is where the security metadata's records are kept: the space
// SpaceName of a coordinator's store (SpaceRecords), or etcd beside the
// topic controller's records, written only by the holder of the
// controller's lease (package topicsetcd). A record is the whole state
// of one ACL binding, SCRAM credential, quota entity or feature level
// (RecordKey names which), so a store that keeps one value per key keeps
// the last record of each, and Load gives back the state.
type Records interface {
	// Load calls fn with a record per binding, credential, quota entity
	// and feature level stored, in no particular order.
	Load(fn func(raw []byte) error) error
	// Commit makes records durable in the order given, or returns an
	// error; a store written under a lease refuses every Commit once its
	// writer no longer holds it (wrapping ErrFenced).
	Commit(records [][]byte) error
	Close() error
}

// ErrFenced is what a Records' Commit wraps once its writer no longer
// holds the controller's lease: the change is answered NOT_CONTROLLER, as
// the topic controller's, and the client asks Metadata for the holder.
var ErrFenced = errors.New("authmeta: no longer the controller")

// RecordKey names what a record is the whole state of: kind "acl",
// "scram", "quota" or "feature" and a name unique within the kind; remove
// is a record that removes it (nothing to keep).
func RecordKey(raw []byte) (kind, name string, remove bool, err error) {
	if len(raw) < 2 || raw[0] != recordVersion {
		return "", "", false, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	r := recordio.NewReader(raw[2:], errBadRecord)
	switch raw[1] {
	case opACLAdd, opACLRemove:
		readBinding(r)
		kind, name, remove = "acl", string(raw[2:]), raw[1] == opACLRemove
	case opSCRAMSet, opSCRAMDelete:
		k := scramKey{}
		if v := r.Take(1); v != nil {
			k.Mechanism = v[0]
		}
		k.User = r.String()
		if raw[1] == opSCRAMSet {
			readCred(r)
		}
		kind, name, remove = "scram", string(k.encode()), raw[1] == opSCRAMDelete
	case opQuotaSet, opQuotaDelete:
		entity := readQuotaEntity(r)
		if raw[1] == opQuotaSet {
			readQuotaValues(r)
		}
		kind, name, remove = "quota", quotaEntityKey(entity), raw[1] == opQuotaDelete
	case opFeatureSet:
		name = r.String()
		r.Uint16()
		r.Int64()
		kind = "feature"
	default:
		return "", "", false, fmt.Errorf("%w: unknown op %d", errBadRecord, raw[1])
	}
	if r.Err() != nil || r.Len() != 0 {
		return "", "", false, errBadRecord
	}
	return kind, name, remove, nil
}

// memory is the state the records describe, as State holds it.
type memory struct {
	acls     []Binding
	scram    map[scramKey]wire.ScramCredentials
	quotas   map[string]quotaEntry
	features map[string]featureLevel
}

// replay builds the state of the records recs.Load gives (the last record
// of each key wins, as in the store).
func replay(recs Records) (memory, error) {
	m := memory{acls: []Binding{}, scram: map[scramKey]wire.ScramCredentials{}, quotas: map[string]quotaEntry{}, features: map[string]featureLevel{}}
	err := recs.Load(func(raw []byte) error {
		if _, _, _, err := RecordKey(raw); err != nil {
			return err
		}
		r := recordio.NewReader(raw[2:], errBadRecord)
		switch raw[1] {
		case opACLAdd, opACLRemove:
			b := readBinding(r)
			m.acls = slices.DeleteFunc(m.acls, func(o Binding) bool { return o == b })
			if raw[1] == opACLAdd {
				m.acls = append(m.acls, b)
			}
		case opSCRAMSet, opSCRAMDelete:
			k := scramKey{Mechanism: r.Take(1)[0], User: r.String()}
			delete(m.scram, k)
			if raw[1] == opSCRAMSet {
				m.scram[k] = readCred(r)
			}
		case opQuotaSet, opQuotaDelete:
			e := quotaEntry{Entity: readQuotaEntity(r)}
			delete(m.quotas, quotaEntityKey(e.Entity))
			if raw[1] == opQuotaSet {
				e.Values = readQuotaValues(r)
				m.quotas[quotaEntityKey(e.Entity)] = e
			}
		case opFeatureSet:
			name := r.String()
			m.features[name] = featureLevel{Level: int16(r.Uint16()), Epoch: r.Int64()}
		}
		return nil
	})
	return m, err
}

// spaceRecords are the records in the space SpaceName of a store.
type spaceRecords struct{ space *storage.Space }

// SpaceRecords opens the security metadata's space of st (st must know
// storage.KindAuthMeta: ApplyRecord) and applies what its log holds.
func SpaceRecords(st *storage.Store) (Records, error) {
	space, err := st.Space(SpaceName, storage.KindAuthMeta, storage.SpaceOptions{})
	if err != nil {
		return nil, fmt.Errorf("authmeta: %w", err)
	}
	if err := st.Apply(); err != nil {
		space.Close()
		return nil, fmt.Errorf("authmeta: load: %w", err)
	}
	return spaceRecords{space}, nil
}

// Load gives a set record per stored key: the buckets keep what the set
// records carried (ApplyRecord), keyed as RecordKey names them.
func (r spaceRecords) Load(fn func(raw []byte) error) error {
	return r.space.View(func(root storage.Root) error {
		each := func(bucket []byte, rec func(k, v []byte) []byte) error {
			b := root.Bucket(bucket)
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				if err := fn(rec(k, v)); err != nil {
					return fmt.Errorf("%s %q: %w", bucket, k, err)
				}
				return nil
			})
		}
		return errors.Join(
			each(bucketACLs, func(k, _ []byte) []byte { return append([]byte{recordVersion, opACLAdd}, k...) }),
			each(bucketSCRAM, func(k, v []byte) []byte {
				if len(k) < 1 {
					return nil // RecordKey refuses it
				}
				out := appendString([]byte{recordVersion, opSCRAMSet, k[0]}, string(k[1:]))
				return append(out, v...)
			}),
			each(bucketQuotas, func(_, v []byte) []byte { return append([]byte{recordVersion, opQuotaSet}, v...) }),
			each(bucketFeatures, func(k, v []byte) []byte {
				return append(appendString([]byte{recordVersion, opFeatureSet}, string(k)), v...)
			}))
	})
}

// Commit submits every record, then waits for each (the store stops every
// write at the first failure: fail-stop).
func (r spaceRecords) Commit(records [][]byte) error {
	waits := make([]<-chan error, 0, len(records))
	for _, raw := range records {
		_, done := r.space.Submit(raw, nil)
		waits = append(waits, done)
	}
	var err error
	for _, done := range waits {
		if e := <-done; e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (r spaceRecords) Close() error { return r.space.Close() }
