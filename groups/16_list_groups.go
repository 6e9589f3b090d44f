package groups

// ListGroups (key 16), v0–v5.
//
// Behavior: every group with its protocol type; v4+ its state, filtered
// by StatesFilter (case-insensitive, as Kafka; a consumer group's states
// are Empty, Assigning, Reconciling, Stable; a share group's Empty,
// Stable); v5+ its type ("classic", "consumer" or "share"), filtered by
// TypesFilter (case-insensitive). A share group's protocol type is
// "share".

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// listGroupsAPI is ListGroups v0–v5.
var listGroupsAPI = wire.API[*Coordinator]{Key: 16, Min: 0, Max: 5, Handle: (*Coordinator).handleListGroups}

func (c *Coordinator) handleListGroups(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	in := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	// Kafka lists every group to a principal that may DESCRIBE the
	// cluster, else the groups it may DESCRIBE.
	all := wire.Authorize(r, kmsg.ACLOperationDescribe, wire.ClusterResource)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.core.GroupIDs() {
		g := c.core.groups[id]
		if !all && !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.GroupResource(id)) {
			continue
		}
		if (req.Version >= 4 && !in(req.StatesFilter, g.stateName())) || (req.Version >= 5 && !in(req.TypesFilter, string(g.Type))) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.ID, g.ProtocolType, g.stateName(), string(g.Type)
		resp.Groups = append(resp.Groups, rg)
	}
	for _, id := range c.core.ShareGroupIDs() {
		g := c.core.shareGroups[id]
		if (req.Version >= 4 && !in(req.StatesFilter, g.stateName())) || (req.Version >= 5 && !in(req.TypesFilter, "share")) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = id, "share", g.stateName(), "share"
		resp.Groups = append(resp.Groups, rg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return wire.Now(resp)
}
