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
// own handlers.
func RegisterNotCoordinator(reg *wire.Registry) {
	for key, r := range APIs {
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
