package txnrouter

// ListTransactions (key 66) lists the transactions of every partition this
// node serves: each coordinator answers the request as it came (filters,
// authorization) and the lists are concatenated. As Kafka's
// TransactionStateManager, the answer is COORDINATOR_LOAD_IN_PROGRESS while
// any owned partition is still loading, with the loaded ones' transactions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

func (r *Router) handleListTransactions(ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ListTransactionsRequest)
	var replies []wire.Reply
	loading := false
	for _, p := range r.owned() {
		hs, code := r.route(p)
		switch code {
		case 0:
			replies = append(replies, hs[66](ctx, req))
		case kerr.CoordinatorLoadInProgress.Code:
			loading = true
		}
	}
	return func() (kmsg.Response, error) {
		resp := body.ResponseKind().(*kmsg.ListTransactionsResponse)
		unknown := map[string]bool{}
		for _, reply := range replies {
			got, err := reply()
			if err != nil {
				return nil, err
			}
			g := got.(*kmsg.ListTransactionsResponse)
			resp.ThrottleMillis = max(resp.ThrottleMillis, g.ThrottleMillis)
			if g.ErrorCode != 0 && resp.ErrorCode == 0 {
				resp.ErrorCode = g.ErrorCode
			}
			for _, f := range g.UnknownStateFilters {
				if !unknown[f] {
					unknown[f] = true
					resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
				}
			}
			resp.TransactionStates = append(resp.TransactionStates, g.TransactionStates...)
		}
		if loading && resp.ErrorCode == 0 {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
		return resp, nil
	}
}
