package wire

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAtVersionIsTheCodecsDecode: the typed copy an in-process
// WriteTxnMarkers is sent as equals what an encode and a decode at the same
// version give, at every version kmsg speaks.
func TestAtVersionIsTheCodecsDecode(t *testing.T) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for i, tv := range []int8{2, 0, 1} {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = int64(10+i), int16(3+i), i%2 == 0, 7, tv
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "orders", []int32{int32(i), 5}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
	}
	for v := int16(0); v <= req.MaxVersion(); v++ {
		req.SetVersion(v)
		decoded, err := decodeBody(header{key: req.Key(), version: v}, req.AppendTo(nil))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		typed := atVersion(req, v)
		if !reflect.DeepEqual(typed, decoded) {
			t.Errorf("v%d: typed copy %+v, codec %+v", v, typed, decoded)
		}
		typed.(*kmsg.WriteTxnMarkersRequest).Markers[0].ProducerID = -1
		if req.Markers[0].ProducerID != 10 {
			t.Fatalf("v%d: the copy shares the caller's markers", v)
		}
	}
	if atVersion(kmsg.NewPtrProduceRequest(), 9) != nil {
		t.Fatal("atVersion built a Produce: only the commit path's requests skip the codec")
	}
}
