package cluster

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// FindCoordinator (key 10), v0–v6, served identically by every node, since
// clients may ask any broker.
//
// Behavior:
//   - transaction keys (key type 1) → the coordinator node;
//   - group keys (key type 0) → COORDINATOR_NOT_AVAILABLE: txncoord has no
//     group coordinator yet;
//   - other key types → INVALID_REQUEST.
//
// Version notes: v4+ batches keys (Coordinators); v0–v3 carry one key;
// v0 has no key type (it is a group key).
const (
	FindCoordinatorMinVersion = 0
	FindCoordinatorMaxVersion = 6
)

// RegisterFindCoordinator registers the FindCoordinator handler.
func (v *View) RegisterFindCoordinator(reg *wire.Registry) {
	reg.Register(10, FindCoordinatorMinVersion, FindCoordinatorMaxVersion, func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(v.FindCoordinator(r.Body.(*kmsg.FindCoordinatorRequest)))
	})
}

// FindCoordinator answers one FindCoordinator request.
func (v *View) FindCoordinator(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	coord := v.Coordinator()
	host, port := hostPort(coord.Addr)
	answer := func(keyType int8) (nodeID int32, errCode int16, msg *string) {
		switch keyType {
		case 1:
			return coord.NodeID, 0, nil
		case 0:
			return -1, kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("txncoord has no group coordinator")
		default:
			return -1, kerr.InvalidRequest.Code, kmsg.StringPtr("unknown coordinator key type")
		}
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.ErrorCode, c.ErrorMessage = answer(req.CoordinatorType)
			if c.ErrorCode == 0 {
				c.Host, c.Port = host, port
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	resp.NodeID, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorType)
	if resp.ErrorCode == 0 {
		resp.Host, resp.Port = host, port
	}
	return resp
}
