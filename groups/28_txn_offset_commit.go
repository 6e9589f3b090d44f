package groups

// TxnOffsetCommit (key 28), v0–v6.
//
// Behavior:
//   - the group's __consumer_offsets partition must be in the producer's
//     transaction. v0–v4: the client added it with AddOffsetsToTxn; it is
//     verified with the transaction coordinator as Kafka 3.6+ does
//     (AddPartitionsToTxn v4+, VerifyOnly=true): a partition not in the
//     transaction is INVALID_TXN_STATE. v5 (TV2): the client skips
//     AddOffsetsToTxn and the partition is added here, implicitly, with
//     AddPartitionsToTxn VerifyOnly=false, the path leaders use;
//     TRANSACTION_ABORTABLE if it cannot be. Other errors of the
//     transaction coordinator are passed on (PRODUCER_FENCED,
//     CONCURRENT_TRANSACTIONS, ...);
//   - then the producer's epoch (txnrules.CheckTxnWrite: below the
//     partition's current one is INVALID_PRODUCER_EPOCH) and, v3+, the
//     KIP-447 checks of generation, member id and group.instance.id
//     (validateCommit, transactional: no REBALANCE_IN_PROGRESS);
//   - the offsets wait for the transaction's marker, invisible to
//     OffsetFetch; answered once they are durable.
//
// Version notes: v2 adds the leader epoch; v3 generation, member id and
// group.instance.id; v5 is TV2 (implicit add, TRANSACTION_ABORTABLE); v6
// (Kafka 4.4, KIP-1319) names topics by id: an unknown id is
// UNKNOWN_TOPIC_ID for its partitions, and a request naming no known topic
// is answered at once, as Kafka's KafkaApis does before the group
// coordinator sees it.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// txnOffsetCommitAPI is TxnOffsetCommit v0–v6.
var txnOffsetCommitAPI = wire.API[*Coordinator]{Key: 28, Min: 0, Max: 6, Handle: (*Coordinator).handleTxnOffsetCommit}

func (c *Coordinator) handleTxnOffsetCommit(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	unknownID := c.resolveTopicIDs(req)
	cr := CommitRequest{Group: req.Group, Generation: -1, Offsets: map[TP]Offset{}}
	if req.Version >= 3 {
		cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, str(req.InstanceID)
	}
	codes := collectOffsets(c, r, cr.Offsets, req.Topics,
		func(t kmsg.TxnOffsetCommitRequestTopic) (string, []kmsg.TxnOffsetCommitRequestTopicPartition) {
			return t.Topic, t.Partitions
		},
		func(p kmsg.TxnOffsetCommitRequestTopicPartition) (int32, int64, int32, *string) {
			return p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
		}, req.Version >= 2)
	for i := range unknownID {
		for j := range codes[i] {
			codes[i][j] = kerr.UnknownTopicID.Code
		}
	}
	return func() (kmsg.Response, error) {
		var code int16
		if len(unknownID) < len(req.Topics) || len(req.Topics) == 0 {
			code = c.txnCommit(ctx, r, req, cr)
		}
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for i, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for j, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes.of(i, j, code)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
}

// resolveTopicIDs names, at v6, each topic by its id; it returns the
// indexes of the topics whose id is unknown (left without a name).
func (c *Coordinator) resolveTopicIDs(req *kmsg.TxnOffsetCommitRequest) map[int]bool {
	if req.Version < 6 {
		return nil
	}
	unknown := map[int]bool{}
	for i := range req.Topics {
		t, ok := c.cfg.View.TopicByID(req.Topics[i].TopicID)
		if !ok {
			unknown[i] = true
			continue
		}
		req.Topics[i].Topic = t.Name
	}
	return unknown
}

// txnCommit verifies (or adds) the partition, then stores the pending
// offsets; it blocks, so it runs in the Reply.
func (c *Coordinator) txnCommit(ctx context.Context, r *wire.Request, req *kmsg.TxnOffsetCommitRequest, cr CommitRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	partition := offsetsPartitionFor(req.Group, c.cfg.View.OffsetsPartitions())
	if code := c.addToTxn(ctx, r, req, partition); code != 0 {
		return code
	}
	var code int16
	pos, err := c.step(func(now time.Time) { code = c.core.TxnCommit(now, cr, req.ProducerID, req.ProducerEpoch) })
	if code != 0 {
		return code
	}
	if c.debugging() {
		tps := make([]TP, 0, len(cr.Offsets))
		for tp := range cr.Offsets {
			tps = append(tps, tp)
		}
		sortTPs(tps)
		r.Logger().Debug().Str("group", req.Group).Int64("pid", req.ProducerID).Int16("epoch", req.ProducerEpoch).
			Str("member", cr.MemberID).Int32("generation", cr.Generation).
			Array("offsets", offsetsArr(len(tps), func(i int) (TP, int64, int16) { return tps[i], cr.Offsets[tps[i]].Offset, 0 })).
			Msg("transactional offsets pending their marker")
	}
	return c.committed(ctx, r, pos, err, "txn", len(cr.Offsets))
}

// addToTxn asks the transaction coordinator to verify (v0–v4) or add
// (v5) the group's __consumer_offsets partition in the transaction.
func (c *Coordinator) addToTxn(ctx context.Context, r *wire.Request, req *kmsg.TxnOffsetCommitRequest, partition int32) int16 {
	logRefusal := func(code int16, why string) int16 {
		r.Logger().Debug().Str("txn_id", req.TransactionalID).Int64("pid", req.ProducerID).Int16("epoch", req.ProducerEpoch).
			Str("group", req.Group).Int32("partition", partition).Int16("error_code", code).Msg("transactional offset commit refused: " + why)
		return code
	}
	if c.cfg.TxnCoordinator == nil {
		return logRefusal(kerr.CoordinatorNotAvailable.Code, "no transaction coordinator")
	}
	areq := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version < 5
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = cluster.OffsetsTopic, []int32{partition}
	tx.Topics = append(tx.Topics, tt)
	areq.Transactions = append(areq.Transactions, tx)
	raw, err := c.cfg.TxnCoordinator(ctx, areq)
	if err != nil {
		return logRefusal(kerr.CoordinatorNotAvailable.Code, "transaction coordinator: "+err.Error())
	}
	resp, ok := raw.(*kmsg.AddPartitionsToTxnResponse)
	if !ok || resp.Version < 4 {
		return logRefusal(kerr.CoordinatorNotAvailable.Code, "unexpected answer of the transaction coordinator")
	}
	code := resp.ErrorCode
	for _, t := range resp.Transactions {
		for _, tt := range t.Topics {
			for _, p := range tt.Partitions {
				if code == 0 {
					code = p.ErrorCode
				}
			}
		}
	}
	switch code {
	case 0:
		return 0
	case kerr.TransactionAbortable.Code, kerr.InvalidTxnState.Code:
		if req.Version >= 5 {
			code = kerr.TransactionAbortable.Code
		} else {
			code = kerr.InvalidTxnState.Code
		}
	case kerr.NotEnoughReplicas.Code, kerr.RequestTimedOut.Code:
		code = kerr.CoordinatorNotAvailable.Code
	}
	return logRefusal(code, "the transaction coordinator refused the partition")
}
