package cluster

import (
	"encoding/base64"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator key type 2 (KIP-932): "groupId:topicId:partition" is
// answered with the partition's leader, where its share state is; a
// malformed key, or key type 2 below v6, is INVALID_REQUEST.
func TestFindCoordinatorShareKeys(t *testing.T) {
	v := NewView(testFile(t, "4.2", "4.2"))
	orders, _ := v.Topic("orders")
	id := base64.RawURLEncoding.EncodeToString(orders.ID[:])
	leader3, _ := v.LeaderOf("orders", 3)
	unknown := base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	for key, want := range map[string]struct {
		code int16
		node int32
	}{
		"g:" + id + ":3":      {0, leader3.NodeID},
		"a:b:" + id + ":3":    {0, leader3.NodeID}, // a group id may hold ':'
		"g:" + unknown + ":0": {0, 0},              // topic unknown: the group coordinator
		"g":                   {kerr.InvalidRequest.Code, -1},
		" :" + id + ":3":      {kerr.InvalidRequest.Code, -1},
		"g:" + id + ":x":      {kerr.InvalidRequest.Code, -1},
		"g:not-an-id:3":       {kerr.InvalidRequest.Code, -1},
	} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(6)
		req.CoordinatorType, req.CoordinatorKeys = 2, []string{key}
		c := v.FindCoordinator(req).Coordinators[0]
		if c.ErrorCode != want.code || c.NodeID != want.node {
			t.Errorf("key %q: error %d node %d, want %d and %d", key, c.ErrorCode, c.NodeID, want.code, want.node)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(5)
	req.CoordinatorType, req.CoordinatorKeys = 2, []string{"g:" + id + ":3"}
	if c := v.FindCoordinator(req).Coordinators[0]; c.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("v5 share key: error %d, want INVALID_REQUEST", c.ErrorCode)
	}
}
