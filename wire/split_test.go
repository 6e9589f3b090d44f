package wire

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// splitHarness routes by dest and records what each destination's
// handler was handed; a destination in missing has no handler.
type splitHarness struct {
	got     map[string][]kmsg.Request
	missing map[string]bool
	// drop, when set, is a partition every handler leaves out of its
	// answer.
	drop string
}

func (h *splitHarness) split(dest func(topic string, p int32) string, empty string) PartitionSplit[string] {
	h.got = map[string][]kmsg.Request{}
	return PartitionSplit[string]{Dest: dest, Missing: kerr.NotLeaderForPartition.Code, Empty: empty,
		Handler: func(d string) Handler {
			if h.missing[d] {
				return nil
			}
			return func(_ context.Context, r *Request) Reply {
				h.got[d] = append(h.got[d], r.Body)
				return Now(h.answer(d, r.Body))
			}
		}}
}

// destCode is the code destination d answers for partition p: its letter
// and the partition, so that the joined answer shows who answered what.
func destCode(d string, p int32) int16 { return int16(d[0]-'a'+1)*100 + int16(p) }

func (h *splitHarness) answer(d string, body kmsg.Request) kmsg.Response {
	switch b := body.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		resp := WriteTxnMarkersResponse(b, func(_ kmsg.WriteTxnMarkersRequestMarker, topic string, p int32) int16 { return destCode(d, p) })
		for i := range resp.Markers {
			for j := range resp.Markers[i].Topics {
				t := &resp.Markers[i].Topics[j]
				t.Partitions = dropPartition(t.Partitions, t.Topic, h.drop, func(p kmsg.WriteTxnMarkersResponseMarkerTopicPartition) int32 { return p.Partition })
			}
		}
		return resp
	case *kmsg.DescribeProducersRequest:
		resp := b.ResponseKind().(*kmsg.DescribeProducersResponse)
		resp.ThrottleMillis = int32(d[0])
		for _, t := range b.Topics {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, destCode(d, p), kmsg.StringPtr(d)
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = int64(destCode(d, p))
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rt.Partitions = dropPartition(rt.Partitions, t.Topic, h.drop, func(p kmsg.DescribeProducersResponseTopicPartition) int32 { return p.Partition })
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	panic(fmt.Sprintf("%T", body))
}

func dropPartition[P any](ps []P, topic, drop string, partition func(P) int32) []P {
	var out []P
	for _, p := range ps {
		if fmt.Sprintf("%s/%d", topic, partition(p)) != drop {
			out = append(out, p)
		}
	}
	return out
}

func markers(spec ...string) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, s := range spec { // "pid:topic=p,p;topic=p"
		pid, topics, _ := strings.Cut(s, ":")
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		fmt.Sscan(pid, &m.ProducerID)
		m.Committed = true
		for ts := range strings.SplitSeq(topics, ";") {
			name, ps, _ := strings.Cut(ts, "=")
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = name
			for p := range strings.SplitSeq(ps, ",") {
				var n int32
				fmt.Sscan(p, &n)
				t.Partitions = append(t.Partitions, n)
			}
			m.Topics = append(m.Topics, t)
		}
		req.Markers = append(req.Markers, m)
	}
	return req
}

// markersShape is a marker answer (or request) as "pid:topic=p/code,..."
// per marker.
func markersShape(resp *kmsg.WriteTxnMarkersResponse) []string {
	var out []string
	for _, m := range resp.Markers {
		var ts []string
		for _, t := range m.Topics {
			var ps []string
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%d/%d", p.Partition, p.ErrorCode))
			}
			ts = append(ts, t.Topic+"="+strings.Join(ps, ","))
		}
		out = append(out, fmt.Sprintf("%d:%s", m.ProducerID, strings.Join(ts, ";")))
	}
	return out
}

func markersRequestShape(req kmsg.Request) []string {
	var out []string
	for _, m := range req.(*kmsg.WriteTxnMarkersRequest).Markers {
		var ts []string
		for _, t := range m.Topics {
			ts = append(ts, fmt.Sprintf("%s=%v", t.Topic, t.Partitions))
		}
		out = append(out, fmt.Sprintf("%d:%s", m.ProducerID, strings.Join(ts, ";")))
	}
	return out
}

