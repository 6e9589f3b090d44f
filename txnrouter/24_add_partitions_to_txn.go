package txnrouter

// AddPartitionsToTxn (key 24). v0–v3 carry one transactional id and go to
// its partition's coordinator unchanged. v4+ (leaders' batched
// verification and registration) may carry ids of several partitions: the
// batch is split by partition, each part answered by its coordinator (or
// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for every partition of its
// transactions), and the transactions' results merged in request order.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

func (r *Router) handleAddPartitionsToTxn(ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	if body.Version < 4 {
		hs, code := r.route(r.PartitionFor(body.TransactionalID))
		if code != 0 {
			return wire.Now(wire.ErrorResponse(body, code))
		}
		return hs[24](ctx, req)
	}
	if len(body.Transactions) == 1 { // a leader's registration in-process: one id
		return r.addWhole(ctx, req, r.PartitionFor(body.Transactions[0].TransactionalID))
	}
	var order []int32
	parts := map[int32]*kmsg.AddPartitionsToTxnRequest{}
	for _, t := range body.Transactions {
		p := r.PartitionFor(t.TransactionalID)
		part := parts[p]
		if part == nil {
			part = kmsg.NewPtrAddPartitionsToTxnRequest()
			part.SetVersion(body.Version)
			parts[p] = part
			order = append(order, p)
		}
		part.Transactions = append(part.Transactions, t)
	}
	if len(order) == 1 { // the common case: the request as it came
		return r.addWhole(ctx, req, order[0])
	}
	replies := make([]wire.Reply, len(order))
	for i, p := range order {
		hs, code := r.route(p)
		if code != 0 {
			replies[i] = wire.Now(transactionsOnly(wire.ErrorResponse(parts[p], code)))
			continue
		}
		replies[i] = hs[24](ctx, sub(req, parts[p]))
	}
	return func() (kmsg.Response, error) {
		results := map[string]kmsg.AddPartitionsToTxnResponseTransaction{}
		resp := body.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, reply := range replies {
			got, err := reply()
			if err != nil {
				return nil, err
			}
			g := got.(*kmsg.AddPartitionsToTxnResponse)
			resp.ThrottleMillis = max(resp.ThrottleMillis, g.ThrottleMillis)
			if g.ErrorCode != 0 && resp.ErrorCode == 0 {
				resp.ErrorCode = g.ErrorCode
			}
			for _, t := range g.Transactions {
				results[t.TransactionalID] = t
			}
		}
		for _, t := range body.Transactions {
			if res, ok := results[t.TransactionalID]; ok {
				resp.Transactions = append(resp.Transactions, res)
				delete(results, t.TransactionalID) // an id twice: answered once
			}
		}
		return resp, nil
	}
}

// addWhole gives a v4+ request whose transactions are all of partition p to
// p's coordinator as it came.
func (r *Router) addWhole(ctx context.Context, req *wire.Request, p int32) wire.Reply {
	hs, code := r.route(p)
	if code != 0 {
		return wire.Now(transactionsOnly(wire.ErrorResponse(req.Body, code)))
	}
	return hs[24](ctx, req)
}

// transactionsOnly drops the top-level code wire.ErrorResponse sets at v4+:
// a partition not served here fails its transactions, not the whole batch.
func transactionsOnly(resp kmsg.Response) kmsg.Response {
	resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode = 0
	return resp
}
