package groups

// ShareGroupHeartbeat (key 76), v1: share-group membership (KIP-932).
//
// Behavior (share.go has the state):
//   - epoch 0 joins (creating the group), a positive epoch heartbeats
//     (the member's current or previous epoch, else FENCED_MEMBER_EPOCH),
//     -1 leaves; an unknown member is UNKNOWN_MEMBER_ID, a heartbeat or
//     leave to a group that does not exist GROUP_ID_NOT_FOUND;
//   - the coordinator assigns every partition of the subscribed topics
//     (members share partitions when they outnumber them); a member gets
//     the group epoch and its assignment at its next heartbeat after a
//     change, and with every full request (SubscribedTopicNames set);
//   - the session times out after share.session.timeout.ms (45 s) with no
//     heartbeat: the member is fenced and its records released, as on a
//     leave; HeartbeatIntervalMillis is share.heartbeat.interval.ms (5 s);
//   - a heartbeat that changed the group (a join, a leave, a new epoch,
//     new subscriptions) is answered once its record is durable;
//   - INVALID_REQUEST for a missing group or member id, or a join
//     without topics; GROUP_ID_NOT_FOUND when the id is a classic or
//     consumer group's; GROUP_MAX_SIZE_REACHED past group.share.max.size.
//
// Version notes: v1 only (Kafka 4.1 dropped the early-access v0); the
// member names itself (KIP-1082).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// shareGroupHeartbeatAPI is ShareGroupHeartbeat v1.
var shareGroupHeartbeatAPI = wire.API[*Coordinator]{Key: 76, Min: 1, Max: 1, Handle: (*Coordinator).handleShareGroupHeartbeat}

func (c *Coordinator) handleShareGroupHeartbeat(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	cfg := c.shareConfig(req.GroupID)
	hr := ShareHeartbeatRequest{Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, RackID: req.RackID,
		Topics: req.SubscribedTopicNames, ClientID: str(r.ClientID), ClientHost: clientHost(r),
		SessionTimeout: cfg.SessionTimeout, Interval: cfg.HeartbeatInterval}
	var res ShareHeartbeatResult
	pos, err := c.step(func(now time.Time) { res = c.core.ShareHeartbeat(now, viewImage{c.cfg.View}, hr) })
	if res.Left != nil {
		c.releaseShareMembers([]ShareMemberRef{*res.Left})
	}
	if res.Err == 0 {
		if err == nil {
			err = c.durable(ctx, r, pos)
		}
		if err != nil {
			res = ShareHeartbeatResult{Err: storeErrCode(err), ErrMsg: err.Error()}
		}
	}
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode, resp.HeartbeatIntervalMillis = res.Err, int32(cfg.HeartbeatInterval/time.Millisecond)
	if res.ErrMsg != "" {
		resp.ErrorMessage = &res.ErrMsg
	}
	if res.Err != 0 {
		return wire.Now(resp)
	}
	id := res.MemberID
	resp.MemberID, resp.MemberEpoch = &id, res.Epoch
	if res.HasAssignment {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range res.Assignment {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = t.TopicID, t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return wire.Now(resp)
}
