package groups

// DeleteShareGroupOffsets (key 92), v0.
//
// Behavior: forgets the group's share state of each named topic at the
// leaders (its next fetch starts again from share.auto.offset.reset).
// NON_EMPTY_GROUP while the group has members; GROUP_ID_NOT_FOUND when
// there is no such share group; UNKNOWN_TOPIC_OR_PARTITION per unknown
// topic. Answered once durable at the leaders.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// deleteShareGroupOffsetsAPI is DeleteShareGroupOffsets v0.
var deleteShareGroupOffsetsAPI = wire.API[*Coordinator]{Key: 92, Min: 0, Max: 0, Handle: (*Coordinator).handleDeleteShareGroupOffsets}

func (c *Coordinator) handleDeleteShareGroupOffsets(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if code, _, _ := c.emptyShareGroup(req.GroupID, false); code != 0 {
		resp.ErrorCode = code
		return wire.Now(resp)
	}
	img := viewImage{c.cfg.View}
	return func() (kmsg.Response, error) {
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			id, _, known := img.TopicByName(t.Topic)
			rt.TopicID = id
			if !known {
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if err := c.cfg.Shares.Delete(ctx, req.GroupID, t.Topic); err != nil {
				rt.ErrorCode = errCodeOf(err)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}
