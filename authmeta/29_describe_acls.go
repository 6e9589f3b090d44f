package authmeta

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DescribeAcls (key 29), v0–v3.
//
// Behavior (Kafka's AclApis.handleDescribeAcls):
//   - without security (no authorizer): SECURITY_DISABLED, "No Authorizer
//     is configured on the broker";
//   - needs DESCRIBE on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
//   - a filter with an UNKNOWN resource type, pattern type, operation or
//     permission is INVALID_REQUEST;
//   - the bindings the filter matches (MATCH: those that apply to the named
//     resource), grouped by resource pattern in the order they were created.
//
// Version notes: v0 has no pattern type (LITERAL); v2 is flexible.
var describeACLsAPI = wire.API[*State]{Key: 29, Min: 0, Max: 3, Handle: (*State).handleDescribeACLs}

func (s *State) handleDescribeACLs(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !s.Authorizing() {
		// Kafka's AclApis words this one differently from Create/Delete.
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer+" on the broker")
		return wire.Now(resp)
	}
	if !clusterAllowed(r, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return wire.Now(resp)
	}
	f := Filter{ResourceType: req.ResourceType, Name: req.ResourceName, Pattern: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if r.Version == 0 {
		f.Pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	if msg := validFilter(f); msg != "" {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		return wire.Now(resp)
	}
	type pattern struct {
		typ     kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	at := map[pattern]int{}
	for _, b := range s.ACLs() {
		if !f.Matches(b) {
			continue
		}
		p := pattern{b.ResourceType, b.Name, b.Pattern}
		i, ok := at[p]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.ResourceType, b.Name, b.Pattern
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			at[p] = i
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return wire.Now(resp)
}
