package authmeta

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DeleteAcls (key 31), v0–v3.
//
// Behavior (Kafka's AclControlManager.deleteAcls):
//   - without security (no authorizer) every filter gets SECURITY_DISABLED,
//     "No Authorizer is configured.", as Kafka's AclApis answers;
//   - needs ALTER on the cluster: else every filter gets
//     CLUSTER_AUTHORIZATION_FAILED;
//   - a filter with UNKNOWN elements is INVALID_REQUEST; every other one
//     deletes the bindings it matches (MATCH: those that apply to the named
//     resource) and lists them; a filter that matches nothing succeeds
//     with an empty list;
//   - the answer comes once the deletions are durable.
//
// Version notes: v0 has no pattern type (LITERAL); v2 is flexible.
var deleteACLsAPI = wire.API[*State]{Key: 31, Min: 0, Max: 3, Handle: (*State).handleDeleteACLs}

func (s *State) handleDeleteACLs(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	allowed := clusterAllowed(r, kmsg.ACLOperationAlter)
	var filters []Filter
	var at []int
	for _, rf := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		f := Filter{ResourceType: rf.ResourceType, Name: rf.ResourceName, Pattern: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if r.Version == 0 {
			f.Pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		if res.ErrorCode, res.ErrorMessage = s.aclChangeRefused(allowed, validFilter(f)); res.ErrorCode == 0 {
			filters = append(filters, f)
			at = append(at, len(resp.Results))
		}
		resp.Results = append(resp.Results, res)
	}
	if len(filters) == 0 {
		return wire.Now(resp)
	}
	return func() (kmsg.Response, error) {
		deleted, err := s.DeleteACLs(filters)
		for n, i := range at {
			if err != nil {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = codeOf(err)
				continue
			}
			for _, b := range deleted[n] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.Name, b.Pattern
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			}
		}
		return resp, nil
	}
}
