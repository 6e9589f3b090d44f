package cluster

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

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
//   - share keys (key type 2, v6+, KIP-932; brokers ask it for the share
//     coordinator of a share partition) "groupId:topicId:partition" → the
//     node that keeps that share partition's state: the partition's
//     leader (the group coordinator node when the topic id is unknown, as
//     Kafka answers without checking the topic); a malformed key, or key
//     type 2 below v6, → INVALID_REQUEST;
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
	// A group's coordinator is the owner of its __consumer_offsets
	// partition, as in Kafka.
	groupOf := func(group string) (Node, int16, *string) {
		n, ok := v.groupCoordinatorOf(OffsetsPartitionFor(group, v.OffsetsPartitions()))
		if !ok {
			return Node{NodeID: -1}, kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("the group coordinator is moving to another node")
		}
		return n, 0, nil
	}
	answer := func(keyType int8, key string) (node Node, errCode int16, msg *string) {
		switch keyType {
		case 1:
			if len(key) > MaxTransactionalIDBytes {
				return Node{NodeID: -1}, kerr.InvalidRequest.Code, kmsg.StringPtr("transactional id longer than 32767 bytes")
			}
			return coord, 0, nil
		case 2:
			if req.Version < 6 {
				return Node{NodeID: -1}, kerr.InvalidRequest.Code, kmsg.StringPtr("share coordinator keys need FindCoordinator v6")
			}
			topicID, partition, ok := parseShareKey(key)
			if !ok {
				return Node{NodeID: -1}, kerr.InvalidRequest.Code, kmsg.StringPtr("share coordinator key must be groupId:topicId:partition")
			}
			if t, known := v.TopicByID(topicID); known {
				if n, led := v.LeaderOf(t.Name, partition); led {
					return n, 0, nil
				}
			}
			return groupOf(shareGroupOf(key))
		case 0:
			return groupOf(key)
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

// shareGroupOf is the group id of a share coordinator key parseShareKey
// accepted.
func shareGroupOf(key string) string {
	tokens := strings.Split(key, ":")
	return strings.Join(tokens[:len(tokens)-2], ":")
}

// parseShareKey reads a share coordinator key, Kafka's SharePartitionKey
// "groupId:topicId:partition": the last token a partition number, the one
// before it a topic id (Kafka's Uuid string, URL-safe base64 of 16 bytes),
// the rest a group id that is not blank (it may hold ':').
func parseShareKey(key string) ([16]byte, int32, bool) {
	var id [16]byte
	tokens := strings.Split(key, ":")
	if len(tokens) < 3 || strings.TrimSpace(strings.Join(tokens[:len(tokens)-2], ":")) == "" {
		return id, 0, false
	}
	p, err := strconv.ParseInt(tokens[len(tokens)-1], 10, 32)
	raw, derr := base64.RawURLEncoding.DecodeString(tokens[len(tokens)-2])
	if err != nil || derr != nil || len(raw) != 16 {
		return id, 0, false
	}
	copy(id[:], raw)
	return id, int32(p), true
}

// GuardFindCoordinator puts Kafka's authorization in front of a
// FindCoordinator handler: a group key the principal may not DESCRIBE is
// answered GROUP_AUTHORIZATION_FAILED, a transactional id it may not
// DESCRIBE TRANSACTIONAL_ID_AUTHORIZATION_FAILED (v4+: per key, the
// others answered by h; before v4: the one key).
func GuardFindCoordinator(h wire.Handler) wire.Handler {
	return func(ctx context.Context, r *wire.Request) wire.Reply {
		req := r.Body.(*kmsg.FindCoordinatorRequest)
		deniedCode := func(key string) int16 {
			switch req.CoordinatorType {
			case 0:
				if !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.GroupResource(key)) {
					return kerr.GroupAuthorizationFailed.Code
				}
			case 1:
				if !wire.TransactionalIDAllowed(r, kmsg.ACLOperationDescribe, key) {
					return kerr.TransactionalIDAuthorizationFailed.Code
				}
			}
			return 0
		}
		if r.Version < 4 {
			if code := deniedCode(req.CoordinatorKey); code != 0 {
				resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
				resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
				return wire.Now(resp)
			}
			return h(ctx, r)
		}
		var keep []string
		var denied []kmsg.FindCoordinatorResponseCoordinator
		for _, key := range req.CoordinatorKeys {
			if code := deniedCode(key); code != 0 {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
				denied = append(denied, c)
				continue
			}
			keep = append(keep, key)
		}
		if len(denied) == 0 {
			return h(ctx, r)
		}
		if len(keep) == 0 {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.Coordinators = denied
			return wire.Now(resp)
		}
		req.CoordinatorKeys = keep
		reply := h(ctx, r)
		return func() (kmsg.Response, error) {
			resp, err := reply()
			if fr, ok := resp.(*kmsg.FindCoordinatorResponse); ok && err == nil {
				fr.Coordinators = append(fr.Coordinators, denied...)
			}
			return resp, err
		}
	}
}
