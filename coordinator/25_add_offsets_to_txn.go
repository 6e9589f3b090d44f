package coordinator

// AddOffsetsToTxn (key 25), v0–v4.
//
// Behavior:
//   - adds the group's __consumer_offsets partition
//     (cluster.OffsetsPartitionFor, Kafka's partitionFor) to the
//     transaction, with AddPartitionsToTxn's checks; the answer waits for
//     durability. Its marker goes to the coordinator node, which leads
//     __consumer_offsets and runs the group coordinator.
//   - an Ongoing transaction keeps its client TV; otherwise TV 0.
//   - while no group coordinator serves __consumer_offsets (noLeader), it
//     answers COORDINATOR_NOT_AVAILABLE and adds nothing (invariant 10):
//     Kafka's answer for a group whose offsets partition is not available
//     (KafkaApis.getCoordinator for FindCoordinator, GroupCoordinator while
//     the partition is not loaded); a Kafka broker itself never refuses
//     AddOffsetsToTxn this way, it always has a group coordinator.
//
// Version notes: v<2 get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED;
// v4 adds TRANSACTION_ABORTABLE (never returned here).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/wire"
)

// addOffsetsAPI is AddOffsetsToTxn v0–v4.
var addOffsetsAPI = wire.API[*Coordinator]{Key: 25, Min: 0, Max: 4, Handle: (*Coordinator).handleAddOffsetsToTxn}

func (c *Coordinator) handleAddOffsetsToTxn(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	c.counters.addOffsets.Add(1)
	if txnIDDenied(r, kmsg.ACLOperationWrite, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return wire.Now(resp)
	}
	tp := txncore.TopicPartition{Topic: cluster.OffsetsTopic, Partition: cluster.OffsetsPartitionFor(req.Group, c.cfg.View.OffsetsPartitions())}
	if why := c.noLeader(tp); why != "" {
		c.refuseLeaderless("AddOffsetsToTxn", req.TransactionalID, tp, why)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return wire.Now(resp)
	}
	now := c.nowMs()
	d := c.step(req.TransactionalID, false, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
		return txncore.AddPartitions(cur, pending, txncore.AddPartitionsRequest{
			ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
			Partitions: []txncore.TopicPartition{tp}, KeepTV: true,
		}, now)
	})
	return func() (kmsg.Response, error) {
		resp.ErrorCode = oldFenced(d.wait(c.ctx).Err, req.Version, 2)
		return resp, nil
	}
}
