package markersender

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txncore"
)

// response builds a WriteTxnMarkers response answering each (pid, topic,
// partition, code) in the order given, one marker entry per pid run.
func response(rows ...answer) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	for _, r := range rows {
		if n := len(resp.Markers); n == 0 || resp.Markers[n-1].ProducerID != r.key.pid {
			m := kmsg.NewWriteTxnMarkersResponseMarker()
			m.ProducerID = r.key.pid
			resp.Markers = append(resp.Markers, m)
		}
		m := &resp.Markers[len(resp.Markers)-1]
		if n := len(m.Topics); n == 0 || m.Topics[n-1].Topic != r.key.tp.Topic {
			t := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			t.Topic = r.key.tp.Topic
			m.Topics = append(m.Topics, t)
		}
		t := &m.Topics[len(m.Topics)-1]
		p := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		p.Partition, p.ErrorCode = r.key.tp.Partition, r.code
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}

func key(pid int64, topic string, partition int32) markerKey {
	return markerKey{pid, txncore.TopicPartition{Topic: topic, Partition: partition}}
}

// TestAnswersInAnyOrder: a partition's code is found whether the leader
// answers in the request's order or not, and a partition it left out is
// reported missing, not given a neighbour's code.
func TestAnswersInAnyOrder(t *testing.T) {
	asked := []markerKey{key(7, "a", 0), key(7, "a", 1), key(9, "b", 0)}
	inOrder := response(answer{asked[0], 0}, answer{asked[1], 47}, answer{asked[2], 52})
	reversed := response(answer{asked[2], 52}, answer{asked[1], 47}, answer{asked[0], 0})
	for name, resp := range map[string]*kmsg.WriteTxnMarkersResponse{"in order": inOrder, "reversed": reversed} {
		a := responseAnswers(resp)
		for i, want := range []int16{0, 47, 52} {
			if code, ok := a.code(i, asked[i]); !ok || code != want {
				t.Errorf("%s: partition %d answered (%d, %v), want (%d, true)", name, i, code, ok, want)
			}
		}
		if name == "in order" && a.byKey != nil {
			t.Errorf("in order: the lookup built a map it does not need")
		}
	}
	partial := responseAnswers(response(answer{asked[0], 0}, answer{asked[2], 52}))
	if code, ok := partial.code(1, asked[1]); ok {
		t.Errorf("a partition left out of the response answered %d", code)
	}
	if code, ok := partial.code(2, asked[2]); !ok || code != 52 {
		t.Errorf("after a gap: (%d, %v), want (52, true)", code, ok)
	}
}
