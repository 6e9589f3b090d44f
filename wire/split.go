package wire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionSplit serves the requests that name partitions of several
// owners, WriteTxnMarkers and DescribeProducers, on a node where different
// handlers answer different partitions (a leader's topics beside the
// group coordinator's __consumer_offsets, or each __consumer_offsets
// partition's own group coordinator instance): it splits a request into
// one part per destination, each holding that destination's partitions
// in the request's order, hands each part to its destination's handler,
// and joins the answers into one response of the request's shape (each
// marker's answer at its place, each topic and partition where the
// request named it).
type PartitionSplit[D comparable] struct {
	// Dest is the destination of a partition.
	Dest func(topic string, partition int32) D
	// Handler is a destination's handler, nil when it has none now: its
	// partitions are answered with Missing.
	Handler func(D) Handler
	// Missing is the error code of a partition whose destination has no
	// handler.
	Missing int16
	// Empty is the destination of a request that names no partition.
	Empty D
}

// Serve answers r (a WriteTxnMarkersRequest or DescribeProducersRequest;
// any other request goes to Empty's handler whole). A request whose
// partitions all have one destination goes to it whole.
func (s PartitionSplit[D]) Serve(ctx context.Context, r *Request) Reply {
	var sp split[D]
	switch body := r.Body.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		sp = s.splitMarkers(body)
	case *kmsg.DescribeProducersRequest:
		sp = s.splitProducers(body)
	default:
		return s.whole(ctx, r, s.Empty)
	}
	switch len(sp.dests) {
	case 0:
		return s.whole(ctx, r, s.Empty)
	case 1:
		return s.whole(ctx, r, sp.dests[0])
	}
	replies := make([]Reply, len(sp.dests))
	for i, d := range sp.dests {
		replies[i] = s.whole(ctx, r.WithBody(sp.bodies[i]), d)
	}
	return func() (kmsg.Response, error) {
		answers := make([]kmsg.Response, len(replies))
		for i, reply := range replies {
			resp, err := reply()
			if err != nil {
				return nil, err
			}
			if resp == nil || resp.Key() != r.Body.Key() {
				return nil, fmt.Errorf("%s: a part answered %T", kmsg.NameForKey(r.Body.Key()), resp)
			}
			answers[i] = resp
		}
		return sp.join(answers), nil
	}
}

// whole hands r to d's handler, or answers every partition Missing.
func (s PartitionSplit[D]) whole(ctx context.Context, r *Request, d D) Reply {
	if h := s.Handler(d); h != nil {
		return h(ctx, r)
	}
	return Now(PartitionsResponse(r.Body, s.Missing))
}

// PartitionsResponse answers every partition of a WriteTxnMarkers or
// DescribeProducers request with code (nil for another request).
func PartitionsResponse(body kmsg.Request, code int16) kmsg.Response {
	switch b := body.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		return WriteTxnMarkersResponse(b, func(kmsg.WriteTxnMarkersRequestMarker, string, int32) int16 { return code })
	case *kmsg.DescribeProducersRequest:
		return DescribeProducersResponse(b, func(string, int32) (int16, ActiveProducers) { return code, nil })
	}
	return nil
}

// split is a request cut by destination: the parts' destinations and
// bodies in the order of their first partition, and join, which builds
// the response of the whole request from the parts' answers (in that
// order).
type split[D comparable] struct {
	dests  []D
	bodies []kmsg.Request
	join   func(answers []kmsg.Response) kmsg.Response
}

// partOf returns d's part index, adding a part made by fresh at d's
// first partition.
func (sp *split[D]) partOf(d D, index map[D]int, fresh func() kmsg.Request) int {
	i, ok := index[d]
	if !ok {
		i = len(sp.dests)
		index[d] = i
		sp.dests = append(sp.dests, d)
		sp.bodies = append(sp.bodies, fresh())
	}
	return i
}

type topicPartition struct {
	topic     string
	partition int32
}

// answerMissing is the code of a partition a part's answer left out.
var answerMissing = kerr.UnknownServerError.Code

