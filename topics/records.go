package topics

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/storage"
)

// Records is where the controller keeps its records: the space SpaceName
// of a coordinator's store (one coordinator, or node 0 of several without
// a lease; SpaceRecords), or etcd, written only by the holder of the
// controller's lease (package topicsetcd). A record is the whole state of
// one topic or one group's configs (RecordKey names which), so a store
// that keeps one value per key keeps the last record of each.
type Records interface {
	// Load calls fn with every stored record, in no particular order:
	// each topic's state (tombstones included), each group's configs.
	Load(fn func(raw []byte) error) error
	// Commit makes records durable in the order given, or returns an
	// error (wrapping the cause); a store written under a lease refuses
	// every Commit once its writer no longer holds it.
	Commit(records [][]byte) error
	Close() error
}

// ErrFenced is what a Records' Commit wraps once its writer no longer holds
// the controller's lease (another node runs the controller now): the
// change is answered NOT_CONTROLLER, as Kafka's former controller
// answers, and the client asks Metadata for the controller again.
var ErrFenced = errors.New("topics: no longer the controller")

// commitCode is the Kafka error of a failed commit: NOT_CONTROLLER when
// fenced out (ErrFenced), KAFKA_STORAGE_ERROR otherwise.
func commitCode(err error) *kerr.Error {
	if errors.Is(err, ErrFenced) {
		return kerr.NotController
	}
	return kerr.KafkaStorageError
}

// RecordKey names what a record is the whole state of: kind "topic" or
// "group" and its name; remove is a group record that leaves the group
// with no configs of its own (nothing to keep).
func RecordKey(raw []byte) (kind, name string, remove bool, err error) {
	if len(raw) > 0 && raw[0] == groupConfigVersion {
		group, configs, err := decodeGroupConfigs(raw)
		if err != nil {
			return "", "", false, err
		}
		return "group", group, len(configs) == 0, nil
	}
	s, err := decodeState(raw)
	if err != nil {
		return "", "", false, err
	}
	return "topic", s.Name, false, nil
}

// spaceRecords are the controller's records in the space SpaceName of a
// coordinator's store.
type spaceRecords struct{ space *storage.Space }

// SpaceRecords opens the controller's space of st (st must know
// storage.KindTopic: ApplyRecord) and applies what its log holds.
func SpaceRecords(st *storage.Store) (Records, error) {
	space, err := st.Space(SpaceName, storage.KindTopic, storage.SpaceOptions{})
	if err != nil {
		return nil, fmt.Errorf("topics: %w", err)
	}
	if err := st.Apply(); err != nil {
		space.Close()
		return nil, fmt.Errorf("topics: load: %w", err)
	}
	return spaceRecords{space}, nil
}

func (r spaceRecords) Load(fn func(raw []byte) error) error {
	return r.space.View(func(root storage.Root) error {
		for _, name := range [][]byte{bucketTopics, bucketGroupConfigs} {
			b := root.Bucket(name)
			if b == nil {
				continue
			}
			if err := b.ForEach(func(k, v []byte) error {
				if err := fn(v); err != nil {
					return fmt.Errorf("%s %q: %w", name, k, err)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Commit submits every record, then waits for each (the store stops
// every write at the first failure: fail-stop).
func (r spaceRecords) Commit(records [][]byte) error {
	waits := make([]<-chan error, 0, len(records))
	for _, raw := range records {
		_, done := r.space.Submit(raw, nil)
		waits = append(waits, done)
	}
	var errs []error
	for _, done := range waits {
		if err := <-done; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func (r spaceRecords) Close() error { return r.space.Close() }

// loadRecords reads every record of recs into topics (by name) and the
// view's group configs.
func (c *Controller) loadRecords(recs Records) (map[string]state, error) {
	out := map[string]state{}
	err := recs.Load(func(raw []byte) error {
		if len(raw) > 0 && raw[0] == groupConfigVersion {
			group, configs, err := decodeGroupConfigs(raw)
			if err != nil {
				return err
			}
			if len(configs) > 0 {
				c.view.SetGroupConfigs(group, configs)
			}
			return nil
		}
		s, err := decodeState(raw)
		if err != nil {
			return err
		}
		out[s.Name] = s
		return nil
	})
	return out, err
}

// Show puts one record into v as a controller publishes it: for a node
// that shows records it does not write (a process's view loaded from etcd
// before its leaders recover, while no controller has loaded them yet).
func Show(v *cluster.View, raw []byte) error {
	if len(raw) > 0 && raw[0] == groupConfigVersion {
		group, configs, err := decodeGroupConfigs(raw)
		if err != nil {
			return err
		}
		if len(configs) > 0 {
			v.SetGroupConfigs(group, configs)
		}
		return nil
	}
	s, err := decodeState(raw)
	if err != nil {
		return err
	}
	(&Controller{view: v}).publish(s)
	return nil
}
