package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// WriteTxnMarkersResponse answers req partition by partition, in the
// request's order (markers, their topics, their partitions): code gives
// each partition's error code. Leaders, the group coordinator (for
// __consumer_offsets) and ErrorResponse build their answers with it.
func WriteTxnMarkersResponse(req *kmsg.WriteTxnMarkersRequest,
	code func(m kmsg.WriteTxnMarkersRequestMarker, topic string, partition int32) int16) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Every slice is made at its final length: a marker answer is on
	// every transaction's path.
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i, m := range req.Markers {
		rm := &resp.Markers[i]
		rm.Default()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j, t := range m.Topics {
			rt := &rm.Topics[j]
			rt.Default()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for k, p := range t.Partitions {
				rp := &rt.Partitions[k]
				rp.Default()
				rp.Partition, rp.ErrorCode = p, code(m, t.Topic, p)
			}
		}
	}
	return resp
}

// ActiveProducers is a partition's producers in a DescribeProducers answer.
type ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer

// DescribeProducersResponse answers req partition by partition, in the
// request's order: partition gives each one's error code and producers.
// Leaders, the group coordinator (for __consumer_offsets) and
// ErrorResponse build their answers with it.
func DescribeProducersResponse(req *kmsg.DescribeProducersRequest,
	partition func(topic string, partition int32) (int16, ActiveProducers)) *kmsg.DescribeProducersResponse {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode, rp.ActiveProducers = partition(t.Topic, p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