func (s PartitionSplit[D]) splitMarkers(body *kmsg.WriteTxnMarkersRequest) split[D] {
	var sp split[D]
	index := map[D]int{}
	// origin[part][j]: the request marker that part marker j is a part
	// of; at[n]: the part and part marker of the request's n-th
	// partition (markers, topics, partitions in order).
	var origin [][]int
	type place struct{ part, marker int }
	var at []place
	for mi, m := range body.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				i := sp.partOf(s.Dest(t.Topic, p), index, func() kmsg.Request {
					cp := *body
					cp.Markers = nil
					origin = append(origin, nil)
					return &cp
				})
				part := sp.bodies[i].(*kmsg.WriteTxnMarkersRequest)
				if n := len(origin[i]); n == 0 || origin[i][n-1] != mi {
					cm := m
					cm.Topics = nil
					part.Markers = append(part.Markers, cm)
					origin[i] = append(origin[i], mi)
				}
				last := &part.Markers[len(part.Markers)-1]
				last.Topics = appendPartition(last.Topics, t, p,
					func(t kmsg.WriteTxnMarkersRequestMarkerTopic) string { return t.Topic },
					func(t *kmsg.WriteTxnMarkersRequestMarkerTopic) *[]int32 { return &t.Partitions })
				at = append(at, place{i, len(part.Markers) - 1})
			}
		}
	}
	sp.join = func(answers []kmsg.Response) kmsg.Response {
		codes := make([][]map[topicPartition]int16, len(answers)) // [part][part marker]
		for i, a := range answers {
			for j, m := range a.(*kmsg.WriteTxnMarkersResponse).Markers {
				if j >= len(origin[i]) {
					break
				}
				got := map[topicPartition]int16{}
				for _, t := range m.Topics {
					for _, p := range t.Partitions {
						got[topicPartition{t.Topic, p.Partition}] = p.ErrorCode
					}
				}
				codes[i] = append(codes[i], got)
			}
		}
		n := 0
		return WriteTxnMarkersResponse(body, func(_ kmsg.WriteTxnMarkersRequestMarker, topic string, p int32) int16 {
			pl := at[n]
			n++
			if pl.marker < len(codes[pl.part]) {
				if code, ok := codes[pl.part][pl.marker][topicPartition{topic, p}]; ok {
					return code
				}
			}
			return answerMissing
		})
	}
	return sp
}

func (s PartitionSplit[D]) splitProducers(body *kmsg.DescribeProducersRequest) split[D] {
	var sp split[D]
	index := map[D]int{}
	var partOfTP []int // the part of the request's n-th partition
	for _, t := range body.Topics {
		for _, p := range t.Partitions {
			i := sp.partOf(s.Dest(t.Topic, p), index, func() kmsg.Request {
				cp := *body
				cp.Topics = nil
				return &cp
			})
			part := sp.bodies[i].(*kmsg.DescribeProducersRequest)
			part.Topics = appendPartition(part.Topics, t, p,
				func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic },
				func(t *kmsg.DescribeProducersRequestTopic) *[]int32 { return &t.Partitions })
			partOfTP = append(partOfTP, i)
		}
	}
	sp.join = func(answers []kmsg.Response) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.DescribeProducersResponse)
		got := make([]map[topicPartition]kmsg.DescribeProducersResponseTopicPartition, len(answers))
		for i, a := range answers {
			ar := a.(*kmsg.DescribeProducersResponse)
			resp.ThrottleMillis = max(resp.ThrottleMillis, ar.ThrottleMillis)
			got[i] = map[topicPartition]kmsg.DescribeProducersResponseTopicPartition{}
			for _, t := range ar.Topics {
				for _, p := range t.Partitions {
					got[i][topicPartition{t.Topic, p.Partition}] = p
				}
			}
		}
		n := 0
		for _, t := range body.Topics {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp, ok := got[partOfTP[n]][topicPartition{t.Topic, p}]
				n++
				if !ok {
					rp = kmsg.NewDescribeProducersResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, answerMissing
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return sp
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
