package groups

// DescribeGroups (key 15), v0–v5.
//
// Behavior: per group its state, protocol type, and members (id,
// instance id, client id and host); a Stable group also the selected
// protocol and each member's metadata for it and assignment, as Kafka
// shows them only then. A group that does not exist, or a KIP-848
// consumer group (ConsumerGroupDescribe describes those), is state
// "Dead", with no error. Authorized operations are not computed (the field keeps
// Kafka's "not requested" value).
//
// Version notes: v3 adds authorized operations; v4 the instance id.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// describeGroupsAPI is DescribeGroups v0–v5.
var describeGroupsAPI = wire.API[*Coordinator]{Key: 15, Min: 0, Max: 5, Handle: (*Coordinator).handleDescribeGroups}

func (c *Coordinator) handleDescribeGroups(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.State = id, Dead.String()
		if !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.GroupResource(id)) {
			rg.ErrorCode, rg.State = kerr.GroupAuthorizationFailed.Code, ""
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		// A consumer group is not a classic group: Kafka answers it as
		// one that does not exist (v6+ adds GROUP_ID_NOT_FOUND).
		if g := c.core.groups[id]; g != nil && g.Type == TypeClassic {
			rg.State, rg.ProtocolType = g.State.String(), g.ProtocolType
			stable := g.State == Stable
			if stable {
				rg.Protocol = g.Protocol
			}
			for _, mid := range sortedMembers(g) {
				m := g.Members[mid]
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.ClientID, rm.ClientHost = m.ID, m.ClientID, m.ClientHost
				if m.InstanceID != "" {
					inst := m.InstanceID
					rm.InstanceID = &inst
				}
				if stable {
					rm.ProtocolMetadata, rm.MemberAssignment = m.metadataFor(g.Protocol), m.Assignment
				}
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return wire.Now(resp)
}
