package coordinator

// InitProducerId (key 22), v0–v5.
//
// Behavior:
//   - null transactional id: a new producer id at epoch 0 (idempotent
//     producers; leaders forward theirs here). Its block is durable first.
//   - empty transactional id, one longer than
//     cluster.MaxTransactionalIDBytes, or only one of producer id/epoch
//     set: INVALID_REQUEST; timeout <= 0 or above the maximum:
//     INVALID_TRANSACTION_TIMEOUT.
//   - otherwise the core's KIP-360 rules (txncore.InitProducerID); an
//     Ongoing transaction is fenced and aborted and the caller gets
//     CONCURRENT_TRANSACTIONS once that abort is durable.
//
// Version notes: v3 carries the producer id/epoch (KIP-360); v4 knows
// PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v5 adds
// TRANSACTION_ABORTABLE (never returned here); v6 (2PC) is not implemented.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/wire"
)

// initProducerIDAPI is InitProducerId v0–v5: a transactional id's
// producer id and epoch, and idempotent producers' ids.
var initProducerIDAPI = wire.API[*Coordinator]{Key: 22, Min: 0, Max: 5, Handle: (*Coordinator).handleInitProducerID}

func (c *Coordinator) handleInitProducerID(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	c.counters.initPID.Add(1)
	answer := func(o Outcome) (kmsg.Response, error) {
		resp.ErrorCode = oldFenced(o.Err, req.Version, 4)
		if o.Err == 0 {
			resp.ProducerID, resp.ProducerEpoch = o.ProducerID, o.ProducerEpoch
		}
		return resp, nil
	}
	if req.TransactionalID == nil {
		pid, err := c.pids.NextID(c.ctx)
		if err != nil {
			return wire.Now(errResp(resp, c.writeErrorCode(err)))
		}
		return wire.Now(okPID(resp, pid))
	}
	id := *req.TransactionalID
	if txnIDDenied(r, kmsg.ACLOperationWrite, id) {
		return wire.Now(errResp(resp, kerr.TransactionalIDAuthorizationFailed.Code))
	}
	if req.Version < 3 {
		req.ProducerID, req.ProducerEpoch = -1, -1
	}
	switch {
	case id == "" || len(id) > cluster.MaxTransactionalIDBytes || (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		return wire.Now(errResp(resp, kerr.InvalidRequest.Code))
	case req.TransactionTimeoutMillis <= 0 || int64(req.TransactionTimeoutMillis) > c.cfg.MaxTransactionTimeout.Milliseconds():
		return wire.Now(errResp(resp, kerr.InvalidTransactionTimeout.Code))
	}
	now := c.nowMs()
	fenced := false
	d := c.step(id, true, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
		out := txncore.InitProducerID(cur, pending, txncore.InitPIDRequest{
			TransactionalID: id, TimeoutMs: req.TransactionTimeoutMillis,
			ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		}, now, c.serverTV(), pids)
		fenced = out.Markers != nil
		return out
	})
	if fenced {
		c.counters.fenceAborts.Add(1)
		r.Logger().Info().Str("txn_id", id).Msg("InitProducerId fenced an ongoing transaction")
	}
	return func() (kmsg.Response, error) { return answer(d.wait(c.ctx)) }
}

func errResp(resp *kmsg.InitProducerIDResponse, code int16) *kmsg.InitProducerIDResponse {
	resp.ErrorCode = code
	return resp
}

func okPID(resp *kmsg.InitProducerIDResponse, pid int64) *kmsg.InitProducerIDResponse {
	resp.ProducerID, resp.ProducerEpoch = pid, 0
	return resp
}
