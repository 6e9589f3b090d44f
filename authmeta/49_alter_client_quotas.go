package authmeta

import (
	"context"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// AlterClientQuotas (key 49), v0–v1.
//
// Behavior (Kafka's ClientQuotaControlManager.alterClientQuotas): one
// result per entry, in request order:
//   - needs ALTER_CONFIGS on the cluster: else CLUSTER_AUTHORIZATION_FAILED;
//   - an empty entity, an entity type other than user, client-id and ip, a
//     type twice, ip with another type, an ip name that is no IP address,
//     an unknown key for the entity (user/client-id: producer_byte_rate,
//     consumer_byte_rate, request_percentage, controller_mutation_rate;
//     ip: connection_creation_rate), a fractional value of a whole-number
//     key or a value not above 0: INVALID_REQUEST, and that entry changes
//     nothing;
//   - the others set or remove their keys (an entity left without values
//     is removed), durable before the answer; ValidateOnly changes
//     nothing. Quotas are stored and described, not enforced.
//
// Version notes: v1 is flexible.
var alterClientQuotasAPI = wire.API[*State]{Key: 49, Min: 0, Max: 1, Handle: (*State).handleAlterClientQuotas}

func (s *State) handleAlterClientQuotas(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := clusterAllowed(r, kmsg.ACLOperationAlterConfigs)
	var changes []quotaEntry
	var at []int
	pending := map[string]quotaEntry{} // entries of this request, by entity
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		var entity []QuotaComponent
		for _, c := range e.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = c.Type, c.Name
			re.Entity = append(re.Entity, ee)
			entity = append(entity, QuotaComponent{Type: c.Type, Name: c.Name})
		}
		msg := ""
		if !allowed {
			re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		} else if msg = validQuotaEntity(entity); msg == "" {
			for _, op := range e.Ops {
				if msg = validQuotaValue(entity, op.Key, op.Value, op.Remove); msg != "" {
					break
				}
			}
		}
		if msg != "" {
			re.ErrorCode, re.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		}
		if re.ErrorCode == 0 && !req.ValidateOnly {
			key := quotaEntityKey(entity)
			cur, ok := pending[key]
			if !ok {
				cur = quotaEntry{Entity: entity, Values: maps.Clone((*s.quotas.Load())[key].Values)}
			}
			if cur.Values == nil {
				cur.Values = map[string]float64{}
			}
			for _, op := range e.Ops {
				if op.Remove {
					delete(cur.Values, op.Key)
				} else {
					cur.Values[op.Key] = op.Value
				}
			}
			pending[key] = cur
			changes = append(changes, quotaEntry{Entity: cur.Entity, Values: maps.Clone(cur.Values)})
			at = append(at, len(resp.Entries))
		}
		resp.Entries = append(resp.Entries, re)
	}
	if len(changes) == 0 {
		return wire.Now(resp)
	}
	return func() (kmsg.Response, error) {
		if err := s.setQuotas(changes); err != nil {
			code, msg := codeOf(err)
			for _, i := range at {
				resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code, msg
			}
		}
		return resp, nil
	}
}
