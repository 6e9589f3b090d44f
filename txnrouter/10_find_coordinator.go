package txnrouter

// FindCoordinator (key 10). Transactional ids (key type 1) are answered
// with the current owner of their partition as this node's member sees it
// in etcd, at the address Config.Nodes gives its node id;
// COORDINATOR_NOT_AVAILABLE while the partition has no owner (a takeover in
// progress: the client retries) or its owner's address is unknown. Other
// key types are answered by the cluster view, as on a single coordinator.
//
// Where it differs from Kafka, and why: while a key's partition has no
// owner, or its owner's address refuses connections (its process is gone
// but its lease has not expired yet: peers.go), the answer waits, up to
// the lease TTL plus a second (at most maxFindHold), for the partition to
// move, and then names the new owner. Kafka answers at once, and a client
// whose coordinator died then retries against the dead broker with a
// growing backoff until the partition has moved, and for one backoff
// after: the wait turns that into one answer as soon as the new owner is
// known. Groups (key type 0) wait the same way for their
// __consumer_offsets partition to move. The wait is well within every client's
// timeout for a request without a timeout of its own (kgo 10 s, sarama
// 30 s, librdkafka 60 s).

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// maxFindHold bounds the wait of a FindCoordinator for a partition that
// is moving.
const maxFindHold = 6 * time.Second

// findPoll is how often a waiting FindCoordinator looks at the owners.
const findPoll = 50 * time.Millisecond

func (r *Router) handleFindCoordinator(ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.FindCoordinatorRequest)
	// The Reply may wait (a moving partition); FindCoordinator changes
	// no state, so waiting keeps request order safely.
	return func() (kmsg.Response, error) {
		start := time.Now()
		deadline := start.Add(min(r.cfg.Member.LeaseTTL()+time.Second, maxFindHold))
		for {
			resp := r.findAnswer(body)
			if r.serves(ctx, body.Version, resp) || !time.Now().Before(deadline) || !pause(ctx, req.Stopping, findPoll) {
				if held := time.Since(start); held >= findPoll {
					req.Logger().Debug().Dur("held", held).Int8("key_type", body.CoordinatorType).Msg("FindCoordinator waited for a coordinator to move")
				}
				return resp, nil
			}
		}
	}
}

// findAnswer is the answer as things are: transactional ids (key type 1)
// from the owners of their partitions, other key types from the cluster
// view (groups: the owner of the group's __consumer_offsets partition).
func (r *Router) findAnswer(body *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	if body.CoordinatorType != 1 {
		return r.cfg.Coordinator.View.FindCoordinator(body)
	}
	resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if body.Version >= 4 {
		for _, key := range body.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = r.ownerOf(key)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = r.ownerOf(body.CoordinatorKey)
	return resp
}

// serves reports whether every coordinator resp names can serve: none is
// COORDINATOR_NOT_AVAILABLE (no owner, a takeover in progress) and none is
// another node whose address refuses connections (peers.refused).
func (r *Router) serves(ctx context.Context, version int16, resp *kmsg.FindCoordinatorResponse) bool {
	ok := func(node int32, code int16) bool {
		switch {
		case code == kerr.CoordinatorNotAvailable.Code:
			return false
		case code != 0 || node == r.cfg.Member.NodeID():
			return true
		}
		return !r.peers.refused(ctx, node)
	}
	if version < 4 {
		return ok(resp.NodeID, resp.ErrorCode)
	}
	for _, c := range resp.Coordinators {
		if !ok(c.NodeID, c.ErrorCode) {
			return false
		}
	}
	return true
}

// pause waits d; false when ctx ends or the server stops first.
func pause(ctx context.Context, stopping <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stopping:
		return false
	}
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
