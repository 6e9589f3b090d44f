package groups

// OffsetDelete (key 47), v0.
//
// Behavior: deletes committed offsets of a group: GROUP_ID_NOT_FOUND if
// there is none; NON_EMPTY_GROUP for a group with members that is not a
// consumer group; per partition GROUP_SUBSCRIBED_TO_TOPIC while a member
// subscribes to its topic, UNKNOWN_TOPIC_OR_PARTITION for a partition the
// cluster does not have. Answered once durable.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// offsetDeleteAPI is OffsetDelete v0.
var offsetDeleteAPI = wire.API[*Coordinator]{Key: 47, Min: 0, Max: 0, Handle: (*Coordinator).handleOffsetDelete}

func (c *Coordinator) handleOffsetDelete(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	if deny := groupDenied(r, kmsg.ACLOperationDelete, req.Group); deny != nil {
		return deny
	}
	var tps []TP
	var idx [][2]int // topic, partition index of each tp
	own := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		own[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			if own[i][j] = c.partitionCode(t.Topic, p.Partition, nil); own[i][j] == 0 {
				tps = append(tps, TP{t.Topic, p.Partition})
				idx = append(idx, [2]int{i, j})
			}
		}
	}
	var top int16
	var codes []int16
	pos, err := c.step(func(now time.Time) { top, codes = c.core.OffsetDelete(now, req.Group, tps) })
	return func() (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		if err == nil {
			err = c.durable(ctx, r, pos)
		}
		if top != 0 {
			resp.ErrorCode = top
			return resp, nil
		}
		if err != nil {
			resp.ErrorCode = storeErrCode(err)
			return resp, nil
		}
		for k, ij := range idx {
			own[ij[0]][ij[1]] = codes[k]
		}
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, own[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}
