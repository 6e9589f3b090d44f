package authmeta

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

// SpaceName is the space of the security metadata in the coordinator
// node's store.
const SpaceName = "authmeta"

// State is the security metadata of one process. Reads (the authorizer,
// SCRAM logins) take a snapshot without locking; changes are serialized
// and apply only once durable.
type State struct {
	mu   sync.Mutex // serializes changes; held while one becomes durable
	recs Records    // nil: not attached (a follower's mirror, or nothing)
	log  zerolog.Logger

	acls   atomic.Pointer[[]Binding]
	scram  atomic.Pointer[map[scramKey]wire.ScramCredentials]
	quotas atomic.Pointer[map[string]quotaEntry] // by quotaEntityKey
	// features are the levels UpdateFeatures finalized; supported is the
	// cluster's range per feature (SetSupportedFeatures).
	features  atomic.Pointer[map[string]featureLevel]
	supported func() map[string][2]int16
	// authorizing is set once the listeners authorize with these ACLs
	// (Authorizer was called: the cluster has security). Without it the
	// ACL APIs answer as a Kafka broker with no authorizer configured.
	authorizing atomic.Bool
}

// New is an empty State that serves no changes until Open.
func New() *State {
	s := &State{}
	s.acls.Store(&[]Binding{})
	s.scram.Store(&map[scramKey]wire.ScramCredentials{})
	s.quotas.Store(&map[string]quotaEntry{})
	s.features.Store(&map[string]featureLevel{})
	return s
}

// Open attaches the State to the controller's store and loads what it
// holds: the node that owns the metadata (a single coordinator).
func (s *State) Open(st *storage.Store, log zerolog.Logger) error {
	recs, err := SpaceRecords(st)
	if err != nil {
		return err
	}
	if err := s.Attach(recs, log); err != nil {
		recs.Close()
		return err
	}
	return nil
}

// Attach makes recs the State's records (the node serves the APIs of this
// package from now on) and loads what they hold. With several
// coordinators on etcd the holder of the controller's lease attaches the
// records it writes under that lease, and Detach them when it loses it.
func (s *State) Attach(recs Records, log zerolog.Logger) error {
	m, err := replay(recs)
	if err != nil {
		return fmt.Errorf("authmeta: load: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs, s.log = recs, log.With().Str("component", "authmeta").Logger()
	s.storeLocked(m)
	s.log.Info().Int("client_quotas", len(m.quotas)).Int("acls", len(m.acls)).Int("scram_credentials", len(m.scram)).Msg("security metadata loaded")
	return nil
}

// Show loads what recs hold into a State that is not attached, without
// attaching it: a node whose listeners must enforce the ACLs and log the
// SCRAM users in before it hears from the controller (a coordinator
// starting while no holder serves yet). An attached State ignores it.
func (s *State) Show(recs Records) error {
	m, err := replay(recs)
	if err != nil {
		return fmt.Errorf("authmeta: load: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.storeLocked(m)
	}
	return nil
}

func (s *State) storeLocked(m memory) {
	s.acls.Store(&m.acls)
	s.scram.Store(&m.scram)
	s.quotas.Store(&m.quotas)
	s.features.Store(&m.features)
}

// Attached reports whether the State is the controller's (Open or Attach
// was called): only then does a node serve the APIs of this package.
func (s *State) Attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs != nil
}

// Detach closes recs if they are the State's records and leaves the State
// unattached, with what it held: its listeners keep enforcing that until
// a follower's Mirror or the next Attach replaces it. Records another
// Attach replaced are left alone (that holder's, in the same process).
func (s *State) Detach(recs Records) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs != recs {
		return nil
	}
	s.recs = nil
	return recs.Close()
}

// Close closes the records.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		return nil
	}
	err := s.recs.Close()
	s.recs = nil
	return err
}

// ACLs is a snapshot of every binding.
func (s *State) ACLs() []Binding { return *s.acls.Load() }

// errNotOpen answers a change on a State no store backs.
var errNotOpen = fmt.Errorf("%w: the security metadata is not open on this node", kerr.NotController)

