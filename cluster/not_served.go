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
// DescribeProducers, ShareFetch, ShareAcknowledge) that reaches a node
// leading no partitions is answered NOT_LEADER_OR_FOLLOWER per partition,
// so the client refreshes its metadata; a coordinator request that reaches
// a leader is answered NOT_COORDINATOR, so the client asks FindCoordinator
// again; ListTransactions lists nothing, as a broker coordinating no
// transactions does.

// RegisterNotServed registers, for each key of apis that reg has no handler
// for, a handler that answers as above.
func RegisterNotServed(reg *wire.Registry, apis map[int16][2]int16) {
	for key, r := range apis {
		if _, _, ok := reg.Range(key); ok {
			continue
		}
		reg.RegisterStandIn(key, r[0], r[1], func(_ context.Context, req *wire.Request) wire.Reply {
			resp, err := notServed(req.Body)
			if err != nil {
				return wire.Fail(err)
			}
			return wire.Now(resp)
		})
	}
}

// leaderKeys are the partition requests; the rest are coordinator requests.
var leaderKeys = map[int16]bool{0: true, 1: true, 2: true, 21: true, 23: true, 27: true, 61: true, 78: true, 79: true}

func notServed(body kmsg.Request) (kmsg.Response, error) {
	switch {
	case body.Key() == 66: // ListTransactions: none coordinated here
		return body.ResponseKind(), nil
	case body.Key() == 0 && body.(*kmsg.ProduceRequest).Acks == 0:
		return nil, nil // acks=0 gets no response
	}
	code := kerr.NotCoordinator.Code
	if leaderKeys[body.Key()] {
		code = kerr.NotLeaderForPartition.Code // NOT_LEADER_OR_FOLLOWER
	}
	if resp := wire.UnservedResponse(body, code); resp != nil { // ErrorResponse, or mirrored (DeleteRecords, OffsetForLeaderEpoch)
		return resp, nil
	}
	return nil, fmt.Errorf("cluster: no not-served answer for %s", kmsg.NameForKey(body.Key()))
}
