package markersender

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/txntimeline"
)

// runSlot is one in-flight slot of a leader: it takes everything queued for
// the leader (up to MaxMarkersPerRequest), sends it as one request on its
// own connection, and handles the answer.
func (s *Sender) runSlot(l *leaderState, conn *negotiation.LeaderConn, slot int) {
	defer s.wg.Done()
	if slot == 0 {
		// Negotiate at once, so operators see every known leader's
		// version before the first marker.
		s.connect(l, conn)
	}
	probe := time.NewTimer(s.cfg.ProbeInterval)
	defer probe.Stop()
	for {
		batch := s.takeBatch(l)
		if len(batch) > 0 {
			s.sendBatch(l, conn, batch)
			continue
		}
		if !probe.Stop() {
			select {
			case <-probe.C:
			default:
			}
		}
		probe.Reset(s.cfg.ProbeInterval)
		select {
		case <-s.ctx.Done():
			return
		case <-l.wake:
		case <-probe.C:
			// Idle and disconnected: reconnect so the status shows a
			// restarted leader's new version without waiting for a marker.
			if slot == 0 && !conn.Status().Connected {
				s.connect(l, conn)
			}
		}
	}
}

func (s *Sender) connect(l *leaderState, conn *negotiation.LeaderConn) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := conn.Connect(ctx); err != nil && s.ctx.Err() == nil {
		s.log.Debug().Int32("leader", l.node.NodeID).Err(err).Msg("leader not reachable")
	}
	l.series.inUse.Set(float64(conn.Status().InUse))
}

