package topics

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Forwarding, as Kafka 4.x brokers forward the controller's requests to
// the controller (KIP-590): a leader node answers CreateTopics,
// DeleteTopics, CreatePartitions, AlterConfigs and IncrementalAlterConfigs
// by sending the request, at the client's version, to the coordinator node
// and relaying its answer, so a client that sends them to any broker (as
// kadm, sarama and KafkaJS may, to a random one, before they know the
// controller) gets the controller's answer at once. When the controller
// cannot be reached the node answers NOT_CONTROLLER as before: clients
// refresh Metadata and go to its ControllerID themselves.
//
// The controller authorizes the request as the client's: in `txncoord up`
// the forward is in-process and carries the client's principal; a node in
// a process of its own connects as the cluster principal and wraps the
// request in an Envelope carrying the client's principal and address, as
// Kafka does (wire.Envelop; the controller's node unwraps it).

// ForwardFunc sends a controller request, at req.Version, to the
// controller and returns its answer.
type ForwardFunc func(ctx context.Context, req *wire.Request) (kmsg.Response, error)

// forwardTimeout bounds one forwarded request: CreateTopics and
// DeleteTopics carry their own timeout, which the controller applies; this
// is the bound on reaching it.
const forwardTimeout = 30 * time.Second

// RegisterForward answers the controller's keys that reg has no handler
// for by forwarding them with fwd. After a change the controller accepted,
// synced (nil: none) runs before the answer leaves, so that this node's
// own Metadata and DescribeConfigs already show it (a leader of its own
// process: a Follower.Sync).
func RegisterForward(reg *wire.Registry, fwd ForwardFunc, synced func(context.Context)) {
	for _, a := range apis {
		if _, _, ok := reg.Range(a.Key); ok {
			continue
		}
		reg.Register(a.Key, a.Min, a.Max, func(ctx context.Context, req *wire.Request) wire.Reply {
			return forwardReply(ctx, req, fwd, synced)
		})
	}
}

// forwardReply forwards req with fwd (NOT_CONTROLLER when the controller
// cannot answer), then runs synced after an accepted change.
func forwardReply(ctx context.Context, req *wire.Request, fwd ForwardFunc, synced func(context.Context)) wire.Reply {
	after := synced
	if !changed(req.Body) {
		after = nil
	}
	return func() (kmsg.Response, error) {
		return wire.Forward(ctx, req, forwardTimeout, fwd, func() kmsg.Response { return notController(req.Body) }, after)
	}
}

// RegisterSwitch answers the controller's keys on a coordinator of a
// cluster whose controller moves between coordinators (an etcd lease):
// with current's controller while this node holds the lease, otherwise by
// forwarding to the holder with fwd, as RegisterForward does (fwd fails
// while no other node holds it: NOT_CONTROLLER, and clients retry).
func RegisterSwitch(reg *wire.Registry, current func() *Controller, fwd ForwardFunc, synced func(context.Context)) {
	for _, a := range apis {
		// The holder's handler checks access as Register's does; a
		// forward is checked by the holder, as RegisterForward's.
		reg.Register(a.Key, a.Min, a.Max, func(ctx context.Context, req *wire.Request) wire.Reply {
			if c := current(); c != nil {
				return a.Bind(c)(ctx, req)
			}
			return forwardReply(ctx, req, fwd, synced)
		})
	}
}

// changed reports whether a controller request may have changed what
// this node shows (anything but a validate-only request).
func changed(body kmsg.Request) bool {
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		return !r.ValidateOnly
	case *kmsg.CreatePartitionsRequest:
		return !r.ValidateOnly
	case *kmsg.AlterConfigsRequest:
		return !r.ValidateOnly
	case *kmsg.IncrementalAlterConfigsRequest:
		return !r.ValidateOnly
	}
	return true
}

// DialForward is the ForwardFunc of a node in a process of its own: a
// connection to the controller at addr per request (these requests are
// rare), with the cluster's dial settings, carrying the client's id and,
// with security on, its principal in an Envelope.
func DialForward(addr string, dial wire.DialConfig) ForwardFunc {
	return DialForwardTo(func() (string, error) { return addr, nil }, dial)
}

// DialForwardTo is DialForward to the address addr names at each request
// (the holder of the controller's lease); its error fails the forward.
func DialForwardTo(addr func() (string, error), dial wire.DialConfig) ForwardFunc {
	return func(ctx context.Context, req *wire.Request) (kmsg.Response, error) {
		clientID := "txncoord-forward"
		if req.ClientID != nil && *req.ClientID != "" {
			clientID = *req.ClientID
		}
		to, err := addr()
		if err != nil {
			return nil, err
		}
		cl, err := wire.DialWith(ctx, to, clientID, dial)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		if req.Principal == "" { // security off: no principal to carry
			return cl.Do(ctx, req.Body)
		}
		raw, err := cl.Do(ctx, wire.Envelop(req))
		if err != nil {
			return nil, err
		}
		return wire.Unwrap(req, raw)
	}
}
