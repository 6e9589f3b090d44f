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
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wire"
)

// alterShareGroupOffsetsAPI is AlterShareGroupOffsets v0.
var alterShareGroupOffsetsAPI = wire.API[*Coordinator]{Key: 91, Min: 0, Max: 0, Handle: (*Coordinator).handleAlterShareGroupOffsets}

func (c *Coordinator) handleAlterShareGroupOffsets(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	code, pos, err := c.emptyShareGroup(req.GroupID, true)
	if code != 0 {
		resp.ErrorCode = code
		return wire.Now(resp)
	}
	img := viewImage{c.cfg.View}
	return func() (kmsg.Response, error) {
		if err == nil {
			err = c.durable(ctx, r, pos) // the group, if this created it
		}
		if err != nil {
			resp.ErrorCode = storeErrCode(err)
			return resp, nil
		}
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
// 0, or GROUP_ID_NOT_FOUND (another type's id), NON_EMPTY_GROUP (it has
// members), COORDINATOR_NOT_AVAILABLE (the leaders' state is not
// reachable from this process). With create it makes the group if there
// is none; the position is its record's.
func (c *Coordinator) emptyShareGroup(group string, create bool) (code int16, pos wal.Pos, err error) {
	if c.cfg.Shares == nil {
		return kerr.CoordinatorNotAvailable.Code, 0, nil
	}
	pos, err = c.step(func(time.Time) {
		n, ok := c.core.ShareGroupMembers(group)
		switch {
		case !ok && create:
			code = c.core.EnsureShareGroup(group)
		case !ok:
			if _, other := c.core.groups[group]; other {
				code = kerr.GroupIDNotFound.Code
			}
			// else share state without a group here: it may be deleted
		case n > 0:
			code = kerr.NonEmptyGroup.Code
		}
	})
	return code, pos, err
}

// errCodeOf is a leader's error as a Kafka code.
func errCodeOf(err error) int16 {
	var ke *kerr.Error
	if errorsAs(err, &ke) {
		return ke.Code
	}
	return storeErrCode(err)
}
