package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// RegisterPartitionSwitch registers every group key (and the KIP-848 and
// share-group keys when a node of kafkaVersion serves them) for a node that coordinates the groups of some __consumer_offsets
// partitions only, one Coordinator per partition it owns: of(p) is the
// instance of partition p, or nil while this node does not own it. A
// group's requests go to the instance of its partition
// (cluster.OffsetsPartitionFor), as Kafka's coordinator serves the groups
// of the partitions it leads; a group of a partition owned elsewhere (or
// by nobody yet) is answered NOT_COORDINATOR, so the client asks
// FindCoordinator again.
//
// A request naming several groups (DescribeGroups, DeleteGroups,
// OffsetFetch v8+, ConsumerGroupDescribe, ShareGroupDescribe,
// DescribeShareGroupOffsets) or several __consumer_offsets partitions
// (WriteTxnMarkers, DescribeProducers) is split by instance, each part
// answered by its instance (or as not served), and the answers joined in
// one response. ListGroups lists the groups of every instance.
func RegisterPartitionSwitch(reg *wire.Registry, kafkaVersion string, partitions int32, of func(p int32) *Coordinator) {
	groupOf := func(g string) *Coordinator { return of(cluster.OffsetsPartitionFor(g, partitions)) }
	apisFor(kafkaVersion).RegisterEach(reg, func(a wire.API[*Coordinator]) wire.Handler {
		return func(ctx context.Context, req *wire.Request) wire.Reply {
			call := func(c *Coordinator, body kmsg.Request) wire.Reply {
				sub := req
				if body != req.Body {
					sub = req.WithBody(body)
				}
				if c == nil {
					return notServed(sub)
				}
				return a.Handle(c, ctx, sub)
			}
			switch body := req.Body.(type) {
			case *kmsg.ListGroupsRequest:
				return listAll(partitions, of, body, call)
			case *kmsg.WriteTxnMarkersRequest, *kmsg.DescribeProducersRequest:
				return wire.PartitionSplit[*Coordinator]{
					Dest: func(topic string, p int32) *Coordinator { return partitionOwner(partitions, of, topic, p) },
					Handler: func(c *Coordinator) wire.Handler {
						if c == nil {
							return nil
						}
						return func(ctx context.Context, r *wire.Request) wire.Reply { return a.Handle(c, ctx, r) }
					},
					// The marker sender looks the leader up again.
					Missing: kerr.NotLeaderForPartition.Code,
				}.Serve(ctx, req)
			}
			parts, ok := splitGroups(req.Body, groupOf)
			if !ok || len(parts) == 0 {
				return call(nil, req.Body)
			}
			if len(parts) == 1 {
				return call(parts[0].c, req.Body)
			}
			replies := make([]wire.Reply, len(parts))
			for i, p := range parts {
				replies[i] = call(p.c, p.body)
			}
			return joinReplies(req.Body, replies)
		}
	})
}

// groupPart is the part of a request for the groups of one instance.
type groupPart struct {
	c    *Coordinator
	body kmsg.Request
}

