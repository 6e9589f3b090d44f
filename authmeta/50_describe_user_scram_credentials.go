package authmeta

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DescribeUserScramCredentials (key 50), v0.
//
// Behavior (Kafka's ScramControlManager.describeScramCredentials):
//   - needs DESCRIBE on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
//   - no users (null or empty): every user with stored credentials,
//     sorted; a named user twice: DUPLICATE_RESOURCE; a user without
//     stored credentials: RESOURCE_NOT_FOUND;
//   - each user's mechanisms and iterations, never salts or keys. Users of
//     the credentials file are not listed (they are not metadata).
var describeSCRAMAPI = wire.API[*State]{Key: 50, Min: 0, Max: 0, Handle: (*State).handleDescribeSCRAM}

func (s *State) handleDescribeSCRAM(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !clusterAllowed(r, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return wire.Now(resp)
	}
	creds := *s.scram.Load()
	var users []string
	if len(req.Users) == 0 {
		seen := map[string]bool{}
		for k := range creds {
			if !seen[k.User] {
				seen[k.User] = true
				users = append(users, k.User)
			}
		}
		slices.Sort(users)
	} else {
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	count := map[string]int{}
	for _, u := range users {
		count[u]++
	}
	done := map[string]bool{}
	for _, u := range users {
		if done[u] {
			continue
		}
		done[u] = true
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch {
		case count[u] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		default:
			for _, m := range []byte{mechSHA256, mechSHA512} {
				if c, ok := creds[scramKey{Mechanism: m, User: u}]; ok {
					ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					ci.Mechanism, ci.Iterations = int8(m), int32(c.Iterations)
					res.CredentialInfos = append(res.CredentialInfos, ci)
				}
			}
			if len(res.CredentialInfos) == 0 {
				res.ErrorCode = kerr.ResourceNotFound.Code
				res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return wire.Now(resp)
}