// takeBatch pops the leader's sendable markers and marks them in flight.
// Entries made stale by Forget, Enqueue (replace), stuck or re-routing are
// dropped here.
func (s *Sender) takeBatch(l *leaderState) []queued {
	var leaderLog durable.Log
	if s.cfg.LeaderLog != nil {
		leaderLog = s.cfg.LeaderLog(l.node.Addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch []queued
	pids := map[int64]*txnState{}
	var keep []queued
	i := 0
	for ; i < len(l.queue); i++ {
		if s.cfg.MaxMarkersPerRequest > 0 && len(batch) >= s.cfg.MaxMarkersPerRequest {
			break
		}
		q := l.queue[i]
		if !q.ps.queued || q.ps.inFlight || !q.ps.routed || q.ps.leader != l.node.NodeID ||
			!s.currentLocked(q.ts) || q.ts.stuck != "" || q.ts.parts[q.ps.tp] != q.ps {
			q.ps.queued = false
			continue
		}
		// A Prepare not durable yet: only a leader appending to the
		// same log, which writes the marker after it, may have it.
		if !q.ts.txn.durable() && !durable.Shares(leaderLog, q.ts.txn.At) {
			keep = append(keep, q)
			continue
		}
		// The response is keyed by producer id: two transactions with one
		// pid cannot share a request.
		if other := pids[q.ts.txn.ProducerID]; other != nil && other != q.ts {
			keep = append(keep, q)
			continue
		}
		pids[q.ts.txn.ProducerID] = q.ts
		q.ps.queued, q.ps.inFlight = false, true
		batch = append(batch, q)
	}
	switch {
	case len(keep) > 0:
		l.queue = append(keep, l.queue[i:]...)
	case i == len(l.queue):
		l.queue = nil
	default:
		l.queue = l.queue[i:]
	}
	if len(l.queue) > 0 && len(batch) > 0 {
		wake(l) // another slot may take the rest
	}
	sortQueued(batch)
	return batch
}

// sendBatch sends one WriteTxnMarkers request and applies the response
// table to every partition in it.
func (s *Sender) sendBatch(l *leaderState, conn *negotiation.LeaderConn, batch []queued) {
	req := buildRequest(batch)
	if f := s.cfg.Faults; f.Armed() {
		// An injected hold (faults.HoldMarkers) waits here, outside the
		// request's timeout; the sender's Close ends the wait.
		if err := f.HoldMarkers(s.ctx, l.node.NodeID, req, s.resender(l.node)); err != nil {
			s.onSendError(l, batch, time.Now(), err)
			return
		}
	}
	sentAt := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	resp, err := conn.WriteTxnMarkers(ctx, req)
	cancel()
	st := conn.Status()
	l.series.inUse.Set(float64(st.InUse))
	if err != nil {
		s.onSendError(l, batch, sentAt, err)
		return
	}
	l.series.sentAt(req.Version).Add(float64(len(batch)))
	s.m.perRequest.Observe(float64(len(batch)))

	codes := responseAnswers(resp)
	if s.cfg.Timeline != nil {
		s.recordAnswers(l.node.NodeID, req.Version, sentAt, batch, func(i int, q queued) int16 {
			if code, ok := codes.code(i, markerKey{q.ts.txn.ProducerID, q.ps.tp}); ok {
				return code
			}
			return txntimeline.NoAnswer
		})
	}
	var outs []outcome
	var check []queued
	renegotiate := false
	at := s.newRetryAt()
	s.mu.Lock()
	for i, q := range batch {
		code, ok := codes.code(i, markerKey{q.ts.txn.ProducerID, q.ps.tp})
		if !ok {
			s.m.errors.WithLabelValues("MISSING_IN_RESPONSE").Inc()
			s.retryLocked(q, "partition missing from the leader's response", at)
			continue
		}
		if code != 0 {
			s.m.errors.WithLabelValues(errorName(code)).Inc()
		}
		q.ps.v2Closes, q.ps.lastCode = 0, code
		switch act := actionFor(code); act {
		case actDone:
			outs = s.doneLocked(q, outs)
		case actRetry:
			if code == kerr.NotLeaderForPartition.Code || code == kerr.UnknownTopicOrPartition.Code {
				// The partition is not there: deleted (the router
				// resolves it once our metadata agrees), or a node that
				// does not lead it.
				outs = s.refusedLocked(q, l.node.NodeID, errorName(code), errorName(code), at, outs)
				continue
			}
			q.ps.refusals = 0
			s.retryLocked(q, errorName(code), at)
		case actRenegotiate:
			renegotiate = true
			s.retryLocked(q, errorName(code)+": renegotiating the version", at)
		case actCheckProducer:
			check = append(check, q) // stays in flight until checked
		case actFenced:
			outs = s.stuckLocked(q, fmt.Sprintf("leader %d answered TRANSACTION_COORDINATOR_FENCED for %s/%d: "+
				"a newer coordinator epoch wrote to this partition (this coordinator's epoch %d); not resending",
				l.node.NodeID, q.ps.tp.Topic, q.ps.tp.Partition, q.ts.txn.CoordinatorEpoch), outs)
		default:
			s.log.Warn().Str("txn_id", q.ts.txn.TransactionalID).Int32("leader", l.node.NodeID).
				Str("topic", q.ps.tp.Topic).Int32("partition", q.ps.tp.Partition).Str("error", errorName(code)).
				Msg("unexpected WriteTxnMarkers error; retrying")
			s.retryLocked(q, errorName(code), at)
		}
	}
	s.mu.Unlock()
	if renegotiate {
		conn.Reset(errors.New("leader answered UNSUPPORTED_VERSION"))
	}
	if len(check) > 0 {
		outs = append(outs, s.checkProducers(l, conn, check)...)
	}
	s.kickRouter()
	s.run(outs)
}

// onSendError handles a request that got no answer: the connection is
// closed (negotiation.LeaderConn did it), so the retry reconnects and
// renegotiates. A v2 request closed by a leader that advertises less is
// Kafka 4.2.0's hang; after StuckAfterV2Closes of them the transaction is
// reported stuck instead of being retried silently forever.
func (s *Sender) onSendError(l *leaderState, batch []queued, sentAt time.Time, err error) {
	if s.ctx.Err() != nil {
		s.mu.Lock()
		for _, q := range batch {
			q.ps.inFlight, q.ps.routed = false, false
		}
		s.mu.Unlock()
		return
	}
	s.m.errors.WithLabelValues("CONNECTION").Add(float64(len(batch)))
	var se *negotiation.SendError
	v2Rejected := errors.As(err, &se) && se.Version >= 2 && se.AdvertisedMax >= 0 && se.AdvertisedMax < se.Version &&
		!errors.Is(err, context.DeadlineExceeded)
	ev := s.log.Warn().Int32("leader", l.node.NodeID).Int("markers", len(batch)).Err(err)
	if se != nil && se.Version >= 0 {
		ev = ev.Int16("wtm_version", se.Version)
	}
	ev.Msg("WriteTxnMarkers failed; will reconnect and retry")
	if s.cfg.Timeline != nil {
		version := int16(-1)
		if se != nil {
			version = se.Version
		}
		s.recordAnswers(l.node.NodeID, version, sentAt, batch, func(int, queued) int16 { return txntimeline.NoAnswer })
	}
	var outs []outcome
	at := s.newRetryAt()
	s.mu.Lock()
	for _, q := range batch {
		if v2Rejected {
			q.ps.v2Closes++
			if q.ps.v2Closes >= s.cfg.StuckAfterV2Closes {
				reason := fmt.Sprintf("leader %d closed the connection on WriteTxnMarkers v%d; it advertises max v%d; version discovery is off",
					l.node.NodeID, se.Version, se.AdvertisedMax)
				if s.cfg.Discovery {
					reason = fmt.Sprintf("leader %d closed the connection on WriteTxnMarkers v%d; it advertises max v%d",
						l.node.NodeID, se.Version, se.AdvertisedMax)
				}
				outs = s.stuckLocked(q, reason, outs)
				continue
			}
		}
		s.retryLocked(q, err.Error(), at)
	}
	s.mu.Unlock()
	s.kickRouter()
	s.run(outs)
}

// resender sends a copy of a marker request to node on a connection of its
// own, outside the queue and its bookkeeping: a held marker replayed on
// demand (faults.Set.Replay), a late or duplicate marker as the network
// could deliver one.
func (s *Sender) resender(node cluster.Node) faults.Resend {
	return func(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		conn, err := s.newLeaderConn(node)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
		return conn.WriteTxnMarkers(ctx, req)
	}
}

// recordAnswers adds to each transaction's timeline its markers of batch
// as sent to leader at version (-1: unknown, no answer came) and the
// answer per partition.
func (s *Sender) recordAnswers(leader int32, version int16, sentAt time.Time, batch []queued, answer func(int, queued) int16) {
	now := time.Now().UnixMilli()
	for i, q := range batch {
		t := &q.ts.txn
		ev := txntimeline.Event{AtMs: sentAt.UnixMilli(), Kind: txntimeline.MarkerSent, Commit: t.Commit, ProducerID: t.ProducerID, Epoch: t.ProducerEpoch,
			Leader: leader, Version: version, Topic: q.ps.tp.Topic, Partition: q.ps.tp.Partition}
		s.cfg.Timeline.Record(t.TransactionalID, ev)
		ev.AtMs, ev.Kind, ev.ErrorCode = now, txntimeline.MarkerAnswered, answer(i, q)
		s.cfg.Timeline.Record(t.TransactionalID, ev)
	}
}
