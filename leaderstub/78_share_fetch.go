package leaderstub

// ShareFetch (key 78), v1–v2: share groups (KIP-932) read at the
// partition leader.
//
// Behavior (share_partitions.go has the state; package shares the
// record state machine):
//   - share sessions, one per (group, member) at this leader: epoch 0
//     opens one with the request's partitions (acknowledgements are then
//     INVALID_REQUEST), a positive epoch must equal the session's
//     (INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND)
//     and adds the request's partitions and drops the forgotten ones, -1
//     closes it, releasing what the member holds on its partitions (as
//     does the end of the connection that opened it), and
//     an epoch below -1 is INVALID_SHARE_SESSION_EPOCH; every answered
//     request moves the epoch on; at the limit of sessions (2000) one
//     unused for longer than the longest share session timeout (60 s) is
//     evicted, else SHARE_SESSION_LIMIT_REACHED;
//   - piggybacked acknowledgements are applied first (per partition
//     AcknowledgeErrorCode), and the answer waits until they are durable;
//   - records are acquired for the member under a lock of the group's
//     share.record.lock.duration.ms, up to MaxRecords (500 when not
//     set), from the share-partition start offset up to the high
//     watermark, or the last stable offset with
//     share.isolation.level=read_committed (aborted transactions are
//     archived, never delivered); a record delivered
//     share.delivery.count.limit times is archived; the window of
//     records in flight is bounded by share.partition.max.record.locks;
//   - nothing to acquire waits up to MaxWaitMillis, woken when the log
//     grows or records are released;
//   - the member id must be present and at most 36 characters; the
//     leader does not check membership (as Kafka);
//   - a partition led elsewhere is NOT_LEADER_OR_FOLLOWER with the
//     current leader and its endpoint.
//
// Version notes: v1 MaxRecords, BatchSize (whole acquired ranges are
// returned: BatchSize does not split them); v2 IsRenewAck (KIP-1222:
// acknowledgements only, type 4 renews a lock; every fetch parameter must
// be zero).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/shares"
	"github.com/txncoord/txncoord/wire"
)

// shareFetchAPI is ShareFetch v1–v2 (Kafka 4.1 dropped the early-access
// v0).
var shareFetchAPI = wire.API[*Leader]{Key: 78, Min: 1, Max: 2, Handle: (*Leader).handleShareFetch}

func (l *Leader) handleShareFetch(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	if !validShareMember(req.GroupID, req.MemberID) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return wire.Now(resp)
	}
	group, member := *req.GroupID, *req.MemberID
	cfg := l.shareConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LockDuration.Milliseconds())
	renew := req.Version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0 || !allAcks(req.Topics)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return wire.Now(resp)
	}
	ans := &shareFetchAnswer{resp: resp, l: l}
	now := l.cfg.Now()
	key := shareSessionKey{group, member}
	var waits []<-chan error

	l.shares.mu.Lock()
	sess := l.shares.sessions[key]
	switch {
	case req.ShareSessionEpoch < -1:
		l.shares.mu.Unlock()
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return wire.Now(resp)
	case req.ShareSessionEpoch == 0:
		if anyAcks(req.Topics) {
			l.shares.mu.Unlock()
			resp.ErrorCode = kerr.InvalidRequest.Code
			return wire.Now(resp)
		}
		if sess == nil && !l.shares.roomForSession(now) {
			l.shares.mu.Unlock()
			resp.ErrorCode = kerr.ShareSessionLimitReached.Code
			return wire.Now(resp)
		}
		sess = &shareSession{partitions: map[topicPartitionID]bool{}, conn: r.ConnID}
		l.shares.sessions[key] = sess
	case sess == nil:
		l.shares.mu.Unlock()
		resp.ErrorCode = kerr.ShareSessionNotFound.Code
		return wire.Now(resp)
	case req.ShareSessionEpoch > 0 && req.ShareSessionEpoch != sess.epoch:
		l.shares.mu.Unlock()
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return wire.Now(resp)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartitionID{t.TopicID, p.Partition}
			if _, ok := sess.partitions[tp]; !ok && req.ShareSessionEpoch >= 0 {
				sess.partitions[tp] = true
			}
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			batches := ackBatches(p.AcknowledgementBatches, func(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
			ans.part(t.TopicID, p.Partition).AcknowledgeErrorCode = l.shareAck(now, group, member, t.TopicID, p.Partition, batches, renew, &waits)
		}
	}
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			delete(sess.partitions, topicPartitionID{f.TopicID, p})
		}
	}
	if req.ShareSessionEpoch == -1 {
		// Closing: what the member still holds here goes back to the
		// group now rather than when its locks expire.
		waits = append(waits, l.closeShareSession(key, sess)...)
		l.shares.mu.Unlock()
		l.notify()
		return ans.afterDurable(waits)
	}
	sess.epoch, sess.lastUsed = max(sess.epoch+1, 1), now
	targets := make([]topicPartitionID, 0, len(sess.partitions))
	for tp := range sess.partitions {
		targets = append(targets, tp)
	}
	rotate := int(sess.epoch)
	l.shares.mu.Unlock()
	if len(waits) > 0 {
		l.notify() // released records may be acquired by a waiting fetch
	}
	if renew {
		return ans.afterDurable(waits)
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = shares.DefaultMaxRecordsPerFetch
	}
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	return func() (kmsg.Response, error) {
		if err := waitAll(waits); err != nil {
			resp.ErrorCode = kerr.KafkaStorageError.Code
			return resp, nil
		}
		deadline := time.Now().Add(wait)
		for {
			changed := l.changes()
			got, hasErr := l.shareAcquireOnce(ans, group, member, targets, rotate, maxRecords, cfg)
			remaining := time.Until(deadline)
			if got > 0 || hasErr || remaining <= 0 || len(targets) == 0 {
				break
			}
			timer := time.NewTimer(remaining)
			select {
			case <-changed:
			case <-timer.C:
			case <-ctx.Done():
			case <-r.Stopping:
			case <-l.stop:
			}
			timer.Stop()
			if ctx.Err() != nil || l.stopped() || isClosed(r.Stopping) {
				break
			}
		}
		l.shares.mu.Lock()
		if s := l.shares.sessions[key]; s == sess {
			for tp, needs := range sess.partitions {
				if needs {
					ans.part(tp.id, tp.partition)
					sess.partitions[tp] = false
				}
			}
		}
		l.shares.mu.Unlock()
		return resp, nil
	}
}

