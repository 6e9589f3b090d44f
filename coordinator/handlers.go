package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Register adds the coordinator's handlers. Metadata, FindCoordinator and
// ApiVersions are served by cluster.View and wire on every node.
//
// It keeps reg to learn whether a group coordinator registered on it too
// (servesOffsets), so it must be the registry of this node's server.
func (c *Coordinator) Register(reg *wire.Registry) {
	c.reg.Store(reg)
	apis.Register(reg, c)
}

// txnIDDenied reports whether the request's principal may not use the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); always false
// with security off.
func txnIDDenied(r *wire.Request, op kmsg.ACLOperation, id string) bool {
	return !wire.TransactionalIDAllowed(r, op, id)
}

// oldFenced maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for versions
// older than firstFencedVersion, whose clients do not know code 90.
func oldFenced(code, version, firstFencedVersion int16) int16 {
	if code == kerr.ProducerFenced.Code && version < firstFencedVersion {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// Handlers are the handlers Register adds, by API key (their declarations
// are Declared), for a caller that dispatches to several coordinators
// itself (txnrouter: one coordinator per owned __transaction_state
// partition). reg is the node's registry, kept as Register keeps it.
func (c *Coordinator) Handlers(reg *wire.Registry) map[int16]wire.Handler {
	c.reg.Store(reg)
	hs := make(map[int16]wire.Handler, len(apis))
	for _, a := range apis {
		hs[a.Key] = a.Bind(c)
	}
	return hs
}