// splitGroups splits a request by the instance of each group it names.
// ok is false for a request naming no group.
func splitGroups(body kmsg.Request, groupOf func(string) *Coordinator) (parts []groupPart, ok bool) {
	index := map[*Coordinator]int{}
	add := func(g string, into func(part kmsg.Request), fresh func() kmsg.Request) {
		c := groupOf(g)
		i, seen := index[c]
		if !seen {
			i = len(parts)
			index[c] = i
			parts = append(parts, groupPart{c: c, body: fresh()})
		}
		into(parts[i].body)
	}
	single := func(g string) ([]groupPart, bool) { return []groupPart{{c: groupOf(g), body: body}}, true }
	switch b := body.(type) {
	case *kmsg.OffsetCommitRequest:
		return single(b.Group)
	case *kmsg.JoinGroupRequest:
		return single(b.Group)
	case *kmsg.HeartbeatRequest:
		return single(b.Group)
	case *kmsg.LeaveGroupRequest:
		return single(b.Group)
	case *kmsg.SyncGroupRequest:
		return single(b.Group)
	case *kmsg.TxnOffsetCommitRequest:
		return single(b.Group)
	case *kmsg.OffsetDeleteRequest:
		return single(b.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return single(b.Group)
	case *kmsg.ShareGroupHeartbeatRequest:
		return single(b.GroupID)
	case *kmsg.AlterShareGroupOffsetsRequest:
		return single(b.GroupID)
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return single(b.GroupID)
	case *kmsg.OffsetFetchRequest:
		if b.Version < 8 {
			return single(b.Group)
		}
		for _, g := range b.Groups {
			add(g.Group, func(p kmsg.Request) {
				p.(*kmsg.OffsetFetchRequest).Groups = append(p.(*kmsg.OffsetFetchRequest).Groups, g)
			}, func() kmsg.Request { c := *b; c.Groups = nil; return &c })
		}
	case *kmsg.DescribeGroupsRequest:
		for _, g := range b.Groups {
			add(g, func(p kmsg.Request) {
				p.(*kmsg.DescribeGroupsRequest).Groups = append(p.(*kmsg.DescribeGroupsRequest).Groups, g)
			},
				func() kmsg.Request { c := *b; c.Groups = nil; return &c })
		}
	case *kmsg.DeleteGroupsRequest:
		for _, g := range b.Groups {
			add(g, func(p kmsg.Request) {
				p.(*kmsg.DeleteGroupsRequest).Groups = append(p.(*kmsg.DeleteGroupsRequest).Groups, g)
			},
				func() kmsg.Request { c := *b; c.Groups = nil; return &c })
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		for _, g := range b.Groups {
			add(g, func(p kmsg.Request) {
				p.(*kmsg.ConsumerGroupDescribeRequest).Groups = append(p.(*kmsg.ConsumerGroupDescribeRequest).Groups, g)
			}, func() kmsg.Request { c := *b; c.Groups = nil; return &c })
		}
	case *kmsg.ShareGroupDescribeRequest:
		for _, g := range b.GroupIDs {
			add(g, func(p kmsg.Request) {
				p.(*kmsg.ShareGroupDescribeRequest).GroupIDs = append(p.(*kmsg.ShareGroupDescribeRequest).GroupIDs, g)
			}, func() kmsg.Request { c := *b; c.GroupIDs = nil; return &c })
		}
	case *kmsg.DescribeShareGroupOffsetsRequest:
		for _, g := range b.Groups {
			add(g.GroupID, func(p kmsg.Request) {
				p.(*kmsg.DescribeShareGroupOffsetsRequest).Groups = append(p.(*kmsg.DescribeShareGroupOffsetsRequest).Groups, g)
			}, func() kmsg.Request { c := *b; c.Groups = nil; return &c })
		}
	default:
		return nil, false
	}
	return parts, true
}

// joinReplies waits for every part's answer and joins them in one
// response of req's kind: the per-group entries of each, in part order.
func joinReplies(req kmsg.Request, replies []wire.Reply) wire.Reply {
	return func() (kmsg.Response, error) {
		out := req.ResponseKind()
		for _, r := range replies {
			resp, err := r()
			if err != nil {
				return nil, err
			}
			if resp == nil {
				continue
			}
			joinInto(out, resp)
		}
		return out, nil
	}
}

// joinInto appends part's entries to out (responses of one kind).
func joinInto(out, part kmsg.Response) {
	switch o := out.(type) {
	case *kmsg.OffsetFetchResponse:
		p := part.(*kmsg.OffsetFetchResponse)
		o.Groups = append(o.Groups, p.Groups...)
		o.ThrottleMillis = max(o.ThrottleMillis, p.ThrottleMillis)
	case *kmsg.DescribeGroupsResponse:
		o.Groups = append(o.Groups, part.(*kmsg.DescribeGroupsResponse).Groups...)
	case *kmsg.DeleteGroupsResponse:
		o.Groups = append(o.Groups, part.(*kmsg.DeleteGroupsResponse).Groups...)
	case *kmsg.ConsumerGroupDescribeResponse:
		o.Groups = append(o.Groups, part.(*kmsg.ConsumerGroupDescribeResponse).Groups...)
	case *kmsg.ShareGroupDescribeResponse:
		o.Groups = append(o.Groups, part.(*kmsg.ShareGroupDescribeResponse).Groups...)
	case *kmsg.DescribeShareGroupOffsetsResponse:
		o.Groups = append(o.Groups, part.(*kmsg.DescribeShareGroupOffsetsResponse).Groups...)
	case *kmsg.ListGroupsResponse:
		p := part.(*kmsg.ListGroupsResponse)
		o.Groups = append(o.Groups, p.Groups...)
		if o.ErrorCode == 0 {
			o.ErrorCode = p.ErrorCode
		}
	}
}

// distinctInstances is every instance this node runs now, each once.
func distinctInstances(partitions int32, of func(int32) *Coordinator) []*Coordinator {
	var out []*Coordinator
	seen := map[*Coordinator]bool{}
	for p := range partitions {
		if c := of(p); c != nil && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// listAll lists the groups of every instance this node runs.
func listAll(partitions int32, of func(int32) *Coordinator, body *kmsg.ListGroupsRequest, call func(*Coordinator, kmsg.Request) wire.Reply) wire.Reply {
	cs := distinctInstances(partitions, of)
	if len(cs) == 0 {
		return call(nil, body)
	}
	replies := make([]wire.Reply, len(cs))
	for i, c := range cs {
		replies[i] = call(c, body)
	}
	return joinReplies(body, replies)
}

// partitionOwner is the instance of a __consumer_offsets partition (nil
// for another topic's: the node's other handlers answer those, as
// RegisterSwitch's coordinator does).
func partitionOwner(partitions int32, of func(int32) *Coordinator, topic string, p int32) *Coordinator {
	if topic != cluster.OffsetsTopic || p < 0 || p >= partitions {
		return nil
	}
	return of(p)
}

// notServed is the answer of a node that does not coordinate a request's
// groups now (RegisterPartitionSwitch): ListGroups lists none, a group
// request gets NOT_COORDINATOR (the client asks FindCoordinator again).
func notServed(req *wire.Request) wire.Reply {
	if body, ok := req.Body.(*kmsg.ListGroupsRequest); ok {
		return wire.Now(body.ResponseKind())
	}
	return wire.Now(wire.UnservedResponse(req.Body, kerr.NotCoordinator.Code))
}
