package coordclient

// FindCoordinator (key 10), v0–v6, as a leader of a cluster with several
// coordinators answers it: forwarded through Routed.
//
// Behavior:
//   - transaction keys (key type 1) are forwarded to a coordinator
//     (Routed.FindCoordinator), which answers each id's current owner: a client may
//     ask any broker for its transaction coordinator, and a leader
//     answering from the cluster file ("node 0") would send it to a
//     coordinator that answers NOT_COORDINATOR, and round again;
//   - group keys (key type 0) are forwarded too: the group coordinator
//     moves between the coordinators with its etcd lease, which only
//     they see;
//   - the forward failing (no coordinator reachable) is
//     COORDINATOR_NOT_AVAILABLE for each key (retriable);
//   - other key types are answered by the cluster view, as every node
//     does (cluster.View.FindCoordinator: INVALID_REQUEST).
//
// Version notes: v0–v3 carry one key, v4+ batch keys; the forward always
// uses the batched form and the answer is given at the request's version.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// findForwardTimeout bounds a forwarded FindCoordinator (clients retry).
const findForwardTimeout = 10 * time.Second

// RegisterFindCoordinator registers key 10 on a leader's registry in place
// of v.RegisterFindCoordinator: transaction and group keys through r, the
// others by v.
func (r *Routed) RegisterFindCoordinator(reg *wire.Registry, v *cluster.View) {
	reg.Register(10, cluster.FindCoordinatorMinVersion, cluster.FindCoordinatorMaxVersion, func(ctx context.Context, req *wire.Request) wire.Reply {
		body := req.Body.(*kmsg.FindCoordinatorRequest)
		if body.CoordinatorType != 0 && body.CoordinatorType != 1 {
			return wire.Now(v.FindCoordinator(body))
		}
		keys := body.CoordinatorKeys
		if body.Version < 4 {
			keys = []string{body.CoordinatorKey}
		}
		// The Reply waits on another node; FindCoordinator touches no
		// partition state, so waiting keeps request order safely.
		return func() (kmsg.Response, error) {
			fwd := kmsg.NewPtrFindCoordinatorRequest()
			fwd.CoordinatorType, fwd.CoordinatorKeys = body.CoordinatorType, keys
			fctx, cancel := context.WithTimeout(ctx, findForwardTimeout)
			found, err := r.FindCoordinator(fctx, fwd)
			cancel()
			byKey := map[string]kmsg.FindCoordinatorResponseCoordinator{}
			if err != nil {
				req.Logger().Warn().Err(err).Msg("FindCoordinator forward to the coordinators failed")
			} else {
				for _, c := range found.Coordinators {
					byKey[c.Key] = c
				}
			}
			answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
				if c, ok := byKey[key]; ok {
					return c
				}
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.NodeID, c.Port = key, -1, -1
				c.ErrorCode, c.ErrorMessage = kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("no coordinator answered")
				return c
			}
			resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
			if body.Version >= 4 {
				for _, key := range keys {
					resp.Coordinators = append(resp.Coordinators, answer(key))
				}
				return resp, nil
			}
			c := answer(body.CoordinatorKey)
			resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
			return resp, nil
		}
	})
}
