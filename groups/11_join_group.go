package groups

// JoinGroup (key 11), v0–v9.
//
// Behavior:
//   - a new member gets its id (client id + "-" + a UUID); from v4 a new
//     dynamic member first gets MEMBER_ID_REQUIRED with it (KIP-394) and
//     must join again with it within its session timeout;
//   - a static member (group.instance.id, v5+) that joins again without
//     its member id replaces its old id (the old one is fenced with
//     FENCED_INSTANCE_ID); a known instance id with another member id is
//     FENCED_INSTANCE_ID;
//   - the answer waits until every member rejoined or the rebalance
//     timeout passed (core.go); an Empty group first waits the initial
//     rebalance delay (0 by default: kfake waits none, Kafka 3 s);
//   - a member that joins again while its earlier JoinGroup waits takes
//     its place (Kafka's ClassicGroup.updateMember replaces the waiting
//     future): the earlier one gets no response, unless it came on the
//     same connection (pipelined), where both get the later one's answer
//     in order (Coordinator.supersede); the same for SyncGroup;
//   - INVALID_SESSION_TIMEOUT outside [min, max] session timeout,
//     INCONSISTENT_GROUP_PROTOCOL for a protocol type or protocols the
//     group cannot take, UNKNOWN_MEMBER_ID for an unknown member id.
//
// Version notes: v0 has no rebalance timeout (the session timeout is
// used); v7 adds the protocol type to the answer; v9 SkipAssignment (a
// static leader replaced without a rebalance; before v9 it gets no
// members, so it does not assign).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// joinGroupAPI is JoinGroup v0–v9.
var joinGroupAPI = wire.API[*Coordinator]{Key: 11, Min: 0, Max: 9, Handle: (*Coordinator).handleJoinGroup}

func (c *Coordinator) handleJoinGroup(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.JoinGroupRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	jr := JoinRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: str(req.InstanceID), ClientID: str(r.ClientID),
		ClientHost: clientHost(r), ProtocolType: req.ProtocolType, SessionTimeout: millis(req.SessionTimeoutMillis),
		RebalanceTimeout: millis(req.RebalanceTimeoutMillis), RequireKnownMemberID: req.Version >= 4, Reason: str(req.Reason)}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return waitingReply(c, ctx, r,
		func(now time.Time, token uint64) (JoinResult, bool) { return c.core.Join(now, jr, token) },
		func(a Answer) JoinResult { return *a.Join },
		func(res JoinResult, code int16) JoinResult { return joinErr(code, res.MemberID) },
		func(res JoinResult) kmsg.Response { return joinResponse(req, res) })
}

func joinResponse(req *kmsg.JoinGroupRequest, res JoinResult) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.LeaderID, resp.MemberID = res.Err, res.Generation, res.Leader, res.MemberID
	protocol := res.Protocol
	resp.Protocol = &protocol
	if req.Version >= 7 {
		if res.Err != 0 {
			resp.Protocol = nil
		} else {
			pt := res.ProtocolType
			resp.ProtocolType = &pt
		}
	}
	resp.SkipAssignment = res.SkipAssignment && req.Version >= 9
	if res.SkipAssignment && req.Version < 9 {
		return resp // the old static leader gets no members, so it does not assign
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.ID, m.Metadata
		if m.InstanceID != "" {
			id := m.InstanceID
			rm.InstanceID = &id
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}
