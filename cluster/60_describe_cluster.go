package cluster

// DescribeCluster (key 60), v0–v2, served by every node (KIP-700).
//
// Behavior, as a Kafka broker answers it (AuthHelper
// .computeDescribeClusterResponse):
//   - the cluster id and every node (the coordinator and the leaders, as
//     Metadata lists them; none is ever fenced, so v2's
//     IncludeFencedBrokers changes nothing and IsFenced is false);
//   - ControllerID is the node running the topic controller: the
//     coordinator node, or the holder of the controller's etcd lease
//     (View.Controller; a Kafka broker names a random live broker:
//     KRaft's controllers are not brokers);
//   - EndpointType (v1+): every node is a broker endpoint (1). A request
//     for the controller endpoint (2) is MISMATCHED_ENDPOINT_TYPE, any
//     other type UNSUPPORTED_ENDPOINT_TYPE; the answer carries
//     EndpointType 1;
//   - IncludeClusterAuthorizedOperations: the cluster operations the
//     principal may perform, as a bit field (Kafka's cluster operations:
//     CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
//     ALTER_CONFIGS, IDEMPOTENT_WRITE); otherwise Kafka's default,
//     math.MinInt32. A principal that may not DESCRIBE the cluster gets
//     CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes: v1 EndpointType (request and response); v2
// IncludeFencedBrokers, IsFenced. Every version is flexible.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

const (
	describeClusterMinVersion = 0
	describeClusterMaxVersion = 2
)

// endpointTypeBroker is KIP-919's EndpointType BROKER; 2 is CONTROLLER.
const (
	endpointTypeBroker     int8 = 1
	endpointTypeController int8 = 2
)

// clusterOperations are the operations Kafka defines on the cluster
// resource (AclEntry.supportedOperations(CLUSTER), before the token ones).
var clusterOperations = []kmsg.ACLOperation{
	kmsg.ACLOperationCreate, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationClusterAction,
	kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
}

// RegisterDescribeCluster adds DescribeCluster.
func (v *View) RegisterDescribeCluster(reg *wire.Registry) {
	reg.Register(60, describeClusterMinVersion, describeClusterMaxVersion, func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(v.describeCluster(r, r.Body.(*kmsg.DescribeClusterRequest)))
	})
}

func (v *View) describeCluster(r *wire.Request, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	refuse := func(err *kerr.Error, msg string) *kmsg.DescribeClusterResponse {
		if req.Version == 0 {
			err = kerr.InvalidRequest
		}
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(msg)
		return resp
	}
	switch {
	case req.Version < 1 || req.EndpointType == endpointTypeBroker: // v0 has no endpoint type
	case req.EndpointType == endpointTypeController:
		return refuse(kerr.MismatchedEndpointType, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
	default:
		return refuse(kerr.UnsupportedEndpointType, fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType))
	}
	if !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.ClusterResource) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if req.IncludeClusterAuthorizedOperations {
		var ops int32
		for _, op := range clusterOperations {
			if wire.Authorize(r, op, wire.ClusterResource) {
				ops |= 1 << op
			}
		}
		resp.ClusterAuthorizedOperations = ops
	}
	resp.EndpointType = endpointTypeBroker
	resp.ClusterID = v.file.ClusterID
	resp.ControllerID = v.Controller().NodeID
	for _, n := range v.LiveBrokers() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID = n.NodeID
		b.Host, b.Port = hostPort(n.Addr)
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}