// commitLocked appends recs, waits until every one is durable, then
// applies them to memory with apply.
func (s *State) commitLocked(recs [][]byte, apply func()) error {
	if s.recs == nil {
		return errNotOpen
	}
	if len(recs) == 0 {
		return nil
	}
	if err := s.recs.Commit(recs); err != nil {
		s.log.Error().Err(err).Msg("security metadata change not durable")
		if errors.Is(err, ErrFenced) {
			return fmt.Errorf("%w: %w", kerr.NotController, err)
		}
		return fmt.Errorf("%w: %w", kerr.KafkaStorageError, err)
	}
	apply()
	return nil
}

// CreateACLs stores bindings (already validated); one already stored is
// not stored twice.
func (s *State) CreateACLs(bs []Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.ACLs()
	next := slices.Clone(cur)
	var recs [][]byte
	for _, b := range bs {
		if slices.Contains(next, b) {
			continue
		}
		next = append(next, b)
		recs = append(recs, aclRecord(opACLAdd, b))
	}
	return s.commitLocked(recs, func() {
		s.acls.Store(&next)
		s.log.Info().Int("added", len(recs)).Int("acls", len(next)).Msg("ACLs created")
	})
}

// DeleteACLs removes the bindings each filter matches and returns them,
// by filter (a binding two filters match is reported under both, as
// Kafka does).
func (s *State) DeleteACLs(filters []Filter) ([][]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.ACLs()
	out := make([][]Binding, len(filters))
	gone := map[Binding]bool{}
	for i, f := range filters {
		for _, b := range cur {
			if f.Matches(b) {
				out[i] = append(out[i], b)
				gone[b] = true
			}
		}
	}
	var recs [][]byte
	next := make([]Binding, 0, len(cur))
	for _, b := range cur {
		if gone[b] {
			recs = append(recs, aclRecord(opACLRemove, b))
		} else {
			next = append(next, b)
		}
	}
	if err := s.commitLocked(recs, func() {
		s.acls.Store(&next)
		s.log.Info().Int("removed", len(recs)).Int("acls", len(next)).Msg("ACLs deleted")
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// scramChange is one upsertion (Cred set) or deletion.
type scramChange struct {
	Key  scramKey
	Cred *wire.ScramCredentials
}

// AlterSCRAM applies the changes (already validated) at once.
func (s *State) alterSCRAM(changes []scramChange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(*s.scram.Load())
	var recs [][]byte
	for _, c := range changes {
		if c.Cred == nil {
			delete(next, c.Key)
			recs = append(recs, scramDeleteRecord(c.Key))
			continue
		}
		next[c.Key] = *c.Cred
		recs = append(recs, scramSetRecord(c.Key, *c.Cred))
	}
	return s.commitLocked(recs, func() {
		s.scram.Store(&next)
		s.log.Info().Int("changes", len(recs)).Msg("SCRAM credentials altered")
	})
}

// scramOf is user's stored credential for mech.
func (s *State) scramOf(mech byte, user string) (wire.ScramCredentials, bool) {
	c, ok := (*s.scram.Load())[scramKey{Mechanism: mech, User: user}]
	return c, ok
}

// Mirror replaces the ACLs and the finalized feature levels of a State no
// store backs (a node in a process of its own, which learns them from the
// controller over the Kafka protocol: DescribeAcls, ApiVersions) with the
// controller's, so its listeners authorize and finalize as the
// controller's do. acls nil leaves the ACLs as they are (the controller
// has no authorizer). It drops the SCRAM credentials the State holds (a
// node that held the controller's lease before, or loaded etcd's at
// start): the node relays those users' logins to the controller, so a
// user deleted or changed there is not logged in here with what it was.
// A State the controller's store backs ignores it.
func (s *State) Mirror(acls []Binding, features map[string]int16, epoch int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs != nil {
		return
	}
	s.scram.Store(&map[scramKey]wire.ScramCredentials{})
	if acls != nil {
		acls = slices.Clone(acls)
		s.acls.Store(&acls)
	}
	levels := make(map[string]featureLevel, len(features))
	for name, level := range features {
		levels[name] = featureLevel{Level: level, Epoch: epoch}
	}
	s.features.Store(&levels)
}
