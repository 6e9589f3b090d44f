package authmeta

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Forwarding, at a node whose process is not the controller's (a leader,
// or a coordinator other than node 0, in a process of its own): the APIs
// of this package are advertised and sent on to the controller, as a
// Kafka broker forwards them (KIP-590), so an admin client that picks
// such a node gets the controller's answer.
//
// The forward carries the client's principal in an Envelope (wire.Envelop),
// and the controller checks the client's rights against its own ACLs. The
// node checks them first too, with the ACLs it mirrors from the controller
// (Mirror), and answers a refusal itself with the handler of this package,
// which refuses before it touches any state: a request the mirror refuses
// costs the controller nothing.

// ForwardFunc sends a request, at req.Version, to the controller and
// returns its answer.
type ForwardFunc func(ctx context.Context, req *wire.Request) (kmsg.Response, error)

// clusterOps is the operation on the cluster each API needs (the same
// check its handler makes).
var clusterOps = map[int16]kmsg.ACLOperation{
	29: kmsg.ACLOperationDescribe, 30: kmsg.ACLOperationAlter, 31: kmsg.ACLOperationAlter,
	48: kmsg.ACLOperationDescribeConfigs, 49: kmsg.ACLOperationAlterConfigs,
	50: kmsg.ACLOperationDescribe, 51: kmsg.ACLOperationAlter, 57: kmsg.ACLOperationAlter,
}

// forwardTimeout bounds reaching the controller.
const forwardTimeout = 30 * time.Second

// RegisterForward registers the APIs of this package that reg has no
// handler for, forwarded with fwd. After a change the controller
// answered, synced (nil: none) runs before the answer leaves, so that
// this node enforces it already (a Follower's refresh).
func (s *State) RegisterForward(reg *wire.Registry, fwd ForwardFunc, synced func(context.Context)) {
	for _, a := range apis {
		if _, _, ok := reg.Range(a.Key); ok {
			continue
		}
		reg.Register(a.Key, a.Min, a.Max, s.forwarding(a.Key, a.Bind(s), fwd, synced))
	}
}

// RegisterSwitch registers the APIs of this package on a coordinator of a
// cluster whose controller moves between coordinators (an etcd lease):
// served from the State while it is attached (this process holds the
// lease), otherwise forwarded to the holder with fwd, as RegisterForward
// does (fwd fails while no other node holds it: NOT_CONTROLLER, and
// clients retry).
func (s *State) RegisterSwitch(reg *wire.Registry, fwd ForwardFunc, synced func(context.Context)) {
	for _, a := range apis {
		local := a.Bind(s)
		forward := s.forwarding(a.Key, local, fwd, synced)
		reg.Register(a.Key, a.Min, a.Max, func(ctx context.Context, req *wire.Request) wire.Reply {
			if s.Attached() {
				return local(ctx, req)
			}
			return forward(ctx, req)
		})
	}
}

// forwarding is the handler of key that forwards with fwd what this
// node's mirror allows, and answers a refusal with local.
func (s *State) forwarding(key int16, local wire.Handler, fwd ForwardFunc, synced func(context.Context)) wire.Handler {
	op := clusterOps[key]
	return func(ctx context.Context, req *wire.Request) wire.Reply {
		if !clusterAllowed(req, op) {
			return local(ctx, req)
		}
		after := synced
		if op == kmsg.ACLOperationDescribe || op == kmsg.ACLOperationDescribeConfigs {
			after = nil
		}
		return func() (kmsg.Response, error) {
			return wire.Forward(ctx, req, forwardTimeout, fwd, func() kmsg.Response {
				return wire.UnservedResponse(req.Body, kerr.NotController.Code)
			}, after)
		}
	}
}
