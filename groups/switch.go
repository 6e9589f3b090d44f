package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// RegisterSwitch registers every group key (and the KIP-848 keys when a
// node of kafkaVersion serves them) with a handler that calls the
// coordinator current returns, or answers as a node that coordinates no
// group when it returns nil. With several coordinators the group
// coordinator moves between nodes (its lease in etcd); each node
// registers the switch once and opens and closes Coordinators as it gains
// and loses the lease.
//
// Without a current coordinator, ListGroups lists none, a group request
// gets NOT_COORDINATOR (the client asks FindCoordinator again), and
// WriteTxnMarkers and DescribeProducers, about __consumer_offsets
// partitions, get NOT_LEADER_OR_FOLLOWER per partition (the marker
// sender looks the leader up again).
func RegisterSwitch(reg *wire.Registry, kafkaVersion string, current func() *Coordinator) {
	apisFor(kafkaVersion).RegisterEach(reg, func(a wire.API[*Coordinator]) wire.Handler {
		return func(ctx context.Context, req *wire.Request) wire.Reply {
			if c := current(); c != nil {
				return a.Handle(c, ctx, req)
			}
			return notServed(req)
		}
	})
}

// notServed is the answer of a node that coordinates no group now.
func notServed(req *wire.Request) wire.Reply {
	switch body := req.Body.(type) {
	case *kmsg.ListGroupsRequest:
		return wire.Now(body.ResponseKind())
	case *kmsg.WriteTxnMarkersRequest:
		return wire.Now(wire.WriteTxnMarkersResponse(body, func(kmsg.WriteTxnMarkersRequestMarker, string, int32) int16 {
			return kerr.NotLeaderForPartition.Code
		}))
	case *kmsg.DescribeProducersRequest:
		return wire.Now(wire.DescribeProducersResponse(body, func(string, int32) (int16, wire.ActiveProducers) {
			return kerr.NotLeaderForPartition.Code, nil
		}))
	}
	return wire.Now(wire.UnservedResponse(req.Body, kerr.NotCoordinator.Code))
}
