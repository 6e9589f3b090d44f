package cluster

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Requests a node does not serve.
//
// Behavior: every node advertises every API of the cluster, as Kafka brokers
// do (KafkaJS gives every broker the ApiVersions table of the first one it
// met). A partition request (Produce, Fetch, ListOffsets, WriteTxnMarkers,
// DescribeProducers) that reaches a node leading no partitions is answered
// NOT_LEADER_OR_FOLLOWER per partition, so the client refreshes its
// metadata; a coordinator request that reaches a leader is answered
// NOT_COORDINATOR, so the client asks FindCoordinator again; ListTransactions
// lists nothing, as a broker coordinating no transactions does.

// RegisterNotServed registers, for each key of apis that reg has no handler
// for, a handler that answers as above.
func RegisterNotServed(reg *wire.Registry, apis map[int16][2]int16) {
	for key, r := range apis {
		if _, _, ok := reg.Range(key); ok {
			continue
		}
		reg.Register(key, r[0], r[1], func(_ context.Context, req *wire.Request) wire.Reply {
			resp, err := notServed(req.Body)
			if err != nil {
				return wire.Fail(err)
			}
			return wire.Now(resp)
		})
	}
}

var (
	notLeader      = kerr.NotLeaderForPartition.Code // NOT_LEADER_OR_FOLLOWER
	notCoordinator = kerr.NotCoordinator.Code
)

func notServed(body kmsg.Request) (kmsg.Response, error) {
	switch req := body.(type) {
	case *kmsg.ProduceRequest:
		if req.Acks == 0 {
			return nil, nil // acks=0 gets no response
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, notLeader
				rp.BaseOffset, rp.LogStartOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.FetchRequest:
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, notLeader
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.ListOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = p.Partition, notLeader, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.WriteTxnMarkersRequest:
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, notLeader
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	case *kmsg.DescribeProducersRequest:
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, notLeader
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = notCoordinator, -1, -1
		return resp, nil
	case *kmsg.AddPartitionsToTxnRequest:
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		if req.Version >= 4 {
			resp.ErrorCode = notCoordinator
			return resp, nil
		}
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, notCoordinator
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.AddOffsetsToTxnRequest:
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = notCoordinator
		return resp, nil
	case *kmsg.EndTxnRequest:
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = notCoordinator, -1, -1
		return resp, nil
	case *kmsg.DescribeTransactionsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, notCoordinator
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil
	case *kmsg.ListTransactionsRequest:
		return req.ResponseKind(), nil
	}
	return nil, fmt.Errorf("cluster: no not-served answer for %s", kmsg.NameForKey(body.Key()))
}
