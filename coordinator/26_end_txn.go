package coordinator

// EndTxn (key 26), v0–v5.
//
// Behavior:
//   - v0–v4 are TV1 (client TV 0), v5 is TV2 (client TV 2): the core's
//     retry tables (txncore.EndTxn, reference §3).
//   - the answer is sent only after the Prepare* record is durable
//     (invariant 1); the markers are handed to the marker sender when the
//     Prepare is decided, with its position and the coordinator epoch, and
//     reach a leader elsewhere only once it is durable.
//   - TV2 bumps the epoch at Prepare; at epoch 32766 it reserves a new
//     producer id, which Complete* moves to (the client gets (new id, 0)).
//
// Version notes: v<2 get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED;
// v5 returns ProducerId/ProducerEpoch (-1/-1 on error), KIP-890.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/wire"
)

// endTxnAPI is EndTxn v0–v5 (v5: the epoch bump of transaction version 2).
var endTxnAPI = wire.API[*Coordinator]{Key: 26, Min: 0, Max: 5, Handle: (*Coordinator).handleEndTxn}

func (c *Coordinator) handleEndTxn(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	c.counters.endTxn.Add(1)
	if txnIDDenied(r, kmsg.ACLOperationWrite, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return wire.Now(resp)
	}
	start := time.Now()
	// Pipelined: an EndTxn that meets its transaction's last registration
	// still in flight queues its Prepare right behind it. The client
	// sends nothing before the answer, so the log commits the Prepare at
	// once instead of gathering writes behind it (durable.Now): what
	// follows it, its markers and Complete, nobody waits for.
	decide := func() *decision {
		return c.stepWith(req.TransactionalID, stepOpts{speculate: true, urgency: durable.Now}, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
			return txncore.EndTxn(cur, pending, txncore.EndTxnRequest{
				ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Commit: req.Commit, Version: req.Version,
			}, c.nowMs(), pids)
		})
	}
	d := decide()
	return func() (kmsg.Response, error) {
		// CONCURRENT_TRANSACTIONS (the previous transaction's markers
		// still being written): wait for it rather than make the client
		// back off and retry.
		d = settle(c, d, func(d *decision) *decision { return d }, decide, start.Add(maxConcurrentWait), false, wire.CallerDone(ctx))
		o := d.wait(c.ctx)
		resp.ErrorCode = oldFenced(o.Err, req.Version, 2)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if o.Err == 0 && req.Version >= 5 {
			resp.ProducerID, resp.ProducerEpoch = o.ProducerID, o.ProducerEpoch
		}
		result := "abort"
		switch {
		case o.Err != 0:
			result = "error"
		case req.Commit:
			result = "commit"
		}
		c.endTxnLatency.WithLabelValues(result).Observe(time.Since(start).Seconds())
		return resp, nil
	}
}
