package groups

// DescribeShareGroupOffsets (key 90), v0–v1.
//
// Behavior: per group, the share-partition start offset of each asked
// partition (null Topics: every share partition the group has), from
// the partition leaders (Config.Shares); a partition the group has no
// state on is start offset -1; an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION; a group that is neither a share group here
// nor has share state is GROUP_ID_NOT_FOUND.
//
// Version notes: v1 adds Lag (KIP-1226): records from the start offset to
// the high watermark, -1 when unknown.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// describeShareGroupOffsetsAPI is DescribeShareGroupOffsets v0–v1.
var describeShareGroupOffsetsAPI = wire.API[*Coordinator]{Key: 90, Min: 0, Max: 1, Handle: (*Coordinator).handleDescribeShareGroupOffsets}

func (c *Coordinator) handleDescribeShareGroupOffsets(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	img := viewImage{c.cfg.View}
	return func() (kmsg.Response, error) {
		return c.describeShareGroupOffsets(ctx, img, req, resp), nil
	}
}

func (c *Coordinator) describeShareGroupOffsets(ctx context.Context, img viewImage, req *kmsg.DescribeShareGroupOffsetsRequest,
	resp *kmsg.DescribeShareGroupOffsetsResponse) *kmsg.DescribeShareGroupOffsetsResponse {
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		parts, code := c.shareGroupPartitions(ctx, rg.GroupID)
		if code != 0 {
			g.ErrorCode = code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		byTopic := map[string]map[int32]SharePartition{}
		for _, sp := range parts {
			if byTopic[sp.Topic] == nil {
				byTopic[sp.Topic] = map[int32]SharePartition{}
			}
			byTopic[sp.Topic][sp.Partition] = sp
		}
		type ask struct {
			topic string
			parts []int32
		}
		var asks []ask
		if rg.Topics == nil {
			for _, t := range sortedKeys(byTopic) {
				a := ask{topic: t}
				for p := range byTopic[t] {
					a.parts = append(a.parts, p)
				}
				asks = append(asks, a)
			}
		} else {
			for _, t := range rg.Topics {
				asks = append(asks, ask{t.Topic, t.Partitions})
			}
		}
		for _, a := range asks {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = a.topic
			id, n, known := img.TopicByName(a.topic)
			rt.TopicID = id
			for _, p := range sortedInt32(a.parts) {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.Lag, rp.LeaderEpoch = p, -1, -1, 0
				switch sp, ok := byTopic[a.topic][p]; {
				case !known || p < 0 || p >= n:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case ok:
					rp.StartOffset, rp.Lag = sp.StartOffset, sp.Lag
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			g.Topics = append(g.Topics, rt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// shareGroupPartitions is a share group's partitions at the leaders, or
// the group's error: GROUP_ID_NOT_FOUND (none, or another type's id),
// COORDINATOR_NOT_AVAILABLE (the leaders' state is not reachable from
// this process), or a leader's error.
func (c *Coordinator) shareGroupPartitions(ctx context.Context, group string) ([]SharePartition, int16) {
	c.mu.Lock()
	_, isShare := c.core.shareGroups[group]
	_, other := c.core.groups[group]
	c.mu.Unlock()
	if other {
		return nil, kerr.GroupIDNotFound.Code
	}
	if c.cfg.Shares == nil {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	parts, err := c.cfg.Shares.Partitions(ctx, group)
	if err != nil {
		return nil, errCodeOf(err)
	}
	if !isShare && len(parts) == 0 {
		return nil, kerr.GroupIDNotFound.Code
	}
	return parts, 0
}
