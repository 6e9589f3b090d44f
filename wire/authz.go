package wire

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization: wire authenticates and carries the principal; handlers
// decide, per request, with the helpers below (as Kafka's KafkaApis asks
// its authorizer per request). With Config.Security nil every helper
// answers true, so a node without security behaves as before.
//
// The rules txncoord follows (Kafka's, for the APIs it serves):
//   - broker-only APIs need CLUSTER_ACTION on the cluster, i.e. the cluster
//     principal: WriteTxnMarkers (27, all versions) and AddPartitionsToTxn
//     v4+ (24; v0–v3 are client requests). Anyone else gets
//     CLUSTER_AUTHORIZATION_FAILED (31) and no state changes: wrap those
//     handlers with RequireClusterAction, or call ClusterAction first;
//   - transactional APIs need WRITE on the transactional id
//     (InitProducerId with an id, AddPartitionsToTxn v0–v3, AddOffsetsToTxn,
//     EndTxn, TxnOffsetCommit, a transactional Produce), DescribeTransactions
//     needs DESCRIBE on it, ListTransactions lists only the ids the
//     principal may DESCRIBE. A denied id gets
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): TransactionalIDAllowed.

// Authorizer decides whether principal may perform op on res. It must be
// safe for concurrent use.
type Authorizer interface {
	Authorize(principal string, op kmsg.ACLOperation, res Resource) bool
}

// HostAuthorizer is an Authorizer that also takes the client's host (its
// IP address; "" for an in-process call), as Kafka's ACLs name hosts.
type HostAuthorizer interface {
	Authorizer
	AuthorizeFrom(principal, host string, op kmsg.ACLOperation, res Resource) bool
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(principal string, op kmsg.ACLOperation, res Resource) bool

// Authorize calls f.
func (f AuthorizerFunc) Authorize(principal string, op kmsg.ACLOperation, res Resource) bool {
	return f(principal, op, res)
}

// AllowAll authorizes everything: authentication without authorization.
var AllowAll Authorizer = AuthorizerFunc(func(string, kmsg.ACLOperation, Resource) bool { return true })

// Resource is what an operation acts on, in Kafka's ACL vocabulary.
type Resource struct {
	Type kmsg.ACLResourceType
	Name string
}

// ClusterResource is the one cluster resource (Kafka names it
// "kafka-cluster").
var ClusterResource = Resource{Type: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster"}

// TopicResource is the topic named name.
func TopicResource(name string) Resource {
	return Resource{Type: kmsg.ACLResourceTypeTopic, Name: name}
}

// GroupResource is the group named id.
func GroupResource(id string) Resource {
	return Resource{Type: kmsg.ACLResourceTypeGroup, Name: id}
}

// Authorize reports whether req's principal may perform op on res; always
// true when the listener has no security.
func Authorize(req *Request, op kmsg.ACLOperation, res Resource) bool {
	if req.sec == nil {
		return true
	}
	if ha, ok := req.sec.cfg.Authorizer.(HostAuthorizer); ok {
		return ha.AuthorizeFrom(req.Principal, RemoteHost(req), op, res)
	}
	return req.sec.cfg.Authorizer.Authorize(req.Principal, op, res)
}

// RemoteHost is the IP address of req's client ("" in-process).
func RemoteHost(req *Request) string {
	if req.Remote == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(req.Remote.String()); err == nil {
		return host
	}
	return req.Remote.String()
}

// ClusterAction reports whether req comes from a principal allowed to make
// broker-only calls (CLUSTER_ACTION on the cluster): the cluster principal.
func ClusterAction(req *Request) bool {
	return Authorize(req, kmsg.ACLOperationClusterAction, ClusterResource)
}

// TransactionalIDAllowed reports whether req's principal may perform op
// (kmsg.ACLOperationWrite or kmsg.ACLOperationDescribe) on the
// transactional id txnID.
func TransactionalIDAllowed(req *Request, op kmsg.ACLOperation, txnID string) bool {
	return Authorize(req, op, Resource{Type: kmsg.ACLResourceTypeTransactionalId, Name: txnID})
}

const errClusterAuthorizationFailed = 31
