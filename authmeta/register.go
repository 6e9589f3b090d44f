package authmeta

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// apis are the security metadata's APIs, each declared in its handler file.
var apis = wire.APIs[*State]{describeACLsAPI, createACLsAPI, deleteACLsAPI, describeClientQuotasAPI, alterClientQuotasAPI,
	describeSCRAMAPI, alterSCRAMAPI, updateFeaturesAPI}

// Register adds the handlers: on every node of the process that opened
// the State.
func (s *State) Register(reg *wire.Registry) { apis.Register(reg, s) }

// Declared is the list of APIs.
func Declared() wire.APIs[*State] { return apis }

// clusterAllowed is the check every API here makes: op on the cluster.
func clusterAllowed(r *wire.Request, op kmsg.ACLOperation) bool {
	return wire.Authorize(r, op, wire.ClusterResource)
}

// noAuthorizer is Kafka's message for the ACL APIs of a broker with no
// authorizer configured (txncoord without a security section).
const noAuthorizer = "No Authorizer is configured"

// aclChangeRefused is the error of one ACL creation or deletion filter
// that is not carried out, in Kafka's order of checks: no authorizer, then
// no ALTER on the cluster (allowed), then the element's own validation
// message (invalid, "" when valid); code 0 for one that is.
func (s *State) aclChangeRefused(allowed bool, invalid string) (code int16, msg *string) {
	switch {
	case !s.Authorizing():
		return kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer + ".")
	case !allowed:
		return kerr.ClusterAuthorizationFailed.Code, nil
	case invalid != "":
		return kerr.InvalidRequest.Code, kmsg.StringPtr(invalid)
	}
	return 0, nil
}

// codeOf is the Kafka error of a failed change.
func codeOf(err error) (int16, *string) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, kmsg.StringPtr(err.Error())
	}
	return kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
}
