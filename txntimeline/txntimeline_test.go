package txntimeline

import (
	"fmt"
	"testing"
)

// TestTimelineKeepsTheLastEvents: an id keeps its last Events events,
// oldest first.
func TestTimelineKeepsTheLastEvents(t *testing.T) {
	r := New(0)
	for i := 0; i < Events+10; i++ {
		r.Record("a", Event{AtMs: int64(i), Kind: PartitionAdded, Partition: int32(i)})
	}
	got := r.Timeline("a")
	if len(got) != Events || got[0].AtMs != 10 || got[len(got)-1].AtMs != Events+9 {
		t.Fatalf("kept %d events from %d to %d, want %d from 10 to %d", len(got), got[0].AtMs, got[len(got)-1].AtMs, Events, Events+9)
	}
	if r.Timeline("b") != nil {
		t.Fatal("an id never recorded has a timeline")
	}
	var none *Recorder
	none.Record("a", Event{})
	if none.Timeline("a") != nil {
		t.Fatal("a nil Recorder keeps events")
	}
}

// TestTimelineRecyclesTheOldestID: past its bound the recorder forgets the
// oldest ids and keeps the newest, whose timelines start empty.
func TestTimelineRecyclesTheOldestID(t *testing.T) {
	r := New(shards * 2)
	n := shards * 20
	for i := 0; i < n; i++ {
		r.Record(fmt.Sprint("id-", i), Event{AtMs: int64(i), Kind: InitProducerID})
		r.Record(fmt.Sprint("id-", i), Event{AtMs: int64(i), Kind: Prepare})
	}
	kept := 0
	for i := 0; i < n; i++ {
		if tl := r.Timeline(fmt.Sprint("id-", i)); tl != nil {
			kept++
			if len(tl) != 2 || tl[0].AtMs != int64(i) || tl[0].Kind != InitProducerID || tl[1].Kind != Prepare {
				t.Fatalf("id-%d: %+v, want its own two events (a recycled ring starts empty)", i, tl)
			}
		}
	}
	if kept != shards*2 {
		t.Fatalf("%d ids kept, want the bound %d", kept, shards*2)
	}
	if r.Timeline(fmt.Sprint("id-", n-1)) == nil {
		t.Fatal("the newest id was not kept")
	}
}

// TestRecordAllocatesNothing: recording for an id that has a ring, or
// recycling the oldest one's, allocates nothing.
func TestRecordAllocatesNothing(t *testing.T) {
	r := New(shards)
	ids := make([]string, shards*4)
	for i := range ids {
		ids[i] = fmt.Sprint("txn-", i)
	}
	for _, id := range ids {
		r.Record(id, Event{Kind: InitProducerID})
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		r.Record(ids[i%len(ids)], Event{Kind: MarkerSent, Topic: "orders", Version: 2})
		i++
	})
	if allocs != 0 {
		t.Fatalf("Record allocates %.1f times per event, want 0", allocs)
	}
}
