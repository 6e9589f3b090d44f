package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ApiVersions (key 18), v0 up to min(kmsg's max, the profile's max): built
// into the server, never registered.
//
// Behavior:
//   - ApiKeys are the registered ranges with their maximum capped by the
//     node's version profile (a key the profile lacks is not advertised);
//   - v3+: SupportedFeatures and FinalizedFeatures from Config.Features,
//     with FinalizedFeaturesEpoch >= 0 whenever a feature is finalized
//     (kmsg drops the tagged field at -1, and kgo then ignores features);
//   - a request above our max gets the KIP-511 answer: a v0 response with
//     UNSUPPORTED_VERSION (35) and only the ApiVersions key, on a
//     connection that stays open for the client's retry;
//   - v5+ (KIP-1242, Kafka 4.4): the client may name the cluster and node
//     it believes it reached, both or neither (one alone is
//     INVALID_REQUEST); naming another cluster or node is
//     REBOOTSTRAP_REQUIRED, so a client whose metadata routed it to the
//     wrong address starts over from its seed brokers; either error
//     answers with no keys, as Kafka's getErrorResponse does.
//
// Version notes: the response header is always v0, even for flexible
// versions (v3+), so a client can read it before it knows our versions.
// Kafka 4.2 and 4.3 serve v0–v4, 4.4 v0–v5 (the profile caps it).

// advertise computes the advertised ranges: the registered range, its
// maximum capped by the profile, plus the built-in ApiVersions and the other
// built-in keys (SaslHandshake and SaslAuthenticate when SASL is on).
func advertise(reg *Registry, profile *kversion.Versions, builtin map[int16][2]int16) (map[int16][2]int16, []kmsg.ApiVersionsResponseApiKey) {
	ranges := make(map[int16][2]int16)
	capMax := func(key, maxVersion int16) (int16, bool) {
		if profile == nil {
			return maxVersion, true
		}
		pmax, ok := profile.LookupMaxKeyVersion(key)
		if !ok {
			return 0, false
		}
		return min(maxVersion, pmax), true
	}
	if avMax, ok := capMax(18, kmsg.NewPtrApiVersionsRequest().MaxVersion()); ok {
		ranges[18] = [2]int16{0, avMax}
	} else {
		ranges[18] = [2]int16{0, 3}
	}
	for key, r := range builtin {
		// Not capped by the profile: every Kafka release since 1.0
		// speaks these, and a client that misses key 17 falls back to
		// raw SASL tokens (kgo does).
		ranges[key] = r
	}
	for _, key := range reg.Keys() {
		rmin, rmax, _ := reg.Range(key)
		if m, ok := capMax(key, rmax); ok && m >= rmin {
			ranges[key] = [2]int16{rmin, m}
		}
	}
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(ranges))
	for key := int16(0); key <= 1000 && len(keys) < len(ranges); key++ {
		if r, ok := ranges[key]; ok {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = key, r[0], r[1]
			keys = append(keys, k)
		}
	}
	return ranges, keys
}

// answerApiVersions answers a decoded ApiVersions request.
func (s *Server) answerApiVersions(req *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	return s.apiVersionsResponse(req.Version, s.identityError(req), req.ClientSoftwareName)
}

// identityError checks the cluster and node a v5+ request names.
func (s *Server) identityError(req *kmsg.ApiVersionsRequest) int16 {
	if req.Version < 5 {
		return 0
	}
	hasCluster, hasNode := req.ClusterID != nil, req.NodeID != -1
	switch {
	case hasCluster != hasNode:
		return kerr.InvalidRequest.Code
	case hasCluster && s.cfg.ClusterID != "" && (*req.ClusterID != s.cfg.ClusterID || req.NodeID != s.cfg.NodeID):
		return kerr.RebootstrapRequired.Code
	}
	return 0
}

// apiVersionsResponse builds the ApiVersions answer at version v for a
// client whose ApiVersions v3+ named its software softwareName.
func (s *Server) apiVersionsResponse(v int16, errorCode int16, softwareName string) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(v)
	resp.ErrorCode = errorCode
	if errorCode != 0 && errorCode != kerr.UnsupportedVersion.Code {
		// Kafka's ApiVersionsRequest.getErrorResponse: no keys.
		return resp
	}
	if errorCode != 0 {
		// KIP-511: the error answer carries only the ApiVersions key, as
		// Kafka's ApiVersionsRequest.getErrorResponse does. Clients
		// depend on it: kgo retries at that key's max only when the list
		// holds exactly key 18; with a full list it keeps the v0 answer,
		// which has no features, and never turns on transaction.version 2.
		k := kmsg.NewApiVersionsResponseApiKey()
		r := s.advertised[18]
		k.ApiKey, k.MinVersion, k.MaxVersion = 18, r[0], r[1]
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
		return resp
	}
	resp.ApiKeys = s.apiKeysAccepted
	if showsRefused(softwareName) {
		resp.ApiKeys = s.apiKeys
	}
	resp.FinalizedFeaturesEpoch = -1
	if v >= 3 && s.cfg.Features != nil {
		f := s.cfg.Features()
		for _, sf := range f.Supported {
			x := kmsg.NewApiVersionsResponseSupportedFeature()
			x.Name, x.MinVersion, x.MaxVersion = sf.Name, sf.Min, sf.Max
			resp.SupportedFeatures = append(resp.SupportedFeatures, x)
		}
		for _, ff := range f.Finalized {
			x := kmsg.NewApiVersionsResponseFinalizedFeature()
			x.Name, x.MinVersionLevel, x.MaxVersionLevel = ff.Name, ff.Level, ff.Level
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, x)
		}
		if len(resp.FinalizedFeatures) > 0 {
			resp.FinalizedFeaturesEpoch = max(f.FinalizedEpoch, 0)
		}
	}
	return resp
}
