package groups

// DeleteGroups (key 42), v0–v2.
//
// Behavior: per group: GROUP_ID_NOT_FOUND if there is none,
// NON_EMPTY_GROUP while it has members, else the group and its committed
// offsets are deleted (answered once durable). Pending transactional
// offsets stay until their marker.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// deleteGroupsAPI is DeleteGroups v0–v2.
var deleteGroupsAPI = wire.API[*Coordinator]{Key: 42, Min: 0, Max: 2, Handle: (*Coordinator).handleDeleteGroups}

func (c *Coordinator) handleDeleteGroups(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	codes := make([]int16, len(req.Groups))
	pos, err := c.step(func(now time.Time) {
		for i, g := range req.Groups {
			if !wire.Authorize(r, kmsg.ACLOperationDelete, wire.GroupResource(g)) {
				codes[i] = kerr.GroupAuthorizationFailed.Code
				continue
			}
			codes[i] = c.core.DeleteGroup(now, g)
		}
	})
	return func() (kmsg.Response, error) {
		if err == nil {
			err = c.durable(ctx, r, pos)
		}
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for i, g := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, codes[i]
			if rg.ErrorCode == 0 && err != nil {
				rg.ErrorCode = storeErrCode(err)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
}
