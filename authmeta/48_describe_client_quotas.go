package authmeta

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DescribeClientQuotas (key 48), v0–v1.
//
// Behavior (Kafka's ClientQuotaControlManager / ClientQuotasImage.describe):
//   - needs DESCRIBE_CONFIGS on the cluster: else
//     CLUSTER_AUTHORIZATION_FAILED;
//   - each component filters one entity type: EXACT (0) the named entity
//     (a null name is INVALID_REQUEST), DEFAULT (1) the type's default
//     entity, SPECIFIED (2) any named one (a name with either is
//     INVALID_REQUEST); a type twice is INVALID_REQUEST; Strict leaves
//     out entities with types the filter does not name;
//   - the matching entities with their values, in entity order, keys
//     sorted. Quotas are stored and described, not enforced.
//
// Version notes: v1 is flexible.
var describeClientQuotasAPI = wire.API[*State]{Key: 48, Min: 0, Max: 1, Handle: (*State).handleDescribeClientQuotas}

func (s *State) handleDescribeClientQuotas(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) wire.Reply {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return wire.Now(resp)
	}
	if !clusterAllowed(r, kmsg.ACLOperationDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "")
	}
	types := map[string]bool{}
	for _, c := range req.Components {
		if types[c.EntityType] {
			return fail(kerr.InvalidRequest.Code, "Duplicate entity type "+c.EntityType)
		}
		types[c.EntityType] = true
		switch {
		case c.MatchType == 0 && c.Match == nil:
			return fail(kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_EXACT, but set match string to null")
		case (c.MatchType == 1 || c.MatchType == 2) && c.Match != nil:
			return fail(kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_DEFAULT or MATCH_TYPE_SPECIFIED, but also specified a match string")
		case c.MatchType < 0 || c.MatchType > 2:
			return fail(kerr.InvalidRequest.Code, "Unknown match type")
		}
	}
	quotas := *s.quotas.Load()
	for _, k := range slices.Sorted(maps.Keys(quotas)) {
		q := quotas[k]
		if !quotaMatches(q.Entity, req.Components, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range q.Entity {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = c.Type, c.Name
			e.Entity = append(e.Entity, ee)
		}
		for _, key := range slices.Sorted(maps.Keys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = key, q.Values[key]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return wire.Now(resp)
}

func quotaMatches(entity []QuotaComponent, filter []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	byType := map[string]*string{}
	for _, c := range entity {
		byType[c.Type] = c.Name
	}
	for _, f := range filter {
		name, ok := byType[f.EntityType]
		if !ok {
			return false
		}
		switch f.MatchType {
		case 0:
			if name == nil || *name != *f.Match {
				return false
			}
		case 1:
			if name != nil {
				return false
			}
		case 2:
			if name == nil {
				return false
			}
		}
	}
	return !strict || len(filter) == len(entity)
}
