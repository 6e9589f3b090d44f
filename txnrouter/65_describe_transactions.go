package txnrouter

// DescribeTransactions (key 65): the ids are split by partition, each part
// described by its coordinator, and the states merged in request order. An
// id this node may not describe is refused here, on the original request
// (the parts carry no security context); an id of a partition not served
// here gets NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

func (r *Router) handleDescribeTransactions(ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeTransactionsRequest)
	states := make([]*kmsg.DescribeTransactionsResponseTransactionState, len(body.TransactionalIDs))
	var order []int32
	parts := map[int32]*kmsg.DescribeTransactionsRequest{}
	index := map[int32][]int{} // the request positions of each part's ids
	for i, id := range body.TransactionalIDs {
		if !wire.TransactionalIDAllowed(req, kmsg.ACLOperationDescribe, id) {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode, st.ProducerID, st.ProducerEpoch = id, kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
			states[i] = &st
			continue
		}
		p := r.PartitionFor(id)
		part := parts[p]
		if part == nil {
			part = kmsg.NewPtrDescribeTransactionsRequest()
			part.SetVersion(body.Version)
			parts[p] = part
			order = append(order, p)
		}
		part.TransactionalIDs = append(part.TransactionalIDs, id)
		index[p] = append(index[p], i)
	}
	replies := make([]wire.Reply, len(order))
	for i, p := range order {
		hs, code := r.route(p)
		if code != 0 {
			replies[i] = wire.Now(wire.ErrorResponse(parts[p], code))
			continue
		}
		replies[i] = hs[65](ctx, sub(req, parts[p]))
	}
	return func() (kmsg.Response, error) {
		resp := body.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for i, reply := range replies {
			got, err := reply()
			if err != nil {
				return nil, err
			}
			g := got.(*kmsg.DescribeTransactionsResponse)
			resp.ThrottleMillis = max(resp.ThrottleMillis, g.ThrottleMillis)
			for j := range g.TransactionStates {
				if j < len(index[order[i]]) {
					states[index[order[i]][j]] = &g.TransactionStates[j]
				}
			}
		}
		for i, st := range states {
			if st == nil { // not answered: cannot happen with the coordinator's handler
				s := kmsg.NewDescribeTransactionsResponseTransactionState()
				s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = body.TransactionalIDs[i], kerr.UnknownServerError.Code, -1, -1
				st = &s
			}
			resp.TransactionStates = append(resp.TransactionStates, *st)
		}
		return resp, nil
	}
}
