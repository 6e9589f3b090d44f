package security

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Authorizer returns the wire.Authorizer of this file:
//   - the cluster principal may do anything;
//   - CLUSTER_ACTION and ALTER on the cluster (broker-only calls) are the
//     cluster principal's only;
//   - a transactional id is allowed when the principal has no entry in
//     transactional_id_prefixes (unless restrict_transactional_ids), or
//     the id starts with one of its prefixes;
//   - everything else (topics: txncoord has no topic ACLs) is allowed.
func (c *Credentials) Authorizer() wire.Authorizer {
	return wire.AuthorizerFunc(c.authorize)
}

func (c *Credentials) authorize(principal string, op kmsg.ACLOperation, res wire.Resource) bool {
	if c.ClusterPrincipal != "" && principal == c.ClusterPrincipal {
		return true
	}
	switch res.Type {
	case kmsg.ACLResourceTypeCluster:
		return op != kmsg.ACLOperationClusterAction && op != kmsg.ACLOperationAlter
	case kmsg.ACLResourceTypeTransactionalId:
		prefixes, listed := c.TransactionalIDPrefixes[principal]
		if !listed {
			return !c.RestrictTransactionalIDs
		}
		for _, p := range prefixes {
			if strings.HasPrefix(res.Name, p) {
				return true
			}
		}
		return false
	}
	return true
}
