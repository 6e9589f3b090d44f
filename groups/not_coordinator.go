package groups

import (
	"context"

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
	for _, a := range apisFor(groupCoordinatorVersion) {
		if _, _, ok := reg.Range(a.Key); ok || a.Key == 27 || a.Key == 61 {
			continue
		}
		reg.RegisterStandIn(a.Key, a.Min, a.Max, func(_ context.Context, req *wire.Request) wire.Reply {
			if req.Key == 16 {
				return wire.Now(req.Body.ResponseKind())
			}
			return wire.Now(wire.UnservedResponse(req.Body, kerr.NotCoordinator.Code))
		})
	}
}
