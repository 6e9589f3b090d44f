package topics

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// ListPartitionReassignments (key 46), v0, served by the controller.
//
// Behavior (Kafka's ReplicationControlManager.listPartitionReassignments):
// needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED); lists
// the partitions being reassigned, and txncoord never reassigns one, so
// the answer is always empty (unknown partitions are left out, as Kafka
// does).
var listPartitionReassignmentsAPI = wire.API[*Controller]{Key: 46, Min: 0, Max: 0, Handle: (*Controller).handleListPartitionReassignments}

func (c *Controller) handleListPartitionReassignments(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.ClusterResource) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authorization failed.")
	}
	return wire.Now(resp)
}
