package coordinator

// ListTransactions (key 66), v0–v2.
//
// Behavior:
//   - StateFilters by Kafka state name (unknown names are returned in
//     UnknownStateFilters and match nothing), ProducerIDFilters;
//   - v1 DurationFilterMillis (>= 0): transactions running at least that
//     long; v2 TransactionalIDPattern: a Go (RE2) regular expression, an
//     invalid one gets INVALID_REGULAR_EXPRESSION.
//
// Version notes: v1 adds the duration filter, v2 the id pattern (KIP-1152).

import (
	"context"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// listTxnsAPI is ListTransactions v0–v2.
var listTxnsAPI = wire.API[*Coordinator]{Key: 66, Min: 0, Max: 2, Handle: (*Coordinator).handleListTransactions}

func (c *Coordinator) handleListTransactions(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var f ListFilter
	unknownOnly := false
	for _, name := range req.StateFilters {
		s, ok := txnlog.ParseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		f.States = append(f.States, s)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		unknownOnly = true
	}
	f.ProducerIDs = req.ProducerIDFilters
	if req.Version >= 1 && req.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*req.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return wire.Now(resp)
		}
		f.IDPattern = re
	}
	if unknownOnly {
		return wire.Now(resp)
	}
	for _, s := range c.List(f) {
		if txnIDDenied(r, kmsg.ACLOperationDescribe, s.TransactionalID) {
			continue // Kafka lists only what the principal may describe
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = s.TransactionalID, s.ProducerID, s.State
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return wire.Now(resp)
}
