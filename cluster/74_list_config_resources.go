package cluster

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// ListConfigResources (key 74), v0–v1, served by every node (KIP-1000 as
// ListClientMetricsResources, KIP-1142).
//
// Behavior (Kafka's KafkaApis.handleListConfigResources):
//   - needs DESCRIBE_CONFIGS on the cluster: else
//     CLUSTER_AUTHORIZATION_FAILED;
//   - v0 lists CLIENT_METRICS resources only; v1 the types asked for
//     (none: every type) among TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS
//     and GROUP; another type is UNSUPPORTED_VERSION;
//   - TOPIC: every topic; BROKER and BROKER_LOGGER: every live broker's
//     id; GROUP: the groups with configs of their own (set with
//     IncrementalAlterConfigs: a leader in a process of its own learns
//     them so); CLIENT_METRICS: none (txncoord keeps no client metrics
//     subscriptions).
var listConfigResourcesRange = [2]int16{0, 1}

// RegisterListConfigResources registers ListConfigResources.
func (v *View) RegisterListConfigResources(reg *wire.Registry) {
	reg.Register(74, listConfigResourcesRange[0], listConfigResourcesRange[1], func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(v.listConfigResources(r, r.Body.(*kmsg.ListConfigResourcesRequest)))
	})
}

func (v *View) listConfigResources(r *wire.Request, req *kmsg.ListConfigResourcesRequest) *kmsg.ListConfigResourcesResponse {
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !wire.Authorize(r, kmsg.ACLOperationDescribeConfigs, wire.ClusterResource) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	supported := []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	if req.Version >= 1 {
		supported = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker,
			kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig}
	}
	wanted := supported
	if req.Version >= 1 && len(req.ResourceTypes) > 0 {
		wanted = nil
		for _, t := range req.ResourceTypes {
			typ := kmsg.ConfigResourceType(t)
			if !slices.Contains(supported, typ) {
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				return resp
			}
			wanted = append(wanted, typ)
		}
	}
	add := func(name string, typ kmsg.ConfigResourceType) {
		cr := kmsg.NewListConfigResourcesResponseConfigResource()
		cr.Name, cr.Type = name, int8(typ)
		resp.ConfigResources = append(resp.ConfigResources, cr)
	}
	for _, typ := range wanted {
		switch typ {
		case kmsg.ConfigResourceTypeTopic:
			for _, t := range v.Topics() {
				add(t.Name, typ)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			for _, n := range v.LiveBrokers() {
				add(strconv.Itoa(int(n.NodeID)), typ)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			for _, g := range v.GroupsWithConfigs() {
				add(g, typ)
			}
		}
	}
	return resp
}
