package markersender

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/wire"
)

// TestAnswersInAnyOrder: a partition's code is found whether the leader
// answers in the request's order (as wire.WriteTxnMarkersResponse, the
// leaders' builder, does) or not, and a partition it left out is reported
// missing, not given a neighbour's code.
func TestAnswersInAnyOrder(t *testing.T) {
	t7, t9 := txn(7), txn(9)
	batch := []queued{{t7, part("a", 0)}, {t7, part("a", 1)}, {t9, part("b", 0)}}
	keyOf := func(q queued) markerKey { return markerKey{q.ts.txn.ProducerID, q.ps.tp} }
	codes := map[markerKey]int16{keyOf(batch[0]): 0, keyOf(batch[1]): 47, keyOf(batch[2]): 52}
	inOrder := wire.WriteTxnMarkersResponse(buildRequest(batch), func(m kmsg.WriteTxnMarkersRequestMarker, topic string, p int32) int16 {
		return codes[markerKey{m.ProducerID, txncore.TopicPartition{Topic: topic, Partition: p}}]
	})
	for name, resp := range map[string]*kmsg.WriteTxnMarkersResponse{"in order": inOrder, "reversed": reversed(inOrder)} {
		a := responseAnswers(resp)
		for i, q := range batch {
			if code, ok := a.code(i, keyOf(q)); !ok || code != codes[keyOf(q)] {
				t.Errorf("%s: partition %d answered (%d, %v), want (%d, true)", name, i, code, ok, codes[keyOf(q)])
			}
		}
		if name == "in order" && a.byKey != nil {
			t.Errorf("in order: the lookup built a map it does not need")
		}
	}
	partial := reversed(inOrder) // then without a/1
	partial.Markers[1].Topics[0].Partitions = partial.Markers[1].Topics[0].Partitions[1:]
	a := responseAnswers(partial)
	if code, ok := a.code(1, keyOf(batch[1])); ok {
		t.Errorf("a partition left out of the response answered %d", code)
	}
	if code, ok := a.code(0, keyOf(batch[0])); !ok || code != 0 {
		t.Errorf("beside a gap: (%d, %v), want (0, true)", code, ok)
	}
}

// txn and part make a batch's entries for the request and answer tests.
func txn(pid int64) *txnState {
	s := &txnState{}
	s.txn.ProducerID = pid
	return s
}

func part(topic string, p int32) *partState {
	return &partState{tp: txncore.TopicPartition{Topic: topic, Partition: p}}
}

// reversed is resp with its markers, topics and partitions in the
// opposite order.
func reversed(resp *kmsg.WriteTxnMarkersResponse) *kmsg.WriteTxnMarkersResponse {
	out := *resp
	out.Markers = slices.Clone(resp.Markers)
	slices.Reverse(out.Markers)
	for i := range out.Markers {
		m := &out.Markers[i]
		m.Topics = slices.Clone(m.Topics)
		slices.Reverse(m.Topics)
		for j := range m.Topics {
			m.Topics[j].Partitions = slices.Clone(m.Topics[j].Partitions)
			slices.Reverse(m.Topics[j].Partitions)
		}
	}
	return &out
}

// TestBuildRequestGroups: one marker per transaction and one topic entry
// per run of a topic, each holding its partitions in the batch's order,
// although all of them share the request's few arrays; a transaction met
// again later gets an entry of its own, not a write into another's.
func TestBuildRequestGroups(t *testing.T) {
	t1, t2 := txn(1), txn(2)
	batch := []queued{{t1, part("a", 0)}, {t1, part("a", 1)}, {t1, part("b", 5)}, {t2, part("a", 3)}, {t1, part("c", 9)}}
	type topic struct {
		name  string
		parts []int32
	}
	type marker struct {
		pid    int64
		topics []topic
	}
	var got []marker
	for _, m := range buildRequest(batch).Markers {
		mk := marker{pid: m.ProducerID}
		for _, mt := range m.Topics {
			mk.topics = append(mk.topics, topic{mt.Topic, mt.Partitions})
		}
		got = append(got, mk)
	}
	want := []marker{
		{1, []topic{{"a", []int32{0, 1}}, {"b", []int32{5}}}},
		{2, []topic{{"a", []int32{3}}}},
		{1, []topic{{"c", []int32{9}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("request %+v, want %+v", got, want)
	}
}
