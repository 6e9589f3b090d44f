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

func (c *Coordinator) handleDescribeProducers(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	return func() (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		readErr := c.readable(ctx)
		for _, rt := range req.Topics {
			t := kmsg.NewDescribeProducersResponseTopic()
			t.Topic = rt.Topic
			for _, idx := range rt.Partitions {
				dp := kmsg.NewDescribeProducersResponseTopicPartition()
				dp.Partition = idx
				if dp.ErrorCode = c.offsetsPartitionCode(rt.Topic, idx); dp.ErrorCode == 0 && readErr != nil {
					dp.ErrorCode = storeErrCode(readErr)
				}
				if dp.ErrorCode == 0 {
					c.mu.Lock()
					states := c.core.Producers(idx)
					c.mu.Unlock()
					for pid, ps := range states {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pid, int32(ps.Epoch), -1
						ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.LastTimestamp, ps.CoordinatorEpoch, ps.TxnStart
						dp.ActiveProducers = append(dp.ActiveProducers, ap)
					}
					sort.Slice(dp.ActiveProducers, func(i, j int) bool {
						return dp.ActiveProducers[i].ProducerID < dp.ActiveProducers[j].ProducerID
					})
				}
				t.Partitions = append(t.Partitions, dp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
}