func serve(t *testing.T, s PartitionSplit[string], body kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := s.Serve(context.Background(), &Request{Body: body, Key: body.Key()})()
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// byPartitionParity routes even partitions to "a", odd ones to "b", and
// topic "z" to "c".
func byPartitionParity(topic string, p int32) string {
	if topic == "z" {
		return "c"
	}
	return string(rune('a' + p%2))
}

// TestSplitMarkers: WriteTxnMarkers split by partition: each destination
// gets its partitions in the request's order, grouped under their markers
// (a producer id's marker appearing in a part only if it has partitions
// there, twice when the request has it twice), and the answer has the
// request's shape with each partition's code from its destination.
func TestSplitMarkers(t *testing.T) {
	var h splitHarness
	s := h.split(byPartitionParity, "a")
	req := markers("7:x=0,1,2;y=3;z=9", "8:y=1,0", "7:x=5")
	resp := serve(t, s, req).(*kmsg.WriteTxnMarkersResponse)

	wantParts := map[string][]string{
		"a": {"7:x=[0 2]", "8:y=[0]"},
		"b": {"7:x=[1];y=[3]", "8:y=[1]", "7:x=[5]"},
		"c": {"7:z=[9]"},
	}
	for d, want := range wantParts {
		if len(h.got[d]) != 1 {
			t.Fatalf("destination %s handled %d parts, want 1", d, len(h.got[d]))
		}
		if got := markersRequestShape(h.got[d][0]); !reflect.DeepEqual(got, want) {
			t.Errorf("destination %s part %v, want %v", d, got, want)
		}
		if !h.got[d][0].(*kmsg.WriteTxnMarkersRequest).Markers[0].Committed {
			t.Errorf("destination %s: the markers' fields were not kept", d)
		}
	}
	want := []string{"7:x=0/100,1/201,2/102;y=3/203;z=9/309", "8:y=1/201,0/100", "7:x=5/205"}
	if got := markersShape(resp); !reflect.DeepEqual(got, want) {
		t.Errorf("joined %v, want %v", got, want)
	}
}

// TestSplitMissingDestination: the partitions of a destination without a
// handler are answered with Missing, the others by theirs; a partition a
// handler left out of its answer is UNKNOWN_SERVER_ERROR.
func TestSplitMissingDestination(t *testing.T) {
	h := splitHarness{missing: map[string]bool{"b": true}, drop: "y/0"}
	s := h.split(byPartitionParity, "a")
	resp := serve(t, s, markers("7:x=0,1;y=0,3")).(*kmsg.WriteTxnMarkersResponse)
	nl, unknown := kerr.NotLeaderForPartition.Code, kerr.UnknownServerError.Code
	want := []string{fmt.Sprintf("7:x=0/100,1/%d;y=0/%d,3/%d", nl, unknown, nl)}
	if got := markersShape(resp); !reflect.DeepEqual(got, want) {
		t.Errorf("joined %v, want %v", got, want)
	}
	if len(h.got["b"]) != 0 {
		t.Errorf("a missing destination was handed %d parts", len(h.got["b"]))
	}

	// All partitions to the missing destination: answered whole.
	resp = serve(t, s, markers("7:x=1,3")).(*kmsg.WriteTxnMarkersResponse)
	if got, want := markersShape(resp), []string{fmt.Sprintf("7:x=1/%d,3/%d", nl, nl)}; !reflect.DeepEqual(got, want) {
		t.Errorf("whole to a missing destination: %v, want %v", got, want)
	}
}

// TestSplitWholeAndEmpty: a request whose partitions all have one
// destination reaches it as it came (the same body), and a request naming
// no partition goes to Empty.
func TestSplitWholeAndEmpty(t *testing.T) {
	var h splitHarness
	s := h.split(byPartitionParity, "c")
	req := markers("7:x=0,2", "8:y=4")
	serve(t, s, req)
	if len(h.got["a"]) != 1 || h.got["a"][0] != kmsg.Request(req) || len(h.got["b"])+len(h.got["c"]) != 0 {
		t.Fatalf("one destination's request: handed %v", h.got)
	}

	s = h.split(byPartitionParity, "c")
	empty := kmsg.NewPtrDescribeProducersRequest()
	resp := serve(t, s, empty).(*kmsg.DescribeProducersResponse)
	if len(h.got["c"]) != 1 || h.got["c"][0] != kmsg.Request(empty) || len(resp.Topics) != 0 {
		t.Fatalf("an empty request: handed %v, answered %+v", h.got, resp)
	}
}

// TestSplitDescribeProducers: DescribeProducers split by partition; the
// answer lists the request's topics and partitions in its order, each
// partition's whole answer (error, message, producers) from its
// destination, and the largest throttle of the parts.
func TestSplitDescribeProducers(t *testing.T) {
	var h splitHarness
	s := h.split(byPartitionParity, "a")
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, spec := range []struct {
		topic string
		ps    []int32
	}{{"x", []int32{3, 0, 1}}, {"z", []int32{0}}, {"y", []int32{2}}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = spec.topic, spec.ps
		req.Topics = append(req.Topics, rt)
	}
	resp := serve(t, s, req).(*kmsg.DescribeProducersResponse)

	parts := map[string]string{}
	for d, got := range h.got {
		var ts []string
		for _, rt := range got[0].(*kmsg.DescribeProducersRequest).Topics {
			ts = append(ts, fmt.Sprintf("%s=%v", rt.Topic, rt.Partitions))
		}
		parts[d] = strings.Join(ts, ";")
	}
	if want := map[string]string{"a": "x=[0];y=[2]", "b": "x=[3 1]", "c": "z=[0]"}; !reflect.DeepEqual(parts, want) {
		t.Errorf("parts %v, want %v", parts, want)
	}
	var got []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s/%d:%d %s %d", rt.Topic, rp.Partition, rp.ErrorCode, *rp.ErrorMessage, rp.ActiveProducers[0].ProducerID))
		}
	}
	want := []string{"x/3:203 b 203", "x/0:100 a 100", "x/1:201 b 201", "z/0:300 c 300", "y/2:102 a 102"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("joined %v, want %v", got, want)
	}
	if resp.ThrottleMillis != 'c' {
		t.Errorf("throttle %d, want the largest part's %d", resp.ThrottleMillis, 'c')
	}
}
