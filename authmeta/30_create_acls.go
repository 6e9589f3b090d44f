package authmeta

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// CreateAcls (key 30), v0–v3.
//
// Behavior (Kafka's AclControlManager):
//   - without security (no authorizer) every creation gets
//     SECURITY_DISABLED, "No Authorizer is configured.", as Kafka's
//     AclApis answers;
//   - needs ALTER on the cluster: else every creation gets
//     CLUSTER_AUTHORIZATION_FAILED;
//   - a creation with an ANY or UNKNOWN resource type, pattern type
//     (MATCH too), operation or permission, an empty resource name or host,
//     a principal that is not TYPE:NAME, or a cluster resource other than
//     the literal kafka-cluster is INVALID_REQUEST; the others are stored;
//   - the answer comes once the bindings are durable; an ACL stored
//     already succeeds without a second copy.
//
// Version notes: v0 has no pattern type (LITERAL); v2 is flexible.
var createACLsAPI = wire.API[*State]{Key: 30, Min: 0, Max: 3, Handle: (*State).handleCreateACLs}

func (s *State) handleCreateACLs(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	allowed := clusterAllowed(r, kmsg.ACLOperationAlter)
	var valid []Binding
	var validAt []int
	for _, c := range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		b := Binding{ResourceType: c.ResourceType, Name: c.ResourceName, Pattern: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if r.Version == 0 {
			b.Pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		if res.ErrorCode, res.ErrorMessage = s.aclChangeRefused(allowed, validBinding(b)); res.ErrorCode == 0 {
			valid = append(valid, b)
			validAt = append(validAt, len(resp.Results))
		}
		resp.Results = append(resp.Results, res)
	}
	if len(valid) == 0 {
		return wire.Now(resp)
	}
	return func() (kmsg.Response, error) {
		if err := s.CreateACLs(valid); err != nil {
			code, msg := codeOf(err)
			for _, i := range validAt {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
			}
		}
		return resp, nil
	}
}
