package txnrouter

// InitProducerId (key 22): a transactional id goes to its partition's
// coordinator (handleByID); a null one (an idempotent producer, which asks
// any node) gets a producer id from the shared source at epoch 0, whatever
// partitions this node owns.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

func (r *Router) idempotentPID(ctx context.Context, req *kmsg.InitProducerIDRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	pid, err := r.cfg.ProducerIDs.NextID(ctx)
	switch {
	case errors.Is(err, txnlog.ErrNotOwner):
		resp.ErrorCode = kerr.NotCoordinator.Code
	case err != nil:
		r.log.Warn().Err(err).Msg("producer id for an idempotent producer")
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		resp.ProducerID, resp.ProducerEpoch = pid, 0
	}
	return wire.Now(resp)
}
