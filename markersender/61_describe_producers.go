package markersender

// DescribeProducers (key 61), v0, sent to the leader that answered
// INVALID_PRODUCER_EPOCH to a marker.
//
// Behavior:
//   - the producer at or past the marker's epoch with no open transaction
//     (CurrentTxnStartOffset -1) means the marker, or a later one, was
//     already applied: the partition counts as done (architecture
//     invariant 6);
//   - for a TV2 marker, the producer at or past the marker's epoch with an
//     open transaction also means it was applied: TV2 writes a
//     transaction's markers at the epoch its next transaction uses, and a
//     txncoord leader holds data at that epoch back until the open
//     transaction is closed by its marker, so the transaction open at that
//     epoch is a later one (a marker resent after a coordinator restart,
//     when the next transaction had already started);
//   - anything else (no state, a lower epoch, a TV0/TV1 marker with an open
//     transaction) makes the transaction stuck, with the producer state in
//     the reason;
//   - a failed request or a partition error retries the marker later.
//
// Version notes: v0 only (KIP-664).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/txncore"
)

// checkProducers decides the fate of markers rejected with
// INVALID_PRODUCER_EPOCH. They are in flight until decided here.
func (s *Sender) checkProducers(l *leaderState, conn *negotiation.LeaderConn, check []queued) []outcome {
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, q := range check {
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != q.ps.tp.Topic {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic = q.ps.tp.Topic
			req.Topics = append(req.Topics, rt)
			n++
		}
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, q.ps.tp.Partition)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	resp, err := conn.DescribeProducers(ctx, req)
	cancel()

	type partAnswer struct {
		code      int16
		producers []kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	}
	answers := map[txncore.TopicPartition]partAnswer{}
	if err == nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				answers[txncore.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = partAnswer{p.ErrorCode, p.ActiveProducers}
			}
		}
	}
	var outs []outcome
	at := s.newRetryAt()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range check {
		ans, ok := answers[q.ps.tp]
		switch {
		case err != nil:
			s.retryLocked(q, fmt.Sprintf("INVALID_PRODUCER_EPOCH, then DescribeProducers failed: %v", err), at)
			continue
		case !ok || ans.code != 0:
			s.retryLocked(q, fmt.Sprintf("INVALID_PRODUCER_EPOCH, then DescribeProducers: %s", errorName(ans.code)), at)
			continue
		}
		txn := q.ts.txn
		state := "the leader has no state for the producer"
		applied := false
		for _, p := range ans.producers {
			if p.ProducerID != txn.ProducerID {
				continue
			}
			if p.CurrentTxnStartOffset == -1 {
				state = fmt.Sprintf("producer epoch %d, no open transaction", p.ProducerEpoch)
				applied = p.ProducerEpoch >= int32(txn.ProducerEpoch)
			} else {
				state = fmt.Sprintf("producer epoch %d, open transaction from offset %d", p.ProducerEpoch, p.CurrentTxnStartOffset)
				applied = txn.TransactionVersion >= 2 && p.ProducerEpoch >= int32(txn.ProducerEpoch)
			}
		}
		if applied {
			s.log.Info().Str("txn_id", txn.TransactionalID).Int64("pid", txn.ProducerID).Int16("epoch", txn.ProducerEpoch).
				Int32("leader", l.node.NodeID).Str("topic", q.ps.tp.Topic).Int32("partition", q.ps.tp.Partition).
				Str("producer_state", state).Msg("marker rejected with INVALID_PRODUCER_EPOCH was already applied")
			outs = s.doneLocked(q, outs)
			continue
		}
		outs = s.stuckLocked(q, fmt.Sprintf("leader %d rejected the %s marker (pid %d, epoch %d) for %s/%d with INVALID_PRODUCER_EPOCH; %s",
			l.node.NodeID, result(txn.Commit), txn.ProducerID, txn.ProducerEpoch, q.ps.tp.Topic, q.ps.tp.Partition, state), outs)
	}
	return outs
}

func result(commit bool) string {
	if commit {
		return "COMMIT"
	}
	return "ABORT"
}
