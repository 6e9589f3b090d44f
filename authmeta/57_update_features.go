package authmeta

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// UpdateFeatures (key 57), v0–v2, served by the controller.
//
// Behavior (Kafka's FeatureControlManager.updateFeatures): the update is
// atomic, all or nothing:
//   - needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
//   - a feature named twice: INVALID_REQUEST;
//   - a feature the cluster does not support (txncoord: transaction.version,
//     0 up to what every node supports, 2 on Kafka 4.0+ nodes), or a level
//     outside its range: INVALID_UPDATE_VERSION; a level below the
//     finalized one without a downgrade (v0 AllowDowngrade, v1+
//     SAFE_DOWNGRADE or UNSAFE_DOWNGRADE): INVALID_UPDATE_VERSION;
//   - the levels are durable before the answer; ApiVersions on every node
//     of the process then finalizes them with a higher epoch, and the
//     transaction coordinator uses the finalized transaction.version (a
//     downgrade is allowed while transactions are open, as in Kafka: each
//     keeps the version it began with). ValidateOnly changes nothing.
//
// Version notes: v1 adds UpgradeType and ValidateOnly; v2 answers only the
// top-level error (no per-feature results).
var updateFeaturesAPI = wire.API[*State]{Key: 57, Min: 0, Max: 2, Handle: (*State).handleUpdateFeatures}

func (s *State) handleUpdateFeatures(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	answer := func(code int16, msg string) wire.Reply {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		if r.Version < 2 {
			for _, u := range req.FeatureUpdates {
				res := kmsg.NewUpdateFeaturesResponseResult()
				res.Feature, res.ErrorCode = u.Feature, code
				if msg != "" {
					res.ErrorMessage = kmsg.StringPtr(msg)
				}
				resp.Results = append(resp.Results, res)
			}
		}
		return wire.Now(resp)
	}
	if !clusterAllowed(r, kmsg.ACLOperationAlter) {
		return answer(kerr.ClusterAuthorizationFailed.Code, "")
	}
	supported := s.supportedFeatures()
	levels := map[string]int16{}
	for _, u := range req.FeatureUpdates {
		if _, dup := levels[u.Feature]; dup {
			return answer(kerr.InvalidRequest.Code, "Feature "+u.Feature+" was specified more than once.")
		}
		levels[u.Feature] = u.MaxVersionLevel
		rng, ok := supported[u.Feature]
		if !ok {
			return answer(kerr.InvalidUpdateVersion.Code, fmt.Sprintf("Invalid update version %d for feature %s. The controller does not support the given feature.", u.MaxVersionLevel, u.Feature))
		}
		if u.MaxVersionLevel < rng[0] || u.MaxVersionLevel > rng[1] {
			return answer(kerr.InvalidUpdateVersion.Code, fmt.Sprintf("Invalid update version %d for feature %s. The cluster only supports versions %d-%d.", u.MaxVersionLevel, u.Feature, rng[0], rng[1]))
		}
		current, set := s.FinalizedFeature(u.Feature)
		if !set {
			current = rng[1]
		}
		downgrade := u.AllowDowngrade
		if r.Version >= 1 {
			downgrade = u.UpgradeType == 2 || u.UpgradeType == 3
			if u.UpgradeType < 1 || u.UpgradeType > 3 {
				return answer(kerr.InvalidUpdateVersion.Code, fmt.Sprintf("Invalid upgrade type %d for feature %s.", u.UpgradeType, u.Feature))
			}
		}
		if u.MaxVersionLevel < current && !downgrade {
			return answer(kerr.InvalidUpdateVersion.Code, fmt.Sprintf("Invalid update version %d for feature %s. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.", u.MaxVersionLevel, u.Feature))
		}
	}
	if req.ValidateOnly || len(levels) == 0 {
		return answer(0, "")
	}
	return func() (kmsg.Response, error) {
		if err := s.setFeatures(levels); err != nil {
			code, msg := codeOf(err)
			return answer(code, *msg)()
		}
		return answer(0, "")()
	}
}
