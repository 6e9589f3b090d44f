package leaderstub

// ShareAcknowledge (key 79), v1–v2: a share-group member acknowledges
// records it acquired, without fetching.
//
// Behavior:
//   - the member's share session must exist (SHARE_SESSION_NOT_FOUND)
//     at the request's epoch (INVALID_SHARE_SESSION_EPOCH; epoch 0, which
//     would open one, is INVALID_SHARE_SESSION_EPOCH too); -1 closes it
//     after the acknowledgements, releasing what the member still holds
//     on its partitions;
//   - per partition: accept and reject finish a record, release makes it
//     available again (archived once it reached the delivery count
//     limit), gap archives it; INVALID_RECORD_STATE when the member does
//     not hold a record, INVALID_REQUEST for malformed batches, all or
//     nothing per partition;
//   - answered once the changed share partitions are durable.
//
// Version notes: v2 IsRenewAck (KIP-1222: type 4 renews the lock) and
// AcquisitionLockTimeoutMillis.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// shareAcknowledgeAPI is ShareAcknowledge v1–v2.
var shareAcknowledgeAPI = wire.API[*Leader]{Key: 79, Min: 1, Max: 2, Handle: (*Leader).handleShareAcknowledge}

func (l *Leader) handleShareAcknowledge(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if !validShareMember(req.GroupID, req.MemberID) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return wire.Now(resp)
	}
	group, member := *req.GroupID, *req.MemberID
	cfg := l.shareConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LockDuration.Milliseconds())
	renew := req.Version >= 2 && req.IsRenewAck
	key := shareSessionKey{group, member}
	now := l.cfg.Now()

	l.shares.mu.Lock()
	sess := l.shares.sessions[key]
	switch {
	case req.ShareSessionEpoch == 0 || req.ShareSessionEpoch < -1:
		l.shares.mu.Unlock()
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return wire.Now(resp)
	case sess == nil:
		l.shares.mu.Unlock()
		resp.ErrorCode = kerr.ShareSessionNotFound.Code
		return wire.Now(resp)
	case req.ShareSessionEpoch > 0 && req.ShareSessionEpoch != sess.epoch:
		l.shares.mu.Unlock()
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return wire.Now(resp)
	}
	var waits []<-chan error
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			batches := ackBatches(p.AcknowledgementBatches, func(b kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
			rp.ErrorCode = l.shareAck(now, group, member, t.TopicID, p.Partition, batches, renew, &waits)
			if rp.ErrorCode == kerr.NotLeaderForPartition.Code {
				if tt, ok := l.cfg.View.TopicByID(t.TopicID); ok {
					if n, ok := l.cfg.View.LeaderOf(tt.Name, p.Partition); ok {
						rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = n.NodeID, 0
						host, port := hostPortOf(n.Addr)
						ep := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
						ep.NodeID, ep.Host, ep.Port = n.NodeID, host, port
						resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == -1 {
		waits = append(waits, l.closeShareSession(key, sess)...)
	} else {
		sess.epoch, sess.lastUsed = max(sess.epoch+1, 1), now
	}
	l.shares.mu.Unlock()
	if len(waits) > 0 {
		l.notify()
	}
	return func() (kmsg.Response, error) {
		if err := waitAll(waits); err != nil {
			resp.ErrorCode = kerr.KafkaStorageError.Code
		}
		return resp, nil
	}
}
