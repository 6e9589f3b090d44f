package groups

// ConsumerGroupDescribe (key 69), v0–v1.
//
// Behavior: per group its state (Empty, Assigning, Reconciling, Stable),
// group epoch, target assignment epoch, assignor (the one most members
// ask for, else "uniform") and members: ids, client, host, rack, member
// epoch, subscribed topic names and regex, current assignment and target
// assignment (topic ids and names). An empty id is INVALID_GROUP_ID; a
// group that does not exist, or is not a consumer group,
// GROUP_ID_NOT_FOUND with Kafka's message. Answers only durable state.
// Authorized operations are not computed (the field keeps Kafka's "not
// requested" value), as in DescribeGroups.
//
// Version notes: v1 adds the member type (1: a consumer-protocol member;
// this coordinator has no classic members in consumer groups).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// consumerGroupDescribeAPI is ConsumerGroupDescribe v0–v1.
var consumerGroupDescribeAPI = wire.API[*Coordinator]{Key: 69, Min: 0, Max: 1, Handle: (*Coordinator).handleConsumerGroupDescribe}

func (c *Coordinator) handleConsumerGroupDescribe(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	denied := map[string]bool{}
	for _, id := range req.Groups {
		if !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.GroupResource(id)) {
			denied[id] = true
		}
	}
	return func() (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		readErr := c.readable(ctx)
		img := viewImage{c.cfg.View}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group = id
			switch g := c.core.groups[id]; {
			case denied[id]:
				rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			case readErr != nil:
				rg.ErrorCode = storeErrCode(readErr)
			case id == "":
				rg.ErrorCode = kerr.InvalidGroupID.Code
			case g == nil:
				rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+id+" not found.")
			case g.Type != TypeConsumer:
				rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+id+" is not a consumer group.")
			default:
				c.describeConsumer(g, img, req.Version, &rg)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
}

func (c *Coordinator) describeConsumer(g *Group, img TopicImage, version int16, rg *kmsg.ConsumerGroupDescribeResponseGroup) {
	cg := g.consumer
	rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = cg.state().String(), cg.epoch, cg.assignEpoch, cg.preferredAssignor()
	assignment := func(s partSet) kmsg.Assignment {
		var a kmsg.Assignment
		ids, parts := s.byTopic()
		for _, id := range ids {
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = id, parts[id]
			tp.Topic, _ = img.TopicByID(id)
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		return a
	}
	for _, mid := range cg.sortedMembers() {
		m := cg.members[mid]
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
		if m.InstanceID != "" {
			rm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		if m.RackID != "" {
			rm.RackID = kmsg.StringPtr(m.RackID)
		}
		if m.Regex != "" {
			rm.SubscribedTopicRegex = kmsg.StringPtr(m.Regex)
		}
		rm.SubscribedTopics = append([]string{}, m.Topics...)
		rm.Assignment, rm.TargetAssignment = assignment(m.Assigned), assignment(cg.target[m.ID])
		if version >= 1 {
			rm.MemberType = 1
		}
		rg.Members = append(rg.Members, rm)
	}
}
