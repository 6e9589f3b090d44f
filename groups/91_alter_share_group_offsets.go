package groups

// AlterShareGroupOffsets (key 91), v0.
//
// Behavior: sets the share-partition start offset of each named
// partition at its leader (clamped to the log start and the high
// watermark), forgetting the records in flight there; the group is
// created if it does not exist. NON_EMPTY_GROUP while the group has
// members (Kafka: GROUP_NOT_EMPTY... the same code, 68);
// GROUP_ID_NOT_FOUND when the id is another type's group;
// UNKNOWN_TOPIC_OR_PARTITION per unknown partition. Answered once each
// partition's change is durable at its leader.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// alterShareGroupOffsetsAPI is AlterShareGroupOffsets v0.
var alterShareGroupOffsetsAPI = wire.API[*Coordinator]{Key: 91, Min: 0, Max: 0, Handle: (*Coordinator).handleAlterShareGroupOffsets}

func (c *Coordinator) handleAlterShareGroupOffsets(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if code := c.emptyShareGroup(req.GroupID, true); code != 0 {
		resp.ErrorCode = code
		return wire.Now(resp)
	}
	img := viewImage{c.cfg.View}
	return func() (kmsg.Response, error) {
		for _, t := range req.Topics {
			rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			id, n, known := img.TopicByName(t.Topic)
			rt.TopicID = id
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				if !known || p.Partition < 0 || p.Partition >= n {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else if err := c.cfg.Shares.Alter(ctx, req.GroupID, t.Topic, p.Partition, p.StartOffset); err != nil {
					rp.ErrorCode = errCodeOf(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}

// emptyShareGroup checks that group may have its share state changed:
// 0, or GROUP_ID_NOT_FOUND (another type's id; no such share group unless
// create), NON_EMPTY_GROUP (it has members), COORDINATOR_NOT_AVAILABLE
// (the leaders' state is not reachable from this process).
func (c *Coordinator) emptyShareGroup(group string, create bool) int16 {
	if c.cfg.Shares == nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.core.ShareGroupMembers(group)
	switch {
	case !ok && create:
		return c.core.EnsureShareGroup(group)
	case !ok:
		if _, other := c.core.groups[group]; other {
			return kerr.GroupIDNotFound.Code
		}
		return 0 // share state without a group here (after a restart)
	case n > 0:
		return kerr.NonEmptyGroup.Code
	}
	return 0
}

// errCodeOf is a leader's error as a Kafka code.
func errCodeOf(err error) int16 {
	var ke *kerr.Error
	if errorsAs(err, &ke) {
		return ke.Code
	}
	return storeErrCode(err)
}
