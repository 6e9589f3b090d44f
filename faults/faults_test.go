package faults

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func key(k int16) *int16 { return &k }

func TestSpecChecks(t *testing.T) {
	s := New(func(n int32) bool { return n <= 2 }, func(n int32) bool { return n <= 2 }, nil, zerolog.Nop())
	for _, sp := range []Spec{
		{Kind: "explode", Node: 1},
		{Kind: Error, Node: 1},                           // no code
		{Kind: Error, Node: 1, ErrorCode: 9999},          // unknown code
		{Kind: DelayRequest, Node: 1},                    // no delay
		{Kind: Pause, Node: 1, Count: 3},                 // count on a pause
		{Kind: HoldMarkers, Node: 1, APIKey: key(27)},    // api key on a hold
		{Kind: DropRequest, Node: 9},                     // no such node
		{Kind: DropRequest, Node: 1, APIKey: key(30000)}, // no such API
		{Kind: DropRequest, Node: 1, Delay: Duration(1)}, // delay on a drop
		{Kind: DropRequest, Node: 1, ErrorCode: 6},       // code on a drop
		{Kind: DropResponse, Node: 1, Count: -1},         // negative count
	} {
		if _, err := s.Add(sp); !errors.Is(err, ErrBadSpec) {
			t.Errorf("Add(%+v): %v, want ErrBadSpec", sp, err)
		}
	}
	if s.Armed() {
		t.Error("armed after refused specs only")
	}
}

func TestRequestCountsAndMatching(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(nil, nil, reg, zerolog.Nop())
	n1, n2 := s.Node(1), s.Node(2)
	if n1.Armed() {
		t.Fatal("armed with no fault")
	}
	f, err := s.Add(Spec{Kind: Error, Node: 1, APIKey: key(0), ErrorCode: 6, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !n1.Armed() {
		t.Fatal("not armed after Add")
	}
	if d := n2.Request(nil, nil, 0); d.Kind != "" {
		t.Errorf("node 2 got %+v from node 1's fault", d)
	}
	if d := n1.Request(nil, nil, 1); d.Kind != "" {
		t.Errorf("Fetch got %+v from a Produce fault", d)
	}
	for i := range 2 {
		if d := n1.Request(nil, nil, 0); d.Kind != Error || d.ErrorCode != 6 || d.Fault != f.ID {
			t.Errorf("produce %d: %+v", i, d)
		}
	}
	if d := n1.Request(nil, nil, 0); d.Kind != "" {
		t.Errorf("after the count: %+v", d)
	}
	if s.Armed() || len(s.List().Faults) != 0 {
		t.Errorf("fault left after its count: %+v", s.List())
	}
	var m dto.Metric
	if err := s.injected.WithLabelValues("1", "error").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 2 {
		t.Errorf("injected counter %v, want 2", got)
	}
}

func TestPauseWaitsUntilRemoved(t *testing.T) {
	s := New(nil, nil, nil, zerolog.Nop())
	f, err := s.Add(Spec{Kind: Pause, Node: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Decision)
	go func() { done <- s.Node(1).Request(nil, nil, 0) }()
	stop := make(chan struct{})
	close(stop)
	if d := s.Node(1).Request(stop, nil, 0); !d.Stopped {
		t.Errorf("a paused request whose connection stops: %+v, want Stopped", d)
	}
	if err := s.Remove(f.ID); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d.Stopped || d.Kind != "" {
		t.Errorf("after resume: %+v", d)
	}
	if err := s.Remove(f.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: %v", err)
	}
}

func TestHoldReleaseReplay(t *testing.T) {
	s := New(nil, nil, nil, zerolog.Nop())
	f, err := s.Add(Spec{Kind: HoldMarkers, Node: 1})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 7, 3, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "t", []int32{2}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	var resent []*kmsg.WriteTxnMarkersRequest
	resend := func(_ context.Context, r *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		resent = append(resent, r)
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = r.Markers[0].ProducerID
		rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		rt.Topic = "t"
		rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		rp.Partition, rp.ErrorCode = 2, 47
		rt.Partitions = append(rt.Partitions, rp)
		rm.Topics = append(rm.Topics, rt)
		resp.Markers = append(resp.Markers, rm)
		return resp, nil
	}
	if err := s.HoldMarkers(context.Background(), 2, req, resend); err != nil {
		t.Fatalf("a leader without a hold: %v", err)
	}
	released := make(chan error)
	go func() { released <- s.HoldMarkers(context.Background(), 1, req, resend) }()
	var id uint64
	for id == 0 {
		for _, h := range s.List().HeldMarkers {
			if h.Held {
				id = h.ID
			}
		}
	}
	req.Markers[0].Topics[0].Partitions[0] = 99 // the sender's request is its own
	if err := s.Remove(f.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatalf("released hold: %v", err)
	}
	r, err := s.Replay(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(resent) != 1 || resent[0].Markers[0].ProducerEpoch != 3 || resent[0].Markers[0].Topics[0].Partitions[0] != 2 {
		t.Errorf("replayed %+v, want the held copy", resent)
	}
	if len(r.Partitions) != 1 || r.Partitions[0].ErrorCode != 47 || r.Partitions[0].Error != "INVALID_PRODUCER_EPOCH" || r.Leader != 1 {
		t.Errorf("replay result %+v", r)
	}
	if l := s.List(); len(l.HeldMarkers) != 1 || l.HeldMarkers[0].Held {
		t.Errorf("held markers after release: %+v", l.HeldMarkers)
	}
	s.Clear()
	if _, err := s.Replay(context.Background(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("replay after Clear: %v", err)
	}
}

func TestKillStopsAndRestarts(t *testing.T) {
	s := New(nil, nil, nil, zerolog.Nop())
	if _, err := s.Add(Spec{Kind: Kill, Node: 1}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("kill without a lifecycle: %v, want ErrBadSpec", err)
	}
	var calls []string
	s.SetLifecycle(Lifecycle{
		Killable: func(n int32) bool { return n == 1 },
		Stop:     func(_ context.Context, n int32) error { calls = append(calls, "stop"); return nil },
		Start:    func(_ context.Context, n int32) error { calls = append(calls, "start"); return nil },
	})
	if _, err := s.Add(Spec{Kind: Kill, Node: 2}); !errors.Is(err, ErrBadSpec) {
		t.Errorf("kill of a node that cannot be: %v, want ErrBadSpec", err)
	}
	f, err := s.Add(Spec{Kind: Kill, Node: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(Spec{Kind: Kill, Node: 1}); !errors.Is(err, ErrBadSpec) {
		t.Errorf("second kill of node 1: %v, want ErrBadSpec", err)
	}
	if len(calls) != 1 || calls[0] != "stop" {
		t.Fatalf("after kill: %v", calls)
	}
	if err := s.Remove(f.ID); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[1] != "start" {
		t.Errorf("after removing the kill: %v", calls)
	}
}
