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
//   - group keys (key type 0) → the group coordinator node
//     (View.GroupCoordinator), which leads every __consumer_offsets
//     partition; COORDINATOR_NOT_AVAILABLE while it moves between
//     coordinators (several coordinators on etcd);
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
	group, groupOK := v.groupCoordinator()
	answer := func(keyType int8, key string) (node Node, errCode int16, msg *string) {
		switch keyType {
		case 1:
			if len(key) > MaxTransactionalIDBytes {
				return Node{NodeID: -1}, kerr.InvalidRequest.Code, kmsg.StringPtr("transactional id longer than 32767 bytes")
			}
			return coord, 0, nil
		case 0:
			if !groupOK {
				return Node{NodeID: -1}, kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("the group coordinator is moving to another node")
			}
			return group, 0, nil
		default:
			return Node{NodeID: -1}, kerr.InvalidRequest.Code, kmsg.StringPtr("unknown coordinator key type")
		}
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			var n Node
			n, c.ErrorCode, c.ErrorMessage = answer(req.CoordinatorType, key)
			c.NodeID = n.NodeID
			if c.ErrorCode == 0 {
				c.Host, c.Port = hostPort(n.Addr)
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	n, code, msg := answer(req.CoordinatorType, req.CoordinatorKey)
	resp.NodeID, resp.ErrorCode, resp.ErrorMessage = n.NodeID, code, msg
	if resp.ErrorCode == 0 {
		resp.Host, resp.Port = hostPort(n.Addr)
	}
	return resp
}
