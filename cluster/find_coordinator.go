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
//   - transaction keys (key type 1) → the coordinator node; a key longer
//     than MaxTransactionalIDBytes → INVALID_REQUEST;
//   - group keys (key type 0) → the coordinator node, which leads every
//     __consumer_offsets partition and runs the group coordinator;
//   - other key types → INVALID_REQUEST.
//
// Version notes: v4+ batches keys (Coordinators); v0–v3 carry one key;
// v0 has no key type (it is a group key).
const (
	FindCoordinatorMinVersion = 0
	FindCoordinatorMaxVersion = 6
)

// MaxTransactionalIDBytes is the longest transactional id (UTF-8 bytes)
// txncoord accepts. Kafka states no limit, but every string it serializes,
// the __transaction_state key included, has an int16 length: an id longer
// than 32767 bytes cannot be stored (its serializer throws "field is too
// long to be serialized"). txncoord answers such an id INVALID_REQUEST
// (FindCoordinator, InitProducerId) instead of storing what Kafka cannot.
const MaxTransactionalIDBytes = 0x7fff

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
	answer := func(keyType int8, key string) (nodeID int32, errCode int16, msg *string) {
		switch keyType {
		case 1:
			if len(key) > MaxTransactionalIDBytes {
				return -1, kerr.InvalidRequest.Code, kmsg.StringPtr("transactional id longer than 32767 bytes")
			}
			return coord.NodeID, 0, nil
		case 0:
			return coord.NodeID, 0, nil
		default:
			return -1, kerr.InvalidRequest.Code, kmsg.StringPtr("unknown coordinator key type")
		}
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.ErrorCode, c.ErrorMessage = answer(req.CoordinatorType, key)
			if c.ErrorCode == 0 {
				c.Host, c.Port = host, port
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	resp.NodeID, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorType, req.CoordinatorKey)
	if resp.ErrorCode == 0 {
		resp.Host, resp.Port = host, port
	}
	return resp
}
