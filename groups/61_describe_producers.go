package groups

// DescribeProducers (key 61), v0, for __consumer_offsets partitions.
//
// Behavior: every producer the partition has state for (a transactional
// offset commit or a marker), sorted by id: its epoch and coordinator
// epoch, last sequence -1 (offset commits carry none), last timestamp,
// and CurrentTxnStartOffset (the position its open transaction began at
// in the partition, -1 when none). The marker sender asks this after
// INVALID_PRODUCER_EPOCH. It shows durable state only.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// describeProducersAPI is DescribeProducers v0, for __consumer_offsets.
var describeProducersAPI = wire.API[*Coordinator]{Key: 61, Min: 0, Max: 0, Handle: (*Coordinator).handleDescribeProducers}

func (c *Coordinator) handleDescribeProducers(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	return func() (kmsg.Response, error) {
		readErr := c.readable(ctx)
		return wire.DescribeProducersResponse(req, func(topic string, idx int32) (int16, wire.ActiveProducers) {
			if code := c.offsetsPartitionCode(topic, idx); code != 0 {
				return code, nil
			}
			if readErr != nil {
				return storeErrCode(readErr), nil
			}
			c.mu.Lock()
			states := c.core.Producers(idx)
			c.mu.Unlock()
			var out wire.ActiveProducers
			for pid, ps := range states {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pid, int32(ps.Epoch), -1
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.LastTimestamp, ps.CoordinatorEpoch, ps.TxnStart
				out = append(out, ap)
			}
			sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
			return 0, out
		}), nil
	}
}
