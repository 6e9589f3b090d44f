package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestWriteTxnMarkersResponseInRequestOrder(t *testing.T) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, pid := range []int64{7, 9} {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID = pid
		for _, topic := range []string{"a", "b"} {
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = topic, []int32{2, 0}
			m.Topics = append(m.Topics, mt)
		}
		req.Markers = append(req.Markers, m)
	}
	n := int16(0)
	resp := WriteTxnMarkersResponse(req, func(m kmsg.WriteTxnMarkersRequestMarker, topic string, p int32) int16 {
		n++
		return n
	})
	want := int16(0)
	for i, rm := range resp.Markers {
		if rm.ProducerID != req.Markers[i].ProducerID || len(rm.Topics) != 2 {
			t.Fatalf("marker %d: %+v", i, rm)
		}
		for j, rt := range rm.Topics {
			if rt.Topic != req.Markers[i].Topics[j].Topic || len(rt.Partitions) != 2 {
				t.Fatalf("marker %d topic %d: %+v", i, j, rt)
			}
			for k, rp := range rt.Partitions {
				want++
				if rp.Partition != req.Markers[i].Topics[j].Partitions[k] || rp.ErrorCode != want {
					t.Fatalf("marker %d topic %d partition %d: %+v, want code %d", i, j, k, rp, want)
				}
			}
		}
	}
}

func TestDescribeProducersResponsePerPartition(t *testing.T) {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 1}
	req.Topics = append(req.Topics, rt)
	resp := DescribeProducersResponse(req, func(topic string, p int32) (int16, ActiveProducers) {
		if p == 1 {
			return 6, nil
		}
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID = 42
		return 0, ActiveProducers{ap}
	})
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("%+v", resp.Topics)
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.Partition != 0 || p0.ErrorCode != 0 || len(p0.ActiveProducers) != 1 || p0.ActiveProducers[0].ProducerID != 42 {
		t.Fatalf("partition 0: %+v", p0)
	}
	if p1.Partition != 1 || p1.ErrorCode != 6 || p1.ActiveProducers != nil {
		t.Fatalf("partition 1: %+v", p1)
	}
}
