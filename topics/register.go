package topics

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// apis are the controller's APIs, each declared in its handler file:
// Register, RegisterForward and RegisterNotController read this list.
var apis = wire.APIs[*Controller]{createTopicsAPI, deleteTopicsAPI, createPartitionsAPI, alterConfigsAPI, incrementalAlterConfigsAPI,
	electLeadersAPI, alterPartitionAssignmentsAPI, listPartitionReassignmentsAPI}

// Register adds the controller's handlers.
func (c *Controller) Register(reg *wire.Registry) {
	apis.Register(reg, c)
	// DescribeConfigs is served by every node, as in Kafka: the other
	// nodes register it in node's listen.
	RegisterDescribeConfigs(reg, c.view, c.view.Coordinator())
}

// RegisterNotController answers the controller's keys NOT_CONTROLLER on a
// node that is not the controller and does not forward them
// (RegisterForward), for each key reg has no handler for: Metadata's ControllerID names the coordinator, and clients
// send these requests there (kadm, sarama and KafkaJS refresh metadata on
// NOT_CONTROLLER and retry).
func RegisterNotController(reg *wire.Registry) {
	for _, a := range apis {
		if _, _, ok := reg.Range(a.Key); ok {
			continue
		}
		reg.RegisterStandIn(a.Key, a.Min, a.Max, func(_ context.Context, req *wire.Request) wire.Reply {
			return wire.Now(notController(req.Body))
		})
	}
}

// notController answers every topic of a controller request NOT_CONTROLLER.
func notController(body kmsg.Request) kmsg.Response {
	code, msg := kerr.NotController.Code, kmsg.StringPtr("This is not the controller: send it to Metadata's ControllerID, the coordinator node.")
	switch req := body.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = name, id, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		for _, n := range req.TopicNames {
			add(kmsg.StringPtr(n), [16]byte{})
		}
		for _, t := range req.Topics {
			add(t.Topic, t.TopicID)
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range req.Resources {
			out := kmsg.NewAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode, out.ErrorMessage = rr.ResourceType, rr.ResourceName, code, msg
			resp.Resources = append(resp.Resources, out)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			out := kmsg.NewIncrementalAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode, out.ErrorMessage = rr.ResourceType, rr.ResourceName, code, msg
			resp.Resources = append(resp.Resources, out)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	// The others (ElectLeaders, the reassignment APIs) carry the code in
	// their top-level or per-partition error fields.
	return wire.UnservedResponse(body, code)
}

// Declared is the controller's list of APIs.
func Declared() wire.APIs[*Controller] { return apis }
