package groups

// DeleteGroups (key 42), v0–v3.
//
// Behavior: per group: GROUP_ID_NOT_FOUND if there is none,
// NON_EMPTY_GROUP while it has members, else the group and its committed
// offsets are deleted (answered once durable). Pending transactional
// offsets stay until their marker. A share group is deleted the same way
// (NON_EMPTY_GROUP while it has members), with its share state at the
// leaders.
//
// Version notes: v3 (Kafka 4.4) adds a per-group error message: the
// error's description.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// deleteGroupsAPI is DeleteGroups v0–v3.
var deleteGroupsAPI = wire.API[*Coordinator]{Key: 42, Min: 0, Max: 3, Handle: (*Coordinator).handleDeleteGroups}

func (c *Coordinator) handleDeleteGroups(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	codes := make([]int16, len(req.Groups))
	var shareDeleted []string
	pos, err := c.step(func(now time.Time) {
		for i, g := range req.Groups {
			if !wire.Authorize(r, kmsg.ACLOperationDelete, wire.GroupResource(g)) {
				codes[i] = kerr.GroupAuthorizationFailed.Code
				continue
			}
			if _, ok := c.core.ShareGroupMembers(g); ok {
				if codes[i] = c.core.DeleteShareGroup(g); codes[i] == 0 {
					shareDeleted = append(shareDeleted, g)
				}
				continue
			}
			codes[i] = c.core.DeleteGroup(now, g)
		}
	})
	return func() (kmsg.Response, error) {
		if err == nil {
			err = c.durable(ctx, r, pos)
		}
		// A deleted share group's state at the leaders goes with it.
		for _, g := range shareDeleted {
			if c.cfg.Shares == nil {
				break
			}
			if derr := c.cfg.Shares.Delete(ctx, g, ""); derr != nil && err == nil {
				err = derr
			}
		}
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for i, g := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, codes[i]
			if rg.ErrorCode == 0 && err != nil {
				rg.ErrorCode = storeErrCode(err)
			}
			if e, ok := kerr.ErrorForCode(rg.ErrorCode).(*kerr.Error); ok && req.Version >= 3 {
				rg.ErrorMessage = &e.Description
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
}
