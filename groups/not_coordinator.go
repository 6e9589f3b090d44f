package groups

import (
	"context"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/wire"
)

// RegisterNotCoordinator registers, for each group key reg has no handler
// for (a leader node), the answer of a Kafka broker that coordinates no
// group: ListGroups lists none (kadm asks every broker), every other
// group request is NOT_COORDINATOR, so the client asks FindCoordinator
// again. WriteTxnMarkers and DescribeProducers are left to the leader's
// own handlers. The KIP-848 keys are advertised too when the group
// coordinator (a node of groupCoordinatorVersion) serves them, so every
// node shows the cluster's APIs (KafkaJS takes one broker's table for all).
func RegisterNotCoordinator(reg *wire.Registry, groupCoordinatorVersion string) {
	keys := maps.Clone(APIs)
	if ServesConsumerProtocol(groupCoordinatorVersion) {
		maps.Copy(keys, ConsumerProtocolAPIs)
	}
	for key, r := range keys {
		if _, _, ok := reg.Range(key); ok || key == 27 || key == 61 {
			continue
		}
		reg.Register(key, r[0], r[1], func(_ context.Context, req *wire.Request) wire.Reply {
			if req.Key == 16 {
				return wire.Now(req.Body.ResponseKind())
			}
			return wire.Now(wire.UnservedResponse(req.Body, kerr.NotCoordinator.Code))
		})
	}
}
