package topics

import (
	"reflect"
	"testing"

	"github.com/txncoord/txncoord/cluster"
)

// A record decodes to what was encoded, with or without a manual
// assignment; every truncation, and a deleted flag other than 0 or 1, is
// refused.
func TestRecordCodec(t *testing.T) {
	s := state{Name: "orders", ID: cluster.TopicIDOf("c", "orders", 2), Partitions: 6, ReplicationFactor: 3,
		Incarnation: 2, Configs: map[string]string{"retention.ms": "1000", "max.message.bytes": "2048"}}
	placed := s
	placed.Assignment = [][]int32{{0, 1, 2}, {2, 0, 1}}
	for _, s := range []state{s, placed} {
		raw := s.encode()
		got, err := decodeState(raw)
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("decode = %+v, %v; want %+v", got, err, s)
		}
		for n := range len(raw) {
			if _, err := decodeState(raw[:n]); err == nil {
				t.Fatalf("a record cut at %d of %d bytes decoded", n, len(raw))
			}
		}
	}
	raw := s.encode()
	if raw[0] != recordVersion {
		t.Fatalf("a topic placed by the rule is written as version %d, want %d (readable by the release before)", raw[0], recordVersion)
	}
	bad := append([]byte(nil), raw...)
	bad[1+1+len(s.Name)+16+4+2+4] = 2 // the deleted flag
	if _, err := decodeState(bad); err == nil {
		t.Fatal("deleted flag 2 decoded")
	}
}

// With auto.create.topics.enable off, Metadata's auto-creation is refused
// with UNKNOWN_TOPIC_OR_PARTITION and nothing is created.
func TestAutoCreateDisabled(t *testing.T) {
	fx := newFixture(t)
	off := false
	fx.file.AutoCreateTopicsEnable = &off
	if _, err := fx.view.EnsureTopic("auto"); err != cluster.ErrAutoCreateDisabled {
		t.Fatalf("EnsureTopic = %v, want ErrAutoCreateDisabled", err)
	}
	if _, ok := fx.view.Topic("auto"); ok {
		t.Fatal("the topic was created")
	}
}
