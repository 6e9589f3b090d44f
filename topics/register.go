package topics

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// APIs are the keys the controller serves, with their version ranges.
var APIs = map[int16][2]int16{
	19: {createTopicsMinVersion, createTopicsMaxVersion},
	20: {deleteTopicsMinVersion, deleteTopicsMaxVersion},
	37: {createPartitionsMinVersion, createPartitionsMaxVersion},
	33: {alterConfigsMinVersion, alterConfigsMaxVersion},
	44: {incrementalAlterConfigsMinVersion, incrementalAlterConfigsMaxVersion},
}

// Register adds the controller's handlers.
func (c *Controller) Register(reg *wire.Registry) {
	reg.Register(19, createTopicsMinVersion, createTopicsMaxVersion, c.handleCreateTopics)
	reg.Register(20, deleteTopicsMinVersion, deleteTopicsMaxVersion, c.handleDeleteTopics)
	reg.Register(37, createPartitionsMinVersion, createPartitionsMaxVersion, c.handleCreatePartitions)
	reg.Register(33, alterConfigsMinVersion, alterConfigsMaxVersion, c.handleAlterConfigs)
	reg.Register(44, incrementalAlterConfigsMinVersion, incrementalAlterConfigsMaxVersion, c.handleIncrementalAlterConfigs)
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
	for key, r := range APIs {
		if _, _, ok := reg.Range(key); ok {
			continue
		}
		reg.Register(key, r[0], r[1], func(_ context.Context, req *wire.Request) wire.Reply {
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
	return nil
}
