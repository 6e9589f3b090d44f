package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// ErrorResponse answers req with code everywhere its response carries an
// error: every partition of a partition request, every transaction of a
// batched one, or the top-level code. It serves the answers a node gives
// without handling the request: a broker-only call from the wrong principal
// (CLUSTER_AUTHORIZATION_FAILED), a partition request at a node that leads
// nothing (NOT_LEADER_OR_FOLLOWER), a coordinator request at a leader
// (NOT_COORDINATOR), a scripted error in a test leader. It returns nil for
// Produce with acks=0 (no response is sent) and for keys it does not know.
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.Acks == 0 {
			return nil
		}
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.BaseOffset, rp.LogStartOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.FetchRequest:
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.WriteTxnMarkersRequest:
		resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range r.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	case *kmsg.DescribeProducersRequest:
		resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range r.Topics { // v0–v3: one transaction
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if r.Version >= 4 {
			// The top-level code, as Kafka's getErrorResponse, and every
			// partition, for readers that only look at those.
			resp.ErrorCode = code
		}
		for _, txn := range r.Transactions {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = txn.TransactionalID
			for _, t := range txn.Topics {
				rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rtt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rtt.Partitions = append(rtt.Partitions, rp)
				}
				rt.Topics = append(rt.Topics, rtt)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.AddOffsetsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.EndTxnRequest:
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.DescribeTransactionsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	case *kmsg.ListTransactionsRequest:
		resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.ErrorCode = code
		return resp
	}
	return nil
}
