package leaderstub

// InitProducerId (key 22), v0–v5, null transactional id only.
//
// Behavior:
//   - an idempotent producer's InitProducerId (null transactional id) is
//     forwarded to the coordinator, which allocates producer ids (KafkaJS
//     sends it to the Metadata ControllerID, kgo to any broker);
//   - a transactional id is NOT_COORDINATOR: this node is never a
//     transaction coordinator, so the client looks it up again;
//   - the coordinator unreachable is COORDINATOR_NOT_AVAILABLE (retriable).
//
// Version notes: v3 carries pid/epoch (KIP-360); v4 PRODUCER_FENCED;
// v5 TRANSACTION_ABORTABLE; all passed through from the coordinator.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// initProducerIDAPI is InitProducerId v0–v5, forwarded to the coordinator.
var initProducerIDAPI = wire.API[*Leader]{Key: 22, Min: 0, Max: 5, Handle: (*Leader).handleInitProducerID}

func (l *Leader) handleInitProducerID(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	fail := func(code int16) wire.Reply {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return wire.Now(resp)
	}
	if req.TransactionalID != nil {
		return fail(kerr.NotCoordinator.Code)
	}
	// Forwarding waits on another node; nothing here touches partition
	// state, so the Reply may wait without breaking request order.
	return func() (kmsg.Response, error) {
		fwd := kmsg.NewPtrInitProducerIDRequest()
		fwd.TransactionTimeoutMillis, fwd.ProducerID, fwd.ProducerEpoch = req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := l.cfg.Coordinator.InitProducerID(cctx, fwd)
		if err != nil {
			l.log.Warn().Err(err).Msg("InitProducerId forward to the coordinator failed")
			r, _ := fail(kerr.CoordinatorNotAvailable.Code)()
			return r, nil
		}
		out := *resp
		return &out, nil
	}
}
