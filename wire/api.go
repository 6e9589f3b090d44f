package wire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API declares one API key a component S serves: the version range it
// implements (before the node's profile caps it), its handler, and who may
// call it. Each handler file declares its API next to the handler; the
// component lists them once (an APIs value), and everything that must know
// the key reads that list: registration, the stand-ins other nodes
// advertise (cluster.RegisterNotServed), ApiVersions (through the
// registry) and routers that dispatch the key to one of several instances.
type API[S any] struct {
	Key      int16
	Min, Max int16
	// Access is who may call it: AnyCaller unless the API is broker-only.
	Access Access
	// Handle is the handler, a method expression of S (such as
	// (*Coordinator).handleEndTxn): bound to an instance by Bind.
	Handle func(S, context.Context, *Request) Reply
}

// Bind is a's handler on s, behind a's access check.
func (a API[S]) Bind(s S) Handler {
	h := a.Handle
	return a.Access.Guard(func(ctx context.Context, r *Request) Reply { return h(s, ctx, r) })
}

// APIs is a component's list of declared APIs.
type APIs[S any] []API[S]

// Register adds every API of the list, bound to s.
func (as APIs[S]) Register(reg *Registry, s S) {
	for _, a := range as {
		reg.Register(a.Key, a.Min, a.Max, a.Bind(s))
	}
}

// RegisterEach adds every API of the list with the handler handler gives
// it (behind its access check): for a node that dispatches each key to an
// instance of S it picks per request (a router, a switch).
func (as APIs[S]) RegisterEach(reg *Registry, handler func(API[S]) Handler) {
	for _, a := range as {
		reg.Register(a.Key, a.Min, a.Max, a.Access.Guard(handler(a)))
	}
}

// Ranges is the version range of each key of the list.
func (as APIs[S]) Ranges() map[int16][2]int16 {
	m := make(map[int16][2]int16, len(as))
	for _, a := range as {
		m[a.Key] = [2]int16{a.Min, a.Max}
	}
	return m
}

// Keys are the list's keys, in its order.
func (as APIs[S]) Keys() []int16 {
	keys := make([]int16, len(as))
	for i, a := range as {
		keys[i] = a.Key
	}
	return keys
}

// Access is who may call an API.
type Access struct {
	brokersOnly bool
	from        int16 // with brokersOnly: the first version that is broker-only
}

// AnyCaller is the access of a client API: anyone authenticated (the
// handler checks the resources the request names).
var AnyCaller = Access{}

// BrokersOnly is the access of a broker-only API: with security on, only
// the cluster principal (CLUSTER_ACTION on the cluster).
var BrokersOnly = BrokersOnlyFrom(0)

// BrokersOnlyFrom is the access of an API whose versions from v on are
// broker-only and whose older ones are clients' (AddPartitionsToTxn: v4+
// are leaders registering partitions).
func BrokersOnlyFrom(v int16) Access { return Access{brokersOnly: true, from: v} }

// Guard wraps h so that a principal without the access gets
// CLUSTER_AUTHORIZATION_FAILED (31) and h is never called (so nothing
// changes):
//   - WriteTxnMarkers: 31 for every partition of every marker;
//   - AddPartitionsToTxn: top-level 31 (as Kafka's getErrorResponse) and
//     31 for every partition of every transaction, for readers that only
//     look at the per-partition results;
//   - any other key: the connection is closed with a log line (txncoord
//     serves no other broker-only API).
func (a Access) Guard(h Handler) Handler {
	if !a.brokersOnly {
		return h
	}
	return func(ctx context.Context, req *Request) Reply {
		if req.Version < a.from || ClusterAction(req) {
			return h(ctx, req)
		}
		req.Logger().Warn().Str("principal", req.Principal).Str("reason", "cluster authorization failed").Msg("broker-only request denied")
		if req.Key == 27 || req.Key == 24 {
			return Now(ErrorResponse(req.Body, errClusterAuthorizationFailed))
		}
		return Fail(fmt.Errorf("principal %s may not send %s", req.Principal, kmsg.NameForKey(req.Key)))
	}
}
