package markersender

import (
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
	txn := func(pid int64) *txnState {
		s := &txnState{}
		s.txn.ProducerID = pid
		return s
	}
	part := func(topic string, p int32) *partState {
		return &partState{tp: txncore.TopicPartition{Topic: topic, Partition: p}}
	}
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
