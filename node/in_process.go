package node

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/wire"
)

// inProcessCoordinator is how the embedded cluster's leaders reach the
// coordinator: its wire.Server's handlers called in-process
// (wire.LocalClient), the same handlers, version checks and authorization a
// TCP connection gets, without encoding, sockets and decoding. Leaders start
// before the coordinator, so until bind the client answers the retriable
// error a leader sees when the coordinator is not reachable over TCP (the
// registrar answers NOT_ENOUGH_REPLICAS, the InitProducerId forward
// COORDINATOR_NOT_AVAILABLE, and the producer retries). Leaders in separate
// processes (`txncoord leader`) dial the coordinator over TCP.
type inProcessCoordinator struct {
	principal string
	// from is the log the leaders append to (the process log of
	// `txncoord up`): a coordinator writing to the same log answers their
	// registrations at append.
	from   durable.Log
	client atomic.Pointer[wire.LocalClient]
}

// errCoordinatorNotStarted is the answer before bind (and after a failed
// coordinator start).
var errCoordinatorNotStarted = fmt.Errorf("node: in-process coordinator not started: %w", kerr.CoordinatorNotAvailable)

// newInProcessCoordinator returns an unbound client for v's cluster, for
// leaders appending to from.
func newInProcessCoordinator(v *cluster.View, from durable.Log) *inProcessCoordinator {
	return &inProcessCoordinator{principal: clusterPrincipal(v), from: from}
}

// clusterPrincipal is the principal leaders authenticate to the coordinator
// as over TCP when the cluster file has a security section: the cluster
// principal "User:<cluster_user>" (SASL as cluster_user, or mTLS with the
// node certificate whose CN is cluster_user; security.Settings.Server makes
// that the principal allowed broker-only calls). "" without security.
func clusterPrincipal(v *cluster.View) string {
	s := v.File().Security
	if s == nil || s.ClusterUser == "" {
		return ""
	}
	return "User:" + s.ClusterUser
}

// bind makes every client call srv from now on.
func (c *inProcessCoordinator) bind(srv *wire.Server) {
	c.client.Store(srv.Local(c.principal).WithClientID(cluster.LeaderClientID).Inline().FromLog(c.from))
}

// unbind makes every client answer as before bind: the coordinator is
// stopped.
func (c *inProcessCoordinator) unbind() { c.client.Store(nil) }

// do sends req to the bound coordinator.
func (c *inProcessCoordinator) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl := c.client.Load()
	if cl == nil {
		return nil, errCoordinatorNotStarted
	}
	return cl.Do(ctx, req)
}

// leaderClient is one leader's coordinator client over c.
func (c *inProcessCoordinator) leaderClient() coordclient.Client {
	return coordclient.InProcess(c.do)
}

// forward is the embedded leaders' topics.ForwardFunc: a controller
// request a client sent to a leader goes to the coordinator node's
// handlers in-process, as the client's principal, at the client's version (encoded and decoded as
// over TCP, so nothing is shared with the caller's request).
func (c *inProcessCoordinator) forward(ctx context.Context, req *wire.Request) (kmsg.Response, error) {
	cl := c.client.Load()
	if cl == nil {
		return nil, errCoordinatorNotStarted
	}
	// The client's principal goes with it: the controller authorizes
	// the change as the client's (an empty principal, security off).
	if req.Principal != "" {
		cl = cl.WithPrincipal(req.Principal)
	}
	return cl.AtCallerVersion().Do(ctx, req.Body)
}
