package authmeta

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// keyedRecords keep the last record of each RecordKey, as etcd does
// (a removing record deletes the key); fenced refuses every Commit.
type keyedRecords struct {
	byKey  map[string][]byte
	fenced bool
}

func (r *keyedRecords) Load(fn func([]byte) error) error {
	for _, raw := range r.byKey {
		if err := fn(raw); err != nil {
			return err
		}
	}
	return nil
}

func (r *keyedRecords) Commit(records [][]byte) error {
	if r.fenced {
		return ErrFenced
	}
	for _, raw := range records {
		kind, name, remove, err := RecordKey(raw)
		if err != nil {
			return err
		}
		if remove {
			delete(r.byKey, kind+"/"+name)
		} else {
			r.byKey[kind+"/"+name] = raw
		}
	}
	return nil
}

func (r *keyedRecords) Close() error { return nil }

// A State attached to a store that keeps only the last record per key
// (etcd) loads back what it changed: ACLs added and removed, a SCRAM
// credential set and one deleted, a quota, a feature level. A second
// State attached to the same records holds the same; a refused commit is
// NOT_CONTROLLER. Detached, a State keeps what it held; a follower's
// Mirror drops its SCRAM credentials (logins are relayed then).
func TestKeyedRecordsReplay(t *testing.T) {
	recs := &keyedRecords{byKey: map[string][]byte{}}
	first := New()
	if err := first.Attach(recs, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	acl := func(name string) Binding {
		return Binding{ResourceType: kmsg.ACLResourceTypeTopic, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:u", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	}
	if err := first.CreateACLs([]Binding{acl("a"), acl("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.DeleteACLs([]Filter{{ResourceType: kmsg.ACLResourceTypeTopic, Name: new("a"), Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}); err != nil {
		t.Fatal(err)
	}
	cred := wire.ScramCredentials{Salt: []byte("salt"), Iterations: 4096, StoredKey: []byte("stored"), ServerKey: []byte("server")}
	if err := first.alterSCRAM([]scramChange{{Key: scramKey{Mechanism: mechSHA256, User: "kept"}, Cred: &cred},
		{Key: scramKey{Mechanism: mechSHA256, User: "gone"}, Cred: &cred}}); err != nil {
		t.Fatal(err)
	}
	if err := first.alterSCRAM([]scramChange{{Key: scramKey{Mechanism: mechSHA256, User: "gone"}}}); err != nil {
		t.Fatal(err)
	}
	if err := first.setQuotas([]quotaEntry{{Entity: []QuotaComponent{{Type: "user", Name: new("q")}}, Values: map[string]float64{"producer_byte_rate": 10}}}); err != nil {
		t.Fatal(err)
	}
	if err := first.setFeatures(map[string]int16{"transaction.version": 1}); err != nil {
		t.Fatal(err)
	}
	if len(recs.byKey) != 4 {
		t.Fatalf("the store keeps %d keys, want 4 (acl b, scram kept, a quota, a feature)", len(recs.byKey))
	}

	second := New()
	if err := second.Attach(recs, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if got := second.ACLs(); len(got) != 1 || got[0] != acl("b") {
		t.Fatalf("ACLs loaded %v, want [b]", got)
	}
	if _, ok := second.scramOf(mechSHA256, "kept"); !ok {
		t.Fatal("the SCRAM user kept is not loaded")
	}
	if _, ok := second.scramOf(mechSHA256, "gone"); ok {
		t.Fatal("a deleted SCRAM user is loaded")
	}
	if level, ok := second.FinalizedFeature("transaction.version"); !ok || level != 1 || second.FeatureEpoch() != first.FeatureEpoch() {
		t.Fatalf("transaction.version %d (%v) epoch %d, want 1 at epoch %d", level, ok, second.FeatureEpoch(), first.FeatureEpoch())
	}
	if q := *second.quotas.Load(); len(q) != 1 {
		t.Fatalf("quotas loaded %v, want one", q)
	}

	recs.fenced = true
	if err := second.CreateACLs([]Binding{acl("late")}); !errors.Is(err, kerr.NotController) || !errors.Is(err, ErrFenced) {
		t.Fatalf("a fenced CreateACLs: %v, want NOT_CONTROLLER", err)
	}
	if got := second.ACLs(); len(got) != 1 {
		t.Fatalf("a refused ACL applied: %v", got)
	}

	if err := second.Detach(recs); err != nil || second.Attached() {
		t.Fatalf("Detach: %v, attached %v", err, second.Attached())
	}
	if len(second.ACLs()) != 1 {
		t.Fatal("a detached State dropped its ACLs")
	}
	second.Mirror(second.ACLs(), map[string]int16{"transaction.version": 1}, second.FeatureEpoch())
	if _, ok := second.scramOf(mechSHA256, "kept"); ok {
		t.Fatal("a mirroring State keeps SCRAM credentials it no longer hears about")
	}
}
