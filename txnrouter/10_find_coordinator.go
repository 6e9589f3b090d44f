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
// known. The wait is well within every client's timeout for a request
// without a timeout of its own (kgo 10 s, sarama 30 s, librdkafka 60 s).

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
	if body.CoordinatorType != 1 {
		return wire.Now(r.cfg.Coordinator.View.FindCoordinator(body))
	}
	keys := body.CoordinatorKeys
	if body.Version < 4 {
		keys = []string{body.CoordinatorKey}
	}
	// The Reply may wait (a moving partition); FindCoordinator changes
	// no state, so waiting keeps request order safely.
	return func() (kmsg.Response, error) {
		if held := r.awaitOwners(ctx, req.Stopping, keys); held > 0 {
			req.Logger().Debug().Dur("held", held).Strs("keys", keys).Msg("FindCoordinator waited for a partition to move")
		}
		resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
		if body.Version >= 4 {
			for _, key := range keys {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key = key
				c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = r.ownerOf(key)
				resp.Coordinators = append(resp.Coordinators, c)
			}
			return resp, nil
		}
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = r.ownerOf(body.CoordinatorKey)
		return resp, nil
	}
}

// awaitOwners waits while a key's partition has no owner or an owner whose
// process is gone (peers.refused), up to the lease TTL plus a second (at
// most maxFindHold), ctx's end or the server's shutdown; it returns how
// long it waited.
func (r *Router) awaitOwners(ctx context.Context, stopping <-chan struct{}, keys []string) time.Duration {
	start := time.Now()
	deadline := start.Add(min(r.cfg.Member.LeaseTTL()+time.Second, maxFindHold))
	for !r.ownersServe(ctx, keys) && time.Now().Before(deadline) {
		t := time.NewTimer(findPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return time.Since(start)
		case <-stopping:
			t.Stop()
			return time.Since(start)
		}
	}
	if held := time.Since(start); held >= findPoll {
		return held
	}
	return 0
}

// ownersServe reports whether every key's partition has an owner that is
// this node or one whose address does not refuse connections.
func (r *Router) ownersServe(ctx context.Context, keys []string) bool {
	self := r.cfg.Member.NodeID()
	for _, key := range keys {
		if len(key) > cluster.MaxTransactionalIDBytes {
			continue // answered INVALID_REQUEST at once
		}
		owner, _, ok := r.cfg.Member.Owner(r.PartitionFor(key))
		if !ok || (owner != self && r.peers.refused(ctx, owner)) {
			return false
		}
	}
	return true
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
