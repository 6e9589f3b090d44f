package groups

// ShareGroupDescribe (key 77), v1.
//
// Behavior: per group, its state (Empty, Stable), group epoch,
// assignment epoch, assignor ("simple") and members (ids, epochs,
// client, host, rack, subscribed topics, assignment with topic names);
// GROUP_ID_NOT_FOUND for a group that is not a share group (one of
// another type gets Kafka's message saying so). Authorized operations
// are not computed (-2147483648, "not requested").
//
// Version notes: v1 only (Kafka 4.1 dropped v0).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// shareGroupDescribeAPI is ShareGroupDescribe v1.
var shareGroupDescribeAPI = wire.API[*Coordinator]{Key: 77, Min: 1, Max: 1, Handle: (*Coordinator).handleShareGroupDescribe}

func (c *Coordinator) handleShareGroupDescribe(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	img := viewImage{c.cfg.View}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = id
		g := c.core.shareGroups[id]
		if g == nil {
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + id + " not found."
			if _, other := c.core.groups[id]; other {
				msg = "Group " + id + " is not a share group."
			}
			rg.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = g.stateName(), g.Epoch, g.AssignmentEpoch, "simple"
		for _, mid := range sortedKeys(g.Members) {
			m := g.Members[mid]
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.ID, m.RackID, m.Epoch, m.ClientID, m.ClientHost
			rm.SubscribedTopicNames = append([]string{}, m.Topics...)
			for _, t := range shareOwned(g.assignment[m.ID]) {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Partitions = t.TopicID, t.Partitions
				tp.Topic, _ = img.TopicByID(t.TopicID)
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return wire.Now(resp)
}
