package txnrouter

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/wire"
)

// Register adds the router's handlers to the node's registry, which every
// partition's coordinator is given too (Coordinator.Handlers), and lets the
// router open coordinators. Call it once, before the server starts.
func (r *Router) Register(reg *wire.Registry) {
	r.reg = reg
	coordinator.Declared().RegisterEach(reg, func(a wire.API[*coordinator.Coordinator]) wire.Handler {
		switch a.Key {
		case 24:
			return r.handleAddPartitionsToTxn
		case 65:
			return r.handleDescribeTransactions
		case 66:
			return r.handleListTransactions
		default:
			return r.handleByID(a.Key)
		}
	})
	reg.Register(10, cluster.FindCoordinatorMinVersion, cluster.FindCoordinatorMaxVersion, r.handleFindCoordinator)
	close(r.started)
}

// handleByID dispatches a request about one transactional id (InitProducerId,
// AddOffsetsToTxn, EndTxn) to its partition's coordinator, unchanged.
func (r *Router) handleByID(key int16) wire.Handler {
	switch key {
	case 22, 25, 26:
	default:
		// A coordinator API the router does not know how to route: a
		// programming error, caught at start.
		panic(fmt.Sprintf("txnrouter: no routing for API key %d (%s)", key, kmsg.NameForKey(key)))
	}
	return func(ctx context.Context, req *wire.Request) wire.Reply {
		var id string
		switch b := req.Body.(type) {
		case *kmsg.InitProducerIDRequest:
			if b.TransactionalID == nil {
				return r.idempotentPID(ctx, b)
			}
			id = *b.TransactionalID
		case *kmsg.AddOffsetsToTxnRequest:
			id = b.TransactionalID
		case *kmsg.EndTxnRequest:
			id = b.TransactionalID
		}
		hs, code := r.route(r.PartitionFor(id))
		if code != 0 {
			return wire.Now(wire.ErrorResponse(req.Body, code))
		}
		return hs[key](ctx, req)
	}
}

// sub is a request for part of a batched request's body, as the
// coordinator's handler sees it: the connection's fields, security context
// included (wire.Request.WithBody), so each part is authorized as the
// whole would be.
func sub(req *wire.Request, body kmsg.Request) *wire.Request { return req.WithBody(body) }