// shareAcquireOnce acquires records of the session's partitions for the
// member, starting at rotate (fairness across partitions), and fills
// their answers; it returns the records acquired and whether a partition
// had an error.
func (l *Leader) shareAcquireOnce(ans *shareFetchAnswer, group, member string, targets []topicPartitionID, rotate, maxRecords int, cfg shares.Config) (int, bool) {
	type got struct {
		tp     topicPartitionID
		p      *partition
		ranges []shares.Acquired
	}
	var gots []got
	total, hasErr := 0, false
	now := l.cfg.Now()
	var creates []<-chan error
	l.shares.mu.Lock()
	for i := range targets {
		tp := targets[(rotate+i)%len(targets)]
		t, ok := l.cfg.View.TopicByID(tp.id)
		if !ok {
			ans.part(tp.id, tp.partition).ErrorCode = kerr.UnknownTopicID.Code
			hasErr = true
			continue
		}
		p, kerrE := l.partitionFor(t.Name, tp.partition)
		if kerrE != nil {
			ans.notLeader(tp, t.Name, kerrE)
			hasErr = true
			continue
		}
		if total >= maxRecords {
			continue
		}
		sp := l.sharePartition(shareKey{group, t.Name, tp.partition}, p, cfg, &creates)
		spans := p.shareSpans(sp.End(), cfg.ReadCommitted, maxRecords-total)
		ranges := sp.Acquire(now, member, spans, maxRecords-total, cfg)
		for _, a := range ranges {
			total += int(a.Last - a.First + 1)
		}
		if len(ranges) > 0 {
			gots = append(gots, got{tp, p, ranges})
		}
	}
	l.shares.mu.Unlock()
	for _, g := range gots {
		fp := ans.part(g.tp.id, g.tp.partition)
		raw, err := l.readRange(g.p, g.ranges[0].First, g.ranges[len(g.ranges)-1].Last)
		if err != nil {
			fp.ErrorCode = kerr.KafkaStorageError.Code
			hasErr = true
			continue
		}
		fp.Records = raw
		for _, a := range g.ranges {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			fp.AcquiredRecords = append(fp.AcquiredRecords, ar)
		}
	}
	return total, hasErr
}

// shareFetchAnswer builds a ShareFetch response, one entry per partition.
type shareFetchAnswer struct {
	l    *Leader
	resp *kmsg.ShareFetchResponse
}

func (a *shareFetchAnswer) part(id [16]byte, partition int32) *kmsg.ShareFetchResponseTopicPartition {
	ti := -1
	for i := range a.resp.Topics {
		if a.resp.Topics[i].TopicID == id {
			ti = i
			break
		}
	}
	if ti < 0 {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		a.resp.Topics = append(a.resp.Topics, t)
		ti = len(a.resp.Topics) - 1
	}
	t := &a.resp.Topics[ti]
	for i := range t.Partitions {
		if t.Partitions[i].Partition == partition {
			return &t.Partitions[i]
		}
	}
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition = partition
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
	t.Partitions = append(t.Partitions, p)
	return &t.Partitions[len(t.Partitions)-1]
}

// notLeader answers a partition this leader cannot serve, with its
// current leader when another node leads it.
func (a *shareFetchAnswer) notLeader(tp topicPartitionID, topic string, e *kerr.Error) {
	fp := a.part(tp.id, tp.partition)
	fp.ErrorCode = e.Code
	if e != kerr.NotLeaderForPartition {
		return
	}
	if n, ok := a.l.cfg.View.LeaderOf(topic, tp.partition); ok {
		fp.CurrentLeader.LeaderID, fp.CurrentLeader.LeaderEpoch = n.NodeID, 0
		for _, ne := range a.resp.NodeEndpoints {
			if ne.NodeID == n.NodeID {
				return
			}
		}
		host, port := hostPortOf(n.Addr)
		ep := kmsg.NewShareFetchResponseNodeEndpoint()
		ep.NodeID, ep.Host, ep.Port = n.NodeID, host, port
		a.resp.NodeEndpoints = append(a.resp.NodeEndpoints, ep)
	}
}

// afterDurable answers once waits are durable.
func (a *shareFetchAnswer) afterDurable(waits []<-chan error) wire.Reply {
	return func() (kmsg.Response, error) {
		if err := waitAll(waits); err != nil {
			a.resp.ErrorCode = kerr.KafkaStorageError.Code
		}
		return a.resp, nil
	}
}

func anyAcks(ts []kmsg.ShareFetchRequestTopic) bool {
	for _, t := range ts {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				return true
			}
		}
	}
	return false
}

func allAcks(ts []kmsg.ShareFetchRequestTopic) bool {
	for _, t := range ts {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				return false
			}
		}
	}
	return true
}
