package groups

// LeaveGroup (key 13), v0–v5.
//
// Behavior: removes members; a Stable or CompletingRebalance group
// rebalances, a PreparingRebalance one may complete its join. A member
// left by group.instance.id must match its member id when one is given
// (FENCED_INSTANCE_ID); an unknown one is UNKNOWN_MEMBER_ID.
//
// Version notes: v0–v2 leave one member (its error is the top-level
// error); v3+ a batch of members (KIP-345), each with its own error.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// leaveGroupAPI is LeaveGroup v0–v5.
var leaveGroupAPI = wire.API[*Coordinator]{Key: 13, Min: 0, Max: 5, Handle: (*Coordinator).handleLeaveGroup}

func (c *Coordinator) handleLeaveGroup(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := []LeaveMember{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		members = members[:0]
		for _, m := range req.Members {
			members = append(members, LeaveMember{MemberID: m.MemberID, InstanceID: str(m.InstanceID)})
		}
	}
	var top int16
	var codes []int16
	_, _ = c.step(func(now time.Time) { top, codes = c.core.Leave(now, req.Group, members) })
	resp.ErrorCode = top
	if req.Version < 3 {
		if top == 0 && len(codes) == 1 {
			resp.ErrorCode = codes[0]
		}
		return wire.Now(resp)
	}
	if top == 0 {
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, codes[i]
			resp.Members = append(resp.Members, rm)
		}
	}
	return wire.Now(resp)
}
