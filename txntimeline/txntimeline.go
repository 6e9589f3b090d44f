package txntimeline

import (
	"hash/maphash"
	"sync"
)

// Kind is what an event records.
type Kind uint8

// The kinds of events, in the order a transaction usually meets them.
const (
	// InitProducerID: the id got ProducerID and Epoch.
	InitProducerID Kind = iota + 1
	// PartitionAdded: Topic/Partition joined the transaction
	// (AddPartitionsToTxn, or a leader's registration under TV2).
	PartitionAdded
	// Prepare: EndTxn decided (Commit or not) and persisted Prepare*.
	Prepare
	// MarkerSent: the marker for Topic/Partition went to Leader with
	// WriteTxnMarkers Version.
	MarkerSent
	// MarkerAnswered: Leader answered ErrorCode (0: written) for
	// Topic/Partition; ErrorCode NoAnswer when the request got none.
	MarkerAnswered
	// Complete: Complete* persisted.
	Complete
)

// NoAnswer is MarkerAnswered's ErrorCode for a request that got no answer
// (connection closed or timed out).
const NoAnswer int16 = -1

var kindNames = [...]string{InitProducerID: "InitProducerId", PartitionAdded: "PartitionAdded", Prepare: "Prepare",
	MarkerSent: "MarkerSent", MarkerAnswered: "MarkerAnswered", Complete: "Complete"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Unknown"
}

// Event is one step of a transaction. Fields a kind does not use are zero.
type Event struct {
	AtMs       int64
	Kind       Kind
	Commit     bool
	Epoch      int16
	Version    int16
	ErrorCode  int16
	Leader     int32
	Partition  int32
	ProducerID int64
	Topic      string
}

// Events is how many events each id keeps (the last ones).
const Events = 64

// MaxIDs is how many ids keep a timeline at once by default.
const MaxIDs = 2048

const shards = 32

// Recorder keeps the timelines. Its methods are safe for concurrent use.
type Recorder struct {
	seed   maphash.Seed
	perIDs int
	shards [shards]shard
}

type shard struct {
	mu    sync.Mutex
	rings map[string]*ring
	// order is the ids holding a ring, oldest first from next: the one
	// at next is recycled when the shard is full.
	order []string
	next  int
}

type ring struct {
	events [Events]Event
	n      uint64 // events ever recorded
}

// New returns a Recorder keeping the timelines of up to maxIDs ids
// (MaxIDs when maxIDs <= 0).
func New(maxIDs int) *Recorder {
	if maxIDs <= 0 {
		maxIDs = MaxIDs
	}
	r := &Recorder{seed: maphash.MakeSeed(), perIDs: max(1, maxIDs/shards)}
	for i := range r.shards {
		r.shards[i].rings = map[string]*ring{}
	}
	return r
}

func (r *Recorder) shard(id string) *shard {
	return &r.shards[maphash.String(r.seed, id)%shards]
}

// Record appends ev to id's timeline. The id's string is kept as given:
// callers pass strings they do not change (Go strings never change).
func (r *Recorder) Record(id string, ev Event) {
	if r == nil {
		return
	}
	s := r.shard(id)
	s.mu.Lock()
	rg := s.rings[id]
	if rg == nil {
		rg = s.ringFor(id, r.perIDs)
	}
	rg.events[rg.n%Events] = ev
	rg.n++
	s.mu.Unlock()
}

// ringFor gives id a ring: a new one while the shard has room, else the
// oldest id's, emptied. s must be locked.
func (s *shard) ringFor(id string, limit int) *ring {
	var rg *ring
	if len(s.order) < limit {
		rg = new(ring)
		s.order = append(s.order, id)
	} else {
		old := s.order[s.next]
		rg = s.rings[old]
		delete(s.rings, old)
		rg.n = 0
		s.order[s.next] = id
		s.next = (s.next + 1) % len(s.order)
	}
	s.rings[id] = rg
	return rg
}

// Timeline is id's events, oldest first (nil: none kept).
func (r *Recorder) Timeline(id string) []Event {
	if r == nil {
		return nil
	}
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	rg := s.rings[id]
	if rg == nil {
		return nil
	}
	first := uint64(0)
	if rg.n > Events {
		first = rg.n - Events
	}
	out := make([]Event, 0, rg.n-first)
	for i := first; i < rg.n; i++ {
		out = append(out, rg.events[i%Events])
	}
	return out
}
