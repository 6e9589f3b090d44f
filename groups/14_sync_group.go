package groups

// SyncGroup (key 14), v0–v5.
//
// Behavior:
//   - in CompletingRebalance every member waits for the leader's
//     SyncGroup; the leader's assignment is stored (durable) before any
//     member gets its part; a member the leader left out gets an empty
//     assignment;
//   - in Stable the member's assignment at once; PreparingRebalance is
//     REBALANCE_IN_PROGRESS; a wrong generation ILLEGAL_GENERATION; an
//     unknown member UNKNOWN_MEMBER_ID; a fenced static member
//     FENCED_INSTANCE_ID.
//
// Version notes: v3 adds group.instance.id; v5 the protocol type and name
// (INCONSISTENT_GROUP_PROTOCOL if they differ from the group's) in the
// request and the answer.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// syncGroupAPI is SyncGroup v0–v5.
var syncGroupAPI = wire.API[*Coordinator]{Key: 14, Min: 0, Max: 5, Handle: (*Coordinator).handleSyncGroup}

func (c *Coordinator) handleSyncGroup(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.SyncGroupRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	sr := SyncRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: str(req.InstanceID), Generation: req.Generation,
		Assignments: map[string][]byte{}}
	if req.Version >= 5 {
		sr.ProtocolType, sr.Protocol = req.ProtocolType, req.Protocol
	}
	for _, a := range req.GroupAssignment {
		sr.Assignments[a.MemberID] = a.MemberAssignment
	}
	return waitingReply(c, ctx, r,
		func(now time.Time, token uint64) (SyncResult, bool) { return c.core.Sync(now, sr, token) },
		func(a Answer) SyncResult { return *a.Sync },
		func(_ SyncResult, code int16) SyncResult { return SyncResult{Err: code} },
		func(res SyncResult) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode, resp.MemberAssignment = res.Err, res.Assignment
			if req.Version >= 5 && res.Err == 0 {
				pt, p := res.ProtocolType, res.Protocol
				resp.ProtocolType, resp.Protocol = &pt, &p
			}
			return resp
		})
}
