package topics

// IncrementalAlterConfigs (key 44), v0–v1 (see 33_alter_configs.go for
// what topics and brokers accept).
//
// Behavior, as Kafka's controller (ConfigurationControlManager):
//   - SET sets a config, DELETE removes the topic's own value (back to the
//     broker's or Kafka's default), APPEND and SUBTRACT add or remove
//     values of a LIST config (cleanup.policy, the throttled-replica
//     lists), starting from the current value, else the default; APPEND or
//     SUBTRACT on another type (or an unknown name) is INVALID_CONFIG
//     "Can't APPEND to key K because its type is not LIST."; a resource or
//     config named twice, or a null value for anything but DELETE, is
//     INVALID_REQUEST (33_alter_configs.go);
//   - the topic's resulting config is validated as a whole and persisted
//     through the controller; ValidateOnly checks only.
//
// Version notes: v1 flexible.

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/topicconfig"
	"github.com/txncoord/txncoord/wire"
)

var incrementalAlterConfigsAPI = wire.API[*Controller]{Key: 44, Min: 0, Max: 1, Handle: (*Controller).handleIncrementalAlterConfigs}

func (c *Controller) handleIncrementalAlterConfigs(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	var keys []string
	for _, rr := range req.Resources {
		keys = append(keys, resourceKey(rr.ResourceType, rr.ResourceName))
	}
	dup := duplicates(keys)
	for _, rr := range req.Resources {
		var res alterResult
		var names, nulls []string
		for _, cfg := range rr.Configs {
			names = append(names, cfg.Name)
			if cfg.Value == nil && cfg.Op != kmsg.IncrementalAlterConfigOpDelete {
				nulls = append(nulls, cfg.Name)
			}
		}
		switch {
		case dup[resourceKey(rr.ResourceType, rr.ResourceName)]:
			res = invalidRequest(duplicateResource)
		case len(duplicates(names)) > 0:
			res = invalidRequest(duplicateKeys)
		case len(nulls) > 0:
			res = invalidRequest(nullValues(nulls))
		case !configsAllowed(r, rr.ResourceType, rr.ResourceName):
			res = configsDenied(rr.ResourceType)
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			res = c.incrementalTopic(ctx, rr, req.ValidateOnly)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			res = alterBroker(rr.ResourceName, names)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			res = c.incrementalGroup(ctx, rr, req.ValidateOnly)
		default:
			res = invalidRequest("Unsupported resource type " + rr.ResourceType.String())
		}
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName, out.ErrorCode, out.ErrorMessage = rr.ResourceType, rr.ResourceName, res.code, res.msg
		if res.code != 0 {
			r.LogRefused(rr.ResourceName, res.code, refusalText(res.msg))
		}
		resp.Resources = append(resp.Resources, out)
	}
	return wire.Now(resp)
}

func (c *Controller) incrementalTopic(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) alterResult {
	configs, ok := c.Configs(rr.ResourceName)
	if !ok {
		return alterResult{kerr.UnknownTopicOrPartition.Code, kmsg.StringPtr("Topic " + rr.ResourceName + " does not exist")}
	}
	if configs == nil {
		configs = map[string]string{}
	}
	for _, op := range rr.Configs {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			configs[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(configs, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			d, known := topicconfig.Topic(op.Name)
			if !known || d.Type != kmsg.ConfigTypeList {
				return alterResult{kerr.InvalidConfig.Code, kmsg.StringPtr(notList(op))}
			}
			current, set := configs[op.Name]
			if !set && d.Default != nil {
				current = *d.Default
			}
			list := listParts(current)
			for _, v := range javaSplit(*op.Value) {
				if op.Op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(list, v) {
					list = append(list, v)
				} else if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
					list = slices.DeleteFunc(list, func(s string) bool { return s == v })
				}
			}
			configs[op.Name] = strings.Join(list, ",")
		default:
			return invalidRequest("Unknown alter config operation " + op.Op.String())
		}
	}
	return resultOf(c.AlterConfigs(ctx, rr.ResourceName, configs, validateOnly))
}

// incrementalGroup applies SET and DELETE to a group's configs (APPEND
// and SUBTRACT: no group config is a list, INVALID_CONFIG).
func (c *Controller) incrementalGroup(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) alterResult {
	configs := c.view.GroupConfigs(rr.ResourceName)
	if configs == nil {
		configs = map[string]string{}
	}
	for _, op := range rr.Configs {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			configs[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(configs, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return alterResult{kerr.InvalidConfig.Code, kmsg.StringPtr(notList(op))}
		default:
			return invalidRequest("Unknown alter config operation " + op.Op.String())
		}
	}
	return resultOf(c.AlterGroupConfigs(ctx, rr.ResourceName, configs, validateOnly))
}

// notList is the controller's answer to APPEND or SUBTRACT on a config
// that is not a LIST (an unknown name included).
func notList(op kmsg.IncrementalAlterConfigsRequestResourceConfig) string {
	verb := "APPEND"
	if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
		verb = "SUBTRACT"
	}
	return "Can't " + verb + " to key " + op.Name + " because its type is not LIST."
}

// listParts is a stored list value's elements as the controller reads
// them: split on commas, empty parts dropped, nothing trimmed.
func listParts(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// javaSplit is Java's String.split(","), which the controller applies to
// an APPEND or SUBTRACT value: inner empty parts stay, trailing ones go.
func javaSplit(s string) []string {
	if s == "" {
		return []string{""}
	}
	parts := strings.Split(s, ",")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}
