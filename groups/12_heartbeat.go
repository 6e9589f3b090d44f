package groups

// Heartbeat (key 12), v0–v4.
//
// Behavior: keeps a member's session alive. Stable and
// CompletingRebalance answer NONE; PreparingRebalance
// REBALANCE_IN_PROGRESS (the member must rejoin); an Empty group, an
// unknown member or group UNKNOWN_MEMBER_ID; a fenced static member
// FENCED_INSTANCE_ID; another generation ILLEGAL_GENERATION.
//
// Version notes: v3 adds group.instance.id.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// heartbeatAPI is Heartbeat v0–v4.
var heartbeatAPI = wire.API[*Coordinator]{Key: 12, Min: 0, Max: 4, Handle: (*Coordinator).handleHeartbeat}

func (c *Coordinator) handleHeartbeat(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.HeartbeatRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	_, _ = c.step(func(now time.Time) {
		resp.ErrorCode = c.core.Heartbeat(now, req.Group, req.MemberID, str(req.InstanceID), req.Generation)
	})
	return wire.Now(resp)
}
