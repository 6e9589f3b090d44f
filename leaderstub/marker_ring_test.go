package leaderstub

import "testing"

// TestMarkerRing: the ring keeps the last receivedMarkersCap markers in the
// order they came, across its wrap, and stops growing at the cap.
func TestMarkerRing(t *testing.T) {
	var r markerRing
	if got := r.all(); len(got) != 0 {
		t.Fatalf("empty ring: %d markers", len(got))
	}
	add := func(from, n int) {
		ms := make([]ReceivedMarker, n)
		for i := range ms {
			ms[i] = ReceivedMarker{ProducerID: int64(from + i)}
		}
		r.add(ms)
	}
	check := func(first, n int) {
		t.Helper()
		got := r.all()
		if len(got) != n {
			t.Fatalf("%d markers, want %d", len(got), n)
		}
		for i, m := range got {
			if m.ProducerID != int64(first+i) {
				t.Fatalf("marker %d is producer %d, want %d", i, m.ProducerID, first+i)
			}
		}
	}
	add(0, 3)
	check(0, 3)
	add(3, receivedMarkersCap-3)
	check(0, receivedMarkersCap)
	add(receivedMarkersCap, 7) // wraps: the 7 oldest go
	check(7, receivedMarkersCap)
	add(receivedMarkersCap+7, 2*receivedMarkersCap+5) // more than a whole ring in one call
	check(2*receivedMarkersCap+12, receivedMarkersCap)
	if cap(r.buf) > receivedMarkersCap+receivedMarkersCap/4 {
		t.Fatalf("ring array grew to %d for a cap of %d", cap(r.buf), receivedMarkersCap)
	}
	// A copy, not the ring: writing to it changes nothing.
	got := r.all()
	got[0].ProducerID = -1
	if r.all()[0].ProducerID == -1 {
		t.Fatal("all returned the ring's own array")
	}
}
