package groups

// OffsetFetch (key 9), v0–v9.
//
// Behavior:
//   - committed offsets only: transactional offsets stay invisible until
//     their COMMIT marker; with RequireStable (v7+) a partition that has
//     some pending is UNSTABLE_OFFSET_COMMIT (the client retries);
//   - a partition without an offset (or a group that does not exist) is
//     offset -1, leader epoch -1, metadata "";
//   - no topics (v2+: null) lists every partition the group has an offset
//     for;
//   - the answer shows only durable offsets: it waits for the group
//     coordinator's records appended so far;
//   - a topic the principal may not DESCRIBE (with an authorizer) is left
//     out of an every-partition answer, and a partition of it the request
//     names is TOPIC_AUTHORIZATION_FAILED with offset -1, as Kafka's
//     KafkaApis.handleOffsetFetchRequest answers it.
//
// Version notes: v2 adds the top-level error code; v5 the leader epoch;
// v7 RequireStable; v8 several groups per request (KIP-709); v9 the
// member id and epoch of KIP-848: for a consumer group, a named member
// must exist (UNKNOWN_MEMBER_ID) at that epoch (STALE_MEMBER_EPOCH), as
// a group-level error (not checked for classic groups).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/groupby"
	"github.com/txncoord/txncoord/wire"
)

// offsetFetchAPI is OffsetFetch v0–v9.
var offsetFetchAPI = wire.API[*Coordinator]{Key: 9, Min: 0, Max: 9, Handle: (*Coordinator).handleOffsetFetch}

// fetchGroup is one group of an OffsetFetch: tps nil for every partition.
type fetchGroup struct {
	group string
	tps   []TP
	// v9+: the member of a consumer group (nil and -1: none).
	memberID    *string
	memberEpoch int32
	// denied: the principal may not DESCRIBE the group.
	denied bool
}

func (c *Coordinator) handleOffsetFetch(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	var groups []fetchGroup
	if req.Version < 8 {
		if deny := groupDenied(r, kmsg.ACLOperationDescribe, req.Group); deny != nil {
			return deny
		}
		fg := fetchGroup{group: req.Group, memberEpoch: -1} // no member before v9
		if req.Topics != nil || req.Version < 2 {
			fg.tps = []TP{}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					fg.tps = append(fg.tps, TP{t.Topic, p})
				}
			}
		}
		groups = append(groups, fg)
	} else {
		for _, g := range req.Groups {
			fg := fetchGroup{group: g.Group, memberEpoch: -1,
				denied: !wire.Authorize(r, kmsg.ACLOperationDescribe, wire.GroupResource(g.Group))}
			if req.Version >= 9 {
				fg.memberID, fg.memberEpoch = g.MemberID, g.MemberEpoch
			}
			if g.Topics != nil {
				fg.tps = []TP{}
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						fg.tps = append(fg.tps, TP{t.Topic, p})
					}
				}
			}
			groups = append(groups, fg)
		}
	}
	return func() (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if err := c.readable(ctx); err != nil {
			code := storeErrCode(err)
			if req.Version >= 8 {
				for _, g := range req.Groups {
					rg := kmsg.NewOffsetFetchResponseGroup()
					rg.Group, rg.ErrorCode = g.Group, code
					resp.Groups = append(resp.Groups, rg)
				}
			} else {
				resp.ErrorCode = code
			}
			return resp, nil
		}
		c.mu.Lock()
		fetched := make([][]FetchedOffset, len(groups))
		memberCodes := make([]int16, len(groups))
		for i, g := range groups {
			if g.denied {
				memberCodes[i] = kerr.GroupAuthorizationFailed.Code
				continue
			}
			if memberCodes[i] = c.core.ValidateConsumerFetch(g.group, g.memberID, g.memberEpoch); memberCodes[i] == 0 {
				fetched[i] = c.core.Fetch(g.group, g.tps, req.RequireStable)
			}
		}
		c.mu.Unlock()
		describable := topicsDescribable(r)
		for i, g := range groups {
			fetched[i] = hideUndescribable(fetched[i], g.tps == nil, describable)
		}
		if c.debugging() {
			for i, g := range groups {
				f := fetched[i]
				r.Logger().Debug().Str("group", g.group).Bool("require_stable", req.RequireStable).Int16("error_code", memberCodes[i]).
					Array("offsets", offsetsArr(len(f), func(j int) (TP, int64, int16) { return f[j].TP, f[j].Offset.Offset, f[j].Err })).
					Msg("offset fetch answered")
			}
		}
		for i, g := range groups {
			var byTopic groupby.Ordered[string, FetchedOffset]
			for _, f := range fetched[i] {
				byTopic.Add(f.Topic, f)
			}
			if req.Version < 8 {
				for topic, fs := range byTopic.All() {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = topic
					for _, f := range fs {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						md := f.Metadata
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = f.Partition, f.Offset.Offset, f.LeaderEpoch, &md, f.Err
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
				continue
			}
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.group, memberCodes[i]
			for topic, fs := range byTopic.All() {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = topic
				for _, f := range fs {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					md := f.Metadata
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = f.Partition, f.Offset.Offset, f.LeaderEpoch, &md, f.Err
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
}

// topicsDescribable reports, per topic, whether r's principal may DESCRIBE
// it (asked once per topic).
func topicsDescribable(r *wire.Request) func(string) bool {
	seen := map[string]bool{}
	return func(topic string) bool {
		ok, asked := seen[topic]
		if !asked {
			ok = wire.Authorize(r, kmsg.ACLOperationDescribe, wire.TopicResource(topic))
			seen[topic] = ok
		}
		return ok
	}
}

// hideUndescribable drops the offsets of the topics describable refuses
// from an every-partition answer (all), and answers a named partition of
// one TOPIC_AUTHORIZATION_FAILED with no offset.
func hideUndescribable(fs []FetchedOffset, all bool, describable func(string) bool) []FetchedOffset {
	out := fs[:0:0]
	for _, f := range fs {
		if describable(f.Topic) {
			out = append(out, f)
			continue
		}
		if !all {
			out = append(out, FetchedOffset{TP: f.TP, Offset: Offset{Offset: -1, LeaderEpoch: -1}, Err: kerr.TopicAuthorizationFailed.Code})
		}
	}
	return out
}
