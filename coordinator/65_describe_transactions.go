package coordinator

// DescribeTransactions (key 65), v0.
//
// Behavior:
//   - per id: state name, timeout, start timestamp (-1 when Empty), producer
//     id and epoch, partitions grouped by topic;
//   - an unknown id gets TRANSACTIONAL_ID_NOT_FOUND.
//
// Version notes: v0 only.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/groupby"
	"github.com/txncoord/txncoord/wire"
)

// describeTxnsAPI is DescribeTransactions v0.
var describeTxnsAPI = wire.API[*Coordinator]{Key: 65, Min: 0, Max: 0, Handle: (*Coordinator).handleDescribeTransactions}

func (c *Coordinator) handleDescribeTransactions(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if txnIDDenied(r, kmsg.ACLOperationDescribe, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		d, ok := c.Describe(id)
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis = d.State, d.TimeoutMs
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		st.StartTimestamp = d.StartTimestamp
		if d.State == "Empty" {
			st.StartTimestamp = -1
		}
		var byTopic groupby.Ordered[string, int32]
		for _, tp := range d.Partitions {
			byTopic.Add(tp.Topic, tp.Partition)
		}
		for topic, parts := range byTopic.All() {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic, t.Partitions = topic, parts
			st.Topics = append(st.Topics, t)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return wire.Now(resp)
}
