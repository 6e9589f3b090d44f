package leaderstub

// DeleteRecords (key 21), v0–v2.
//
// Behavior, as Kafka's Partition.deleteRecordsOnLeader:
//   - offset -1 means the high watermark; the log start offset moves to the
//     offset (never back), and the answer's low watermark is the new log
//     start offset;
//   - an offset below -1 or above the high watermark is
//     OFFSET_OUT_OF_RANGE (low watermark -1);
//   - a topic whose cleanup.policy does not hold delete is
//     POLICY_VIOLATION;
//   - batches wholly below the new start are deleted; the batch holding it
//     stays (Fetch below the start is OFFSET_OUT_OF_RANGE, ListOffsets
//     earliest answers the start), as Kafka keeps the segment holding it;
//   - the answer waits until the new start is durable in the process log.
//
// Version notes: v2 flexible.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// deleteRecordsAPI is DeleteRecords v0–v2.
var deleteRecordsAPI = wire.API[*Leader]{Key: 21, Min: 0, Max: 2, Handle: (*Leader).handleDeleteRecords}

func (l *Leader) handleDeleteRecords(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	type pending struct {
		topic, partition int // indexes into resp
		op               *writeOp
	}
	var waits []pending
	for ti, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for pi, rp := range rt.Partitions {
			dp := kmsg.NewDeleteRecordsResponseTopicPartition()
			dp.Partition, dp.LowWatermark = rp.Partition, -1
			p, kerrE := l.partitionFor(rt.Topic, rp.Partition)
			switch {
			case kerrE != nil:
				dp.ErrorCode = kerrE.Code
			case !l.topicValues(rt.Topic).Delete:
				dp.ErrorCode = kerr.PolicyViolation.Code
			default:
				var op *writeOp
				dp.LowWatermark, op, dp.ErrorCode = l.deleteRecords(p, rp.Offset)
				if op != nil {
					waits = append(waits, pending{ti, pi, op})
				}
			}
			t.Partitions = append(t.Partitions, dp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return func() (kmsg.Response, error) {
		for _, w := range waits {
			if err := w.op.Wait(); err != nil {
				dp := &resp.Topics[w.topic].Partitions[w.partition]
				dp.ErrorCode, dp.LowWatermark = errCode(err), -1
			}
		}
		return resp, nil
	}
}

// deleteRecords moves p's log start to offset (-1: the high watermark) and
// queues the change; it returns the new log start, the op to wait for (nil
// when nothing changed) and an error code.
func (l *Leader) deleteRecords(p *partition, offset int64) (int64, *writeOp, int16) {
	if err := l.space.Err(); err != nil {
		return -1, nil, kerr.KafkaStorageError.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if offset == -1 {
		offset = p.hw
	}
	if offset < 0 || offset > p.hw {
		return -1, nil, kerr.OffsetOutOfRange.Code
	}
	if offset <= p.logStart {
		return p.logStart, nil, 0
	}
	op := &persistOp{key: p.key}
	for len(p.batches) > 0 && p.batches[0].Last < offset {
		b := p.batches[0]
		p.batches = p.batches[1:]
		p.size -= b.Size
		op.dropped = append(op.dropped, b.Base)
	}
	p.logStart = offset
	op.droppedAborted = p.dropAbortedBelowStart()
	op.logStart = offset
	l.log.Info().Str("topic", p.topic).Int32("partition", p.index).Int64("log_start", offset).Msg("delete records: log start moved")
	return offset, l.enqueue(op), 0
}
