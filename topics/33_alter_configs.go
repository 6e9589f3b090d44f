package topics

// AlterConfigs (key 33), v0–v2, and IncrementalAlterConfigs (key 44),
// v0–v1 (44_incremental_alter_configs.go), served by the controller.
//
// Behavior, as Kafka's controller:
//   - TOPIC: AlterConfigs replaces the topic's whole explicit config with
//     the request's; the result is validated as a whole
//     (topicconfig.ValidateTopicConfigs: INVALID_CONFIG with Kafka's
//     message), persisted through the controller, and the view carries it
//     to the leaders; ValidateOnly checks only; an unknown topic is
//     UNKNOWN_TOPIC_OR_PARTITION;
//   - BROKER: every broker config here is read-only (txncoord changes no
//     broker setting while it runs): INVALID_CONFIG "Cannot update these
//     configs dynamically", as Kafka answers for its static configs; a
//     broker name other than "" or a node id is INVALID_REQUEST;
//   - first, as Kafka's broker before it forwards (ConfigAdminManager
//     .preprocess): a resource named twice, a config named twice in one
//     resource, or a null value (a DELETE's aside, for the incremental
//     API) is INVALID_REQUEST with Kafka's message; other types
//     INVALID_REQUEST.
//
// Version notes: v1 throttle; v2 flexible.

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/topicconfig"
	"github.com/txncoord/txncoord/wire"
)

var alterConfigsAPI = wire.API[*Controller]{Key: 33, Min: 0, Max: 2, Handle: (*Controller).handleAlterConfigs}

// alterResult is one resource's answer.
type alterResult struct {
	code int16
	msg  *string
}

func resultOf(err error) alterResult {
	if err == nil {
		return alterResult{}
	}
	var ce *topicconfig.Error
	if errors.As(err, &ce) {
		return alterResult{ce.Code.Code, kmsg.StringPtr(ce.Message)}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return alterResult{ke.Code, kmsg.StringPtr(err.Error())}
	}
	return alterResult{kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())}
}

func invalidRequest(msg string) alterResult {
	return alterResult{kerr.InvalidRequest.Code, kmsg.StringPtr(msg)}
}

// Kafka's messages for a malformed alter (ConfigAdminManager.preprocess).
const (
	duplicateResource = "Each resource must appear at most once."
	duplicateKeys     = "Error due to duplicate config keys"
)

func nullValues(names []string) string {
	return "Null value not supported for : " + strings.Join(names, ", ")
}

// resourceKey names a resource for duplicate detection.
func resourceKey(t kmsg.ConfigResourceType, name string) string {
	return strconv.Itoa(int(t)) + "\x00" + name
}

// duplicates lists the resources named more than once.
func duplicates(keys []string) map[string]bool {
	seen, dup := map[string]bool{}, map[string]bool{}
	for _, k := range keys {
		dup[k] = seen[k]
		seen[k] = true
	}
	for k, d := range dup {
		if !d {
			delete(dup, k)
		}
	}
	return dup
}

// alterBroker refuses a change to a broker's configs: all are read-only.
func alterBroker(name string, keys []string) alterResult {
	if name != "" {
		if id, err := strconv.Atoi(name); err != nil || id < 0 {
			return invalidRequest("Unable to parse broker name as a base 10 number.")
		}
	}
	if len(keys) == 0 {
		return alterResult{}
	}
	sort.Strings(keys)
	return alterResult{kerr.InvalidConfig.Code, kmsg.StringPtr("Cannot update these configs dynamically: " + strings.Join(keys, ", "))}
}

func (c *Controller) handleAlterConfigs(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
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
			if cfg.Value == nil {
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
			configs := map[string]string{}
			for _, cfg := range rr.Configs {
				configs[cfg.Name] = *cfg.Value
			}
			res = resultOf(c.AlterConfigs(ctx, rr.ResourceName, configs, req.ValidateOnly))
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			res = alterBroker(rr.ResourceName, names)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			configs := map[string]string{}
			for _, cfg := range rr.Configs {
				configs[cfg.Name] = *cfg.Value
			}
			res = resultOf(c.AlterGroupConfigs(ctx, rr.ResourceName, configs, req.ValidateOnly))
		default:
			res = invalidRequest("Unsupported resource type " + rr.ResourceType.String())
		}
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName, out.ErrorCode, out.ErrorMessage = rr.ResourceType, rr.ResourceName, res.code, res.msg
		if res.code != 0 {
			r.LogRefused(rr.ResourceName, res.code, refusalText(res.msg))
		}
		resp.Resources = append(resp.Resources, out)
	}
	return wire.Now(resp)
}

// refusalText is an error message for the log ("" when null).
func refusalText(msg *string) string {
	if msg == nil {
		return ""
	}
	return *msg
}

// configsAllowed reports whether r's principal may ALTER_CONFIGS the
// resource: the topic, or the cluster for a broker's configs (Kafka's
// rule).
func configsAllowed(r *wire.Request, typ kmsg.ConfigResourceType, name string) bool {
	if typ == kmsg.ConfigResourceTypeTopic {
		return wire.Authorize(r, kmsg.ACLOperationAlterConfigs, wire.TopicResource(name))
	}
	return wire.Authorize(r, kmsg.ACLOperationAlterConfigs, wire.ClusterResource)
}

// configsDenied is the answer to an alter the principal may not make:
// TOPIC_AUTHORIZATION_FAILED for a topic, CLUSTER_AUTHORIZATION_FAILED
// for a broker.
func configsDenied(typ kmsg.ConfigResourceType) alterResult {
	if typ == kmsg.ConfigResourceTypeTopic {
		return alterResult{kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")}
	}
	return alterResult{kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")}
}
