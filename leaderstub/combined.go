package leaderstub

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// RegisterBeside registers the leader's APIs on the listener of a node
// that already serves others: the coordinator node leading partitions as a
// KRaft combined node does. A key the node serves already keeps its
// handler (InitProducerId: the coordinator allocates producer ids itself),
// except the two that name partitions, WriteTxnMarkers and
// DescribeProducers, which the group coordinator registers for
// __consumer_offsets: their requests are split by topic, __consumer_offsets
// to the handler registered before and every other topic to this leader,
// and the answers joined in request order.
func (l *Leader) RegisterBeside(reg *wire.Registry) {
	for _, a := range apis {
		if _, _, ok := reg.Range(a.Key); !ok {
			reg.Register(a.Key, a.Min, a.Max, a.Bind(l))
			continue
		}
		mine := a.Bind(l)
		switch a.Key {
		case writeTxnMarkersAPI.Key:
			reg.Wrap(a.Key, func(offsets wire.Handler) wire.Handler { return splitMarkers(offsets, mine) })
		case describeProducersAPI.Key:
			reg.Wrap(a.Key, func(offsets wire.Handler) wire.Handler { return splitDescribeProducers(offsets, mine) })
		}
	}
	reg.OnDisconnect(l.connectionEnded)
}

// splitMarkers sends the markers' __consumer_offsets partitions to offsets
// and the others to mine; each marker's answer lists both parts' topics.
func splitMarkers(offsets, mine wire.Handler) wire.Handler {
	return func(ctx context.Context, r *wire.Request) wire.Reply {
		req := r.Body.(*kmsg.WriteTxnMarkersRequest)
		parts := [2]*kmsg.WriteTxnMarkersRequest{}
		at := [2][]int{} // each part's markers: their index in req
		for i, m := range req.Markers {
			for side := range 2 {
				var ts []kmsg.WriteTxnMarkersRequestMarkerTopic
				for _, t := range m.Topics {
					if (t.Topic == cluster.OffsetsTopic) == (side == 0) {
						ts = append(ts, t)
					}
				}
				if len(ts) == 0 {
					continue
				}
				if parts[side] == nil {
					cp := *req
					cp.Markers = nil
					parts[side] = &cp
				}
				pm := m
				pm.Topics = ts
				parts[side].Markers = append(parts[side].Markers, pm)
				at[side] = append(at[side], i)
			}
		}
		whole, replies := dispatch(ctx, r, offsets, mine, parts[0] != nil, parts[1] != nil, parts[0], parts[1])
		if whole != nil {
			return whole
		}
		return func() (kmsg.Response, error) {
			resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
			resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
			for i, m := range req.Markers {
				resp.Markers[i] = kmsg.NewWriteTxnMarkersResponseMarker()
				resp.Markers[i].ProducerID = m.ProducerID
			}
			for side, reply := range replies {
				raw, err := reply()
				if err != nil {
					return nil, err
				}
				got, ok := raw.(*kmsg.WriteTxnMarkersResponse)
				if !ok || len(got.Markers) != len(at[side]) {
					return nil, fmt.Errorf("WriteTxnMarkers: a part answered %T with a marker count other than the %d sent", raw, len(at[side]))
				}
				for j, m := range got.Markers {
					i := at[side][j]
					resp.Markers[i].Topics = append(resp.Markers[i].Topics, m.Topics...)
				}
			}
			return resp, nil
		}
	}
}

// splitDescribeProducers sends __consumer_offsets to offsets and the other
// topics to mine; the answer lists the topics in request order.
func splitDescribeProducers(offsets, mine wire.Handler) wire.Handler {
	return func(ctx context.Context, r *wire.Request) wire.Reply {
		req := r.Body.(*kmsg.DescribeProducersRequest)
		parts := [2]*kmsg.DescribeProducersRequest{}
		for _, t := range req.Topics {
			side := 1
			if t.Topic == cluster.OffsetsTopic {
				side = 0
			}
			if parts[side] == nil {
				cp := *req
				cp.Topics = nil
				parts[side] = &cp
			}
			parts[side].Topics = append(parts[side].Topics, t)
		}
		whole, replies := dispatch(ctx, r, offsets, mine, parts[0] != nil, parts[1] != nil, parts[0], parts[1])
		if whole != nil {
			return whole
		}
		return func() (kmsg.Response, error) {
			byName := map[string][]kmsg.DescribeProducersResponseTopic{}
			var first *kmsg.DescribeProducersResponse
			for _, reply := range replies {
				raw, err := reply()
				if err != nil {
					return nil, err
				}
				got, ok := raw.(*kmsg.DescribeProducersResponse)
				if !ok {
					return nil, fmt.Errorf("DescribeProducers: a part answered %T", raw)
				}
				if first == nil {
					first = got
				}
				for _, t := range got.Topics {
					byName[t.Topic] = append(byName[t.Topic], t)
				}
			}
			resp := *first
			resp.Topics = nil
			for _, t := range req.Topics {
				if ts := byName[t.Topic]; len(ts) > 0 {
					resp.Topics = append(resp.Topics, ts[0])
					byName[t.Topic] = ts[1:]
				}
			}
			return &resp, nil
		}
	}
}

// dispatch runs a split request: the whole of r on one side when the other
// has no part of it (whole), else each part on its side (replies, the
// __consumer_offsets part first).
func dispatch(ctx context.Context, r *wire.Request, offsets, mine wire.Handler, hasOffsets, hasMine bool,
	offsetsPart, minePart kmsg.Request) (whole wire.Reply, replies [2]wire.Reply) {
	switch {
	case !hasMine:
		return offsets(ctx, r), replies
	case !hasOffsets:
		return mine(ctx, r), replies
	}
	return nil, [2]wire.Reply{offsets(ctx, r.WithBody(offsetsPart)), mine(ctx, r.WithBody(minePart))}
}
