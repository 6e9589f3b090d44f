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
			case *kmsg.WriteTxnMarkersRequest:
				return splitMarkers(partitions, of, body, call)
			case *kmsg.DescribeProducersRequest:
				return splitProducers(partitions, of, body, call)
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
	case *kmsg.WriteTxnMarkersResponse:
		p := part.(*kmsg.WriteTxnMarkersResponse)
		for _, m := range p.Markers {
			joined := false
			for i := range o.Markers {
				if o.Markers[i].ProducerID == m.ProducerID {
					o.Markers[i].Topics = append(o.Markers[i].Topics, m.Topics...)
					joined = true
					break
				}
			}
			if !joined {
				o.Markers = append(o.Markers, m)
			}
		}
	case *kmsg.DescribeProducersResponse:
		o.Topics = append(o.Topics, part.(*kmsg.DescribeProducersResponse).Topics...)
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

// splitMarkers splits WriteTxnMarkers by the instance of each
// __consumer_offsets partition it names.
func splitMarkers(partitions int32, of func(int32) *Coordinator, body *kmsg.WriteTxnMarkersRequest, call func(*Coordinator, kmsg.Request) wire.Reply) wire.Reply {
	parts := newRequestParts(func() *kmsg.WriteTxnMarkersRequest { cp := *body; cp.Markers = nil; return &cp })
	for _, m := range body.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				req := parts.of(partitionOwner(partitions, of, t.Topic, p))
				if n := len(req.Markers); n == 0 || req.Markers[n-1].ProducerID != m.ProducerID {
					cm := m
					cm.Topics = nil
					req.Markers = append(req.Markers, cm)
				}
				last := &req.Markers[len(req.Markers)-1]
				last.Topics = appendPartition(last.Topics, t, p,
					func(t kmsg.WriteTxnMarkersRequestMarkerTopic) string { return t.Topic },
					func(t *kmsg.WriteTxnMarkersRequestMarkerTopic) *[]int32 { return &t.Partitions })
			}
		}
	}
	return parts.call(body, call)
}

// splitProducers splits DescribeProducers by the instance of each
// __consumer_offsets partition it names.
func splitProducers(partitions int32, of func(int32) *Coordinator, body *kmsg.DescribeProducersRequest, call func(*Coordinator, kmsg.Request) wire.Reply) wire.Reply {
	parts := newRequestParts(func() *kmsg.DescribeProducersRequest { cp := *body; cp.Topics = nil; return &cp })
	for _, t := range body.Topics {
		for _, p := range t.Partitions {
			req := parts.of(partitionOwner(partitions, of, t.Topic, p))
			req.Topics = appendPartition(req.Topics, t, p,
				func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic },
				func(t *kmsg.DescribeProducersRequestTopic) *[]int32 { return &t.Partitions })
		}
	}
	return parts.call(body, call)
}

// appendPartition adds partition p of topic t to topics: to its last
// entry when that is t's, else to a new copy of t without partitions.
func appendPartition[T any](topics []T, t T, p int32, name func(T) string, partitionsOf func(*T) *[]int32) []T {
	if n := len(topics); n == 0 || name(topics[n-1]) != name(t) {
		*partitionsOf(&t) = nil
		topics = append(topics, t)
	}
	ps := partitionsOf(&topics[len(topics)-1])
	*ps = append(*ps, p)
	return topics
}

// requestParts are the parts of a request, one per instance (nil: not
// served here), in the order of their first item.
type requestParts[R kmsg.Request] struct {
	order []*Coordinator
	by    map[*Coordinator]R
	empty func() R
}

func newRequestParts[R kmsg.Request](empty func() R) *requestParts[R] {
	return &requestParts[R]{by: map[*Coordinator]R{}, empty: empty}
}

// of is c's part, new (empty) at c's first item.
func (p *requestParts[R]) of(c *Coordinator) R {
	if r, ok := p.by[c]; ok {
		return r
	}
	r := p.empty()
	p.by[c] = r
	p.order = append(p.order, c)
	return r
}

// call hands each instance (in order) its part of body, or body whole
// when one instance (or none) has a part, and joins the answers.
func (p *requestParts[R]) call(body kmsg.Request, call func(*Coordinator, kmsg.Request) wire.Reply) wire.Reply {
	if len(p.order) <= 1 {
		var c *Coordinator
		if len(p.order) == 1 {
			c = p.order[0]
		}
		return call(c, body)
	}
	replies := make([]wire.Reply, len(p.order))
	for i, c := range p.order {
		replies[i] = call(c, p.by[c])
	}
	return joinReplies(body, replies)
}

// notServed is the answer of a node that does not coordinate a request's
// groups now (RegisterPartitionSwitch): ListGroups lists none, a group
// request gets NOT_COORDINATOR (the client asks FindCoordinator again),
// and WriteTxnMarkers and DescribeProducers, about __consumer_offsets
// partitions, get NOT_LEADER_OR_FOLLOWER per partition (the marker
// sender looks the leader up again).
func notServed(req *wire.Request) wire.Reply {
	switch body := req.Body.(type) {
	case *kmsg.ListGroupsRequest:
		return wire.Now(body.ResponseKind())
	case *kmsg.WriteTxnMarkersRequest:
		return wire.Now(wire.WriteTxnMarkersResponse(body, func(kmsg.WriteTxnMarkersRequestMarker, string, int32) int16 {
			return kerr.NotLeaderForPartition.Code
		}))
	case *kmsg.DescribeProducersRequest:
		return wire.Now(wire.DescribeProducersResponse(body, func(string, int32) (int16, wire.ActiveProducers) {
			return kerr.NotLeaderForPartition.Code, nil
		}))
	}
	return wire.Now(wire.UnservedResponse(req.Body, kerr.NotCoordinator.Code))
}
