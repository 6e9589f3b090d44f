package txnrouter

// FindCoordinator (key 10). Transactional ids (key type 1) are answered
// with the current owner of their partition as this node's member sees it
// in etcd, at the address Config.Nodes gives its node id;
// COORDINATOR_NOT_AVAILABLE while the partition has no owner (a takeover in
// progress: the client retries) or its owner's address is unknown. Other
// key types are answered by the cluster view, as on a single coordinator.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

func (r *Router) handleFindCoordinator(_ context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.FindCoordinatorRequest)
	if body.CoordinatorType != 1 {
		return wire.Now(r.cfg.Coordinator.View.FindCoordinator(body))
	}
	resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if body.Version >= 4 {
		for _, key := range body.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = r.ownerOf(key)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return wire.Now(resp)
	}
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = r.ownerOf(body.CoordinatorKey)
	return wire.Now(resp)
}

// ownerOf is the coordinator of transactional id key.
func (r *Router) ownerOf(key string) (node int32, host string, port int32, code int16, msg *string) {
	if len(key) > cluster.MaxTransactionalIDBytes {
		return -1, "", -1, kerr.InvalidRequest.Code, kmsg.StringPtr("transactional id longer than 32767 bytes")
	}
	owner, _, ok := r.cfg.Member.Owner(r.PartitionFor(key))
	if !ok {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("the transaction state partition has no owner")
	}
	addr, ok := r.cfg.Nodes[owner]
	if !ok {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("the owner's address is unknown")
	}
	h, p, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("the owner's address is not host:port")
	}
	return owner, h, int32(n), 0, nil
}
