package leaderstub

// DescribeProducers (key 61), v0.
//
// Behavior:
//   - every producer the partition has state for, as Kafka lists them, not
//     only those with an open transaction: epoch and coordinator epoch of
//     its last accepted batch or marker, last sequence (-1 after an epoch
//     bump), last timestamp, and CurrentTxnStartOffset (-1 when none);
//   - producers sorted by id, so answers are stable.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// describeProducersAPI is DescribeProducers v0.
var describeProducersAPI = wire.API[*Leader]{Key: 61, Min: 0, Max: 0, Handle: (*Leader).handleDescribeProducers}

func (l *Leader) handleDescribeProducers(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	return wire.Now(wire.DescribeProducersResponse(req, func(topic string, idx int32) (int16, wire.ActiveProducers) {
		p, kerrE := l.partitionFor(topic, idx)
		if kerrE != nil {
			return kerrE.Code, nil
		}
		return 0, describeProducers(p)
	}))
}

func describeProducers(p *partition) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(p.producers))
	for _, e := range p.producers {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = e.ProducerID, int32(e.Epoch), e.lastSeq()
		ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = e.LastTimestamp, e.CoordinatorEpoch, e.TxnFirstOffset
		out = append(out, ap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
