package authmeta

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Kafka's bounds on SCRAM iterations (ScramMechanism's minIterations and
// ScramControlManager's maximum).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// AlterUserScramCredentials (key 51), v0, served by the controller.
//
// Behavior (Kafka's ScramControlManager.alterCredentials): one result per
// user, in the order users first appear (deletions, then upsertions):
//   - needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
//   - an empty user name: UNACCEPTABLE_CREDENTIAL; a mechanism other than
//     SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2): UNSUPPORTED_SASL_MECHANISM;
//     iterations outside 4096..16384, or an empty salt or salted
//     password: UNACCEPTABLE_CREDENTIAL; one user and mechanism altered
//     twice: DUPLICATE_RESOURCE; deleting a credential that does not
//     exist: RESOURCE_NOT_FOUND;
//   - a user with any error changes nothing; the others' changes are
//     durable before the answer, and SASL SCRAM logins use them at once
//     on every node of the process.
var alterSCRAMAPI = wire.API[*State]{Key: 51, Min: 0, Max: 0, Handle: (*State).handleAlterSCRAM}

func (s *State) handleAlterSCRAM(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	allowed := clusterAllowed(r, kmsg.ACLOperationAlter)

	type userErr struct {
		code int16
		msg  string
	}
	var order []string
	errs := map[string]*userErr{}
	changes := map[string][]scramChange{}
	touched := map[scramKey]bool{}
	see := func(u string) {
		if _, ok := errs[u]; !ok {
			errs[u] = nil
			order = append(order, u)
		}
	}
	fail := func(u string, e *kerr.Error, msg string) {
		if errs[u] == nil {
			errs[u] = &userErr{e.Code, msg}
		}
	}
	check := func(u string, mech int8) (scramKey, bool) {
		see(u)
		k := scramKey{Mechanism: byte(mech), User: u}
		switch {
		case !allowed:
			fail(u, kerr.ClusterAuthorizationFailed, "")
		case u == "":
			fail(u, kerr.UnacceptableCredential, "Username must not be empty")
		case byte(mech) != mechSHA256 && byte(mech) != mechSHA512:
			fail(u, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case touched[k]:
			fail(u, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		default:
			touched[k] = true
			return k, true
		}
		return k, false
	}
	for _, d := range req.Deletions {
		k, ok := check(d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if _, exists := s.scramOf(k.Mechanism, k.User); !exists {
			fail(d.Name, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		changes[d.Name] = append(changes[d.Name], scramChange{Key: k})
	}
	for _, u := range req.Upsertions {
		k, ok := check(u.Name, u.Mechanism)
		if !ok {
			continue
		}
		switch {
		case u.Iterations < MinIterations:
			fail(u.Name, kerr.UnacceptableCredential, "Too few iterations")
		case u.Iterations > MaxIterations:
			fail(u.Name, kerr.UnacceptableCredential, "Too many iterations")
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			fail(u.Name, kerr.UnacceptableCredential, "The salt and the salted password must not be empty")
		default:
			cred := storedFrom(k.Mechanism, u.SaltedPassword, u.Salt, u.Iterations)
			changes[u.Name] = append(changes[u.Name], scramChange{Key: k, Cred: &cred})
		}
	}
	var apply []scramChange
	for _, u := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		if e := errs[u]; e != nil {
			res.ErrorCode = e.code
			if e.msg != "" {
				res.ErrorMessage = kmsg.StringPtr(e.msg)
			}
		} else {
			apply = append(apply, changes[u]...)
		}
		resp.Results = append(resp.Results, res)
	}
	if len(apply) == 0 {
		return wire.Now(resp)
	}
	return func() (kmsg.Response, error) {
		if err := s.alterSCRAM(apply); err != nil {
			code, msg := codeOf(err)
			for i := range resp.Results {
				if resp.Results[i].ErrorCode == 0 {
					resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
				}
			}
		}
		return resp, nil
	}
}
