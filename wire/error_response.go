package wire

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	case *kmsg.ShareFetchRequest:
		// Per partition, no leader hint (-1/-1: Kafka's schema default;
		// 0/0 would name node 0), and the acknowledgements not applied.
		resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				if len(p.AcknowledgementBatches) > 0 {
					rp.AcknowledgeErrorCode = code
				}
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ShareAcknowledgeRequest:
		resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
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
		return WriteTxnMarkersResponse(r, func(kmsg.WriteTxnMarkersRequestMarker, string, int32) int16 { return code })
	case *kmsg.DescribeProducersRequest:
		return DescribeProducersResponse(r, func(string, int32) (int16, ActiveProducers) { return code, nil })
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
	case *kmsg.OffsetFetchRequest:
		return offsetFetchError(r, code)
	}
	return nil
}

// offsetFetchError is Kafka's OffsetFetch answer of a group-level error:
// per group from v8, the top-level error from v2 (no partitions), and for
// v0/v1, which have no top-level error, each requested partition with the
// error and offset -1, so no client reads an offset out of it.
func offsetFetchError(r *kmsg.OffsetFetchRequest, code int16) *kmsg.OffsetFetchResponse {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.SetVersion(r.GetVersion())
	switch v := r.GetVersion(); {
	case v >= 8:
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			resp.Groups = append(resp.Groups, rg)
		}
	case v >= 2:
		resp.ErrorCode = code
	default:
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

// UnservedResponse answers a request for an API the node does not serve
// (not advertised: no handler, or above its Kafka version's profile) with
// code, so that the client fails at once with a clear error instead of
// reconnecting after a closed connection in a silent loop. It is
// ErrorResponse where that knows the key; otherwise it is built from the
// request by the field names kmsg shares between a request and its
// response: the top-level ErrorCode, and each entry of a list the response
// has under the request's name (topics, groups, resources, partitions,
// nested), with its name fields copied and its ErrorCode set. It returns
// nil when there is no response to send (Produce acks=0).
func UnservedResponse(req kmsg.Request, code int16) kmsg.Response {
	if resp := ErrorResponse(req, code); resp != nil {
		return resp
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		return nil
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	mirrorErrors(reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem(), code)
	return resp
}

// mirrorErrors sets dst's ErrorCode to code and, for every list field of
// dst whose namesake in src is a list, adds one entry per src entry, with
// the fields of the same name and type copied and errors mirrored in turn.
// A list of strings in src (DescribeGroups' group ids) fills the first
// string field of each dst entry, a list of int32 (partition numbers) its
// Partition field.
func mirrorErrors(src, dst reflect.Value, code int16) {
	if f := dst.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(code))
	}
	if !src.IsValid() {
		return
	}
	for i := 0; i < dst.NumField(); i++ {
		df := dst.Field(i)
		name := dst.Type().Field(i).Name
		if df.Kind() != reflect.Slice || df.Type().Elem().Kind() != reflect.Struct || !df.CanSet() {
			continue
		}
		sf := src.FieldByName(name)
		if !sf.IsValid() || sf.Kind() != reflect.Slice {
			continue
		}
		out := reflect.MakeSlice(df.Type(), sf.Len(), sf.Len())
		for j := 0; j < sf.Len(); j++ {
			se, de := sf.Index(j), out.Index(j)
			// kmsg's defaults first (-1 for epochs and the like).
			if def := de.Addr().MethodByName("Default"); def.IsValid() {
				def.Call(nil)
			}
			switch se.Kind() {
			case reflect.Int32: // a list of partition numbers
				if f := de.FieldByName("Partition"); f.IsValid() && f.Kind() == reflect.Int32 {
					f.SetInt(se.Int())
				}
				mirrorErrors(reflect.Value{}, de, code)
			case reflect.Struct:
				for k := 0; k < de.NumField(); k++ {
					fname := de.Type().Field(k).Name
					if v := se.FieldByName(fname); v.IsValid() && v.Type() == de.Field(k).Type() && v.Kind() != reflect.Slice && de.Field(k).CanSet() && fname != "ErrorCode" {
						de.Field(k).Set(v)
					}
				}
				mirrorErrors(se, de, code)
			case reflect.String:
				for k := 0; k < de.NumField(); k++ {
					if de.Field(k).Kind() == reflect.String && de.Field(k).CanSet() {
						de.Field(k).SetString(se.String())
						break
					}
				}
				mirrorErrors(reflect.Value{}, de, code)
			}
		}
		df.Set(out)
	}
}
