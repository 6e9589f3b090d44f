package coordinator

// AddOffsetsToTxn (key 25), v0–v4.
//
// Behavior:
//   - adds the group's __consumer_offsets partition (Java hashCode of the
//     group id, abs, mod 50, as Kafka's partitionFor) to the transaction,
//     with AddPartitionsToTxn's checks; the answer waits for durability.
//   - storing the offsets needs a group coordinator, which txncoord does
//     not have yet: the partition is only recorded, and its marker will go
//     to whichever node leads __consumer_offsets (none today).
//   - an Ongoing transaction keeps its client TV; otherwise TV 0.
//
// Version notes: v<2 get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED;
// v4 adds TRANSACTION_ABORTABLE (never returned here).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

const (
	addOffsetsMin = 0
	addOffsetsMax = 4
)

// offsetsPartition is Kafka's GroupCoordinator.partitionFor.
func offsetsPartition(group string) int32 {
	var h int32
	for _, ch := range utf16Units(group) {
		h = 31*h + int32(ch)
	}
	if h == -1<<31 {
		h = 0 // Kafka's Utils.abs maps MIN_VALUE to 0
	} else if h < 0 {
		h = -h
	}
	return h % consumerOffsetsPartitions
}

// utf16Units are the UTF-16 code units Java's String.hashCode iterates.
func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

func (c *Coordinator) handleAddOffsetsToTxn(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	c.counters.addOffsets.Add(1)
	if txnIDDenied(r, kmsg.ACLOperationWrite, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return wire.Now(resp)
	}
	tp := txnlog.TopicPartition{Topic: consumerOffsetsTopic, Partition: offsetsPartition(req.Group)}
	now := c.nowMs()
	d := c.step(req.TransactionalID, false, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
		return txncore.AddPartitions(cur, pending, txncore.AddPartitionsRequest{
			ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
			Partitions: []txnlog.TopicPartition{tp}, KeepTV: true,
		}, now)
	})
	return func() (kmsg.Response, error) {
		resp.ErrorCode = oldFenced(d.wait().Err, req.Version, 2)
		return resp, nil
	}
}
