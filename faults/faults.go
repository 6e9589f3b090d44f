package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kind is what a fault does.
type Kind string

const (
	// DelayRequest holds a request Delay before its handler runs; the
	// connection reads nothing else meanwhile.
	DelayRequest Kind = "delay_request"
	// DelayResponse holds a response Delay once the handler answered;
	// later responses on the connection wait behind it (order is kept).
	DelayResponse Kind = "delay_response"
	// DropRequest closes the connection instead of handling the request.
	DropRequest Kind = "drop_request"
	// DropResponse runs the handler (its writes happen), then closes the
	// connection instead of answering: the client's retry meets the
	// write already done.
	DropResponse Kind = "drop_response"
	// Error answers ErrorCode wherever the response carries an error
	// (every partition, every transaction, or the top-level code),
	// without running the handler.
	Error Kind = "error"
	// Pause stops the node reading requests until the fault is removed:
	// connections stay open, nothing is answered.
	Pause Kind = "pause"
	// Kill stops the node (its listener and connections close: clients
	// are refused) until the fault is removed, then starts it again on
	// its state (Set.SetLifecycle says which nodes can be).
	Kill Kind = "kill"
	// HoldMarkers holds the WriteTxnMarkers sent to the leader Node until
	// the fault is removed, keeping a copy of each for Replay.
	HoldMarkers Kind = "hold_markers"
)

// Kinds lists every kind, in the order the help text shows them.
var Kinds = []Kind{DelayRequest, DelayResponse, DropRequest, DropResponse, Error, Pause, Kill, HoldMarkers}

func (k Kind) perRequest() bool {
	switch k {
	case DelayRequest, DelayResponse, DropRequest, DropResponse, Error:
		return true
	}
	return false
}

// Duration is a time.Duration written in JSON as Go's duration string
// ("500ms", "10s"), so any HTTP client can send it.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string ("500ms") or a number of
// nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if json.Unmarshal(b, &n) != nil {
			return fmt.Errorf("want a duration such as \"500ms\" or \"10s\", got %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"500ms\" or \"10s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// Spec is a fault to add (the body of POST /v1/faults).
type Spec struct {
	Kind Kind  `json:"kind"`
	Node int32 `json:"node"`
	// APIKey limits a per-request fault to one API (nil: every API).
	APIKey *int16 `json:"api_key,omitempty"`
	// ErrorCode is the Kafka error code an Error fault answers.
	ErrorCode int16 `json:"error_code,omitempty"`
	// Delay is how long a delay fault holds the request or response.
	Delay Duration `json:"delay,omitempty"`
	// Count ends a per-request fault after that many requests (0: no
	// limit).
	Count int `json:"count,omitempty"`
	// For ends the fault after that long (0: until removed).
	For Duration `json:"for,omitempty"`
}

// Fault is an active fault (GET /v1/faults).
type Fault struct {
	ID uint64 `json:"id"`
	Spec
	// Remaining is what is left of Count (0 when Count is 0).
	Remaining int `json:"remaining,omitempty"`
	// Injected counts the requests (or marker requests) it acted on.
	Injected  int64      `json:"injected"`
	AddedAt   time.Time  `json:"added_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// HeldMarker is one WriteTxnMarkers request a HoldMarkers fault held: Held
// while it waits, false once released (sent). Kept for Replay.
type HeldMarker struct {
	ID      uint64        `json:"id"`
	Fault   uint64        `json:"fault"`
	Leader  int32         `json:"leader"`
	Held    bool          `json:"held"`
	HeldAt  time.Time     `json:"held_at"`
	Markers []MarkerEntry `json:"markers"`

	req    *kmsg.WriteTxnMarkersRequest
	resend Resend
}

// MarkerEntry is one transaction's marker in a held request.
type MarkerEntry struct {
	ProducerID         int64         `json:"producer_id"`
	ProducerEpoch      int16         `json:"producer_epoch"`
	Committed          bool          `json:"committed"`
	CoordinatorEpoch   int32         `json:"coordinator_epoch"`
	TransactionVersion int8          `json:"transaction_version"`
	Topics             []MarkerTopic `json:"topics"`
}

// MarkerTopic is a topic's partitions in a marker.
type MarkerTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// List is the answer of GET /v1/faults.
type List struct {
	Faults      []Fault      `json:"faults"`
	HeldMarkers []HeldMarker `json:"held_markers"`
}

// ReplayResult is a replayed marker request's answer from the leader.
type ReplayResult struct {
	Marker     uint64            `json:"marker"`
	Leader     int32             `json:"leader"`
	Version    int16             `json:"wtm_version"`
	Partitions []ReplayPartition `json:"partitions"`
}

// ReplayPartition is one partition's answer to a replayed marker.
type ReplayPartition struct {
	ProducerID int64  `json:"producer_id"`
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	ErrorCode  int16  `json:"error_code"`
	Error      string `json:"error"`
}

// Resend sends a copy of a held marker request to its leader again, past
// any hold, and returns the leader's answer.
type Resend func(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)

// Errors of Add, Remove and Replay: a bad spec (HTTP 400) and an unknown
// id (404).
var (
	ErrBadSpec  = errors.New("bad fault")
	ErrNotFound = errors.New("no such fault")
)

// maxHeldMarkers bounds the copies kept for Replay: the oldest released
// ones go first.
const maxHeldMarkers = 256

type fault struct {
	Fault
	timer *time.Timer
	// released is closed when a Pause or HoldMarkers fault ends.
	released chan struct{}
}

// Set is a process's fault table. The zero value is not usable; New.
type Set struct {
	log zerolog.Logger
	// served says whether a node is served by this process (request
	// faults and pauses); targets whether the marker sender may send
	// markers to it (holds).
	served, targets func(int32) bool
	// armed: some fault is active. The request path reads only this
	// while no fault is set.
	armed atomic.Bool

	mu     sync.Mutex
	nextID uint64
	faults []*fault // in the order added: the first match wins
	held   []*HeldMarker

	injected *prometheus.CounterVec
	active   prometheus.GaugeFunc

	// lifecycle stops and restarts nodes for Kill (nil: none can be).
	lifecycle Lifecycle
	// lifeMu orders the stops and restarts of Kill faults (taken before
	// mu): a kill removed while its node is stopping restarts it after.
	lifeMu sync.Mutex
}

// Lifecycle stops and starts nodes of the process for Kill faults.
type Lifecycle struct {
	// Killable says whether Kill may name a node.
	Killable func(node int32) bool
	// Stop closes the node's listener and connections; Start runs it
	// again on its state.
	Stop, Start func(ctx context.Context, node int32) error
	// Pause, optional, is told when a node's first Pause fault begins
	// (true) and its last ends (false): what else a stopped process
	// stops doing besides reading requests (a coordinator's etcd
	// keepalives, so its leases lapse and another takes over).
	Pause func(node int32, paused bool)
}

// SetLifecycle lets Kill faults stop and restart nodes (before any is
// added).
func (s *Set) SetLifecycle(l Lifecycle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifecycle = l
}

// lifecycleTimeout bounds stopping or starting a node for a Kill fault.
const lifecycleTimeout = time.Minute

// New returns an empty set. served says whether this process serves a
// node's listener (the nodes per-request faults and pauses may name),
// targets whether its marker sender sends markers to a node (the nodes a
// hold may name); nil accepts any id. reg, when non-nil, gets
// txncoord_faults_injected_total and txncoord_faults_active.
func New(served, targets func(int32) bool, reg prometheus.Registerer, log zerolog.Logger) *Set {
	s := &Set{log: log.With().Str("component", "faults").Logger(), served: served, targets: targets}
	s.injected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "txncoord_faults_injected_total",
		Help: "Requests (and WriteTxnMarkers requests held) that an injected fault acted on, by node and kind.",
	}, []string{"node", "kind"})
	s.active = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "txncoord_faults_active",
		Help: "Faults currently injected (/v1/faults).",
	}, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.faults))
	})
	if reg != nil {
		reg.MustRegister(s.injected, s.active)
	}
	return s
}

func (s *Set) check(sp Spec) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSpec, fmt.Sprintf(format, a...))
	}
	known := false
	for _, k := range Kinds {
		known = known || k == sp.Kind
	}
	if !known {
		return bad("kind %q: want one of %v", sp.Kind, Kinds)
	}
	if sp.Kind == Kill {
		s.mu.Lock()
		l := s.lifecycle
		dup := false
		for _, f := range s.faults {
			dup = dup || (f.Kind == Kill && f.Node == sp.Node)
		}
		s.mu.Unlock()
		if l.Killable == nil || !l.Killable(sp.Node) {
			return bad("node %d cannot be killed here: kill takes a node this process runs (txncoord up's leaders and coordinators, or a coordinator or leader process's own node)", sp.Node)
		}
		if dup {
			return bad("node %d is killed already", sp.Node)
		}
	}
	if sp.Kind == HoldMarkers {
		if s.targets != nil && !s.targets(sp.Node) {
			return bad("node %d: no such node in the cluster", sp.Node)
		}
	} else if s.served != nil && !s.served(sp.Node) {
		return bad("node %d: not a node of this process (its own admin API injects its faults)", sp.Node)
	}
	if sp.Count < 0 || sp.For < 0 || sp.Delay < 0 {
		return bad("count, for and delay must not be negative")
	}
	if !sp.Kind.perRequest() && (sp.APIKey != nil || sp.Count != 0) {
		return bad("%s takes no api_key or count (it acts on the whole node; end it with for or by removing it)", sp.Kind)
	}
	if sp.APIKey != nil && kmsg.NameForKey(*sp.APIKey) == "Unknown" {
		return bad("api_key %d: not a Kafka API key", *sp.APIKey)
	}
	if (sp.Kind == DelayRequest || sp.Kind == DelayResponse) != (sp.Delay > 0) {
		if sp.Delay > 0 {
			return bad("delay applies only to delay_request and delay_response")
		}
		return bad("%s needs a delay, such as \"500ms\"", sp.Kind)
	}
	if sp.Kind == Error {
		if sp.ErrorCode == 0 || kerr.ErrorForCode(sp.ErrorCode) == nil || kerr.ErrorForCode(sp.ErrorCode) == kerr.UnknownServerError && sp.ErrorCode != -1 {
			return bad("error_code %d: want a Kafka error code, such as 6 (NOT_LEADER_OR_FOLLOWER) or 15 (COORDINATOR_NOT_AVAILABLE)", sp.ErrorCode)
		}
	} else if sp.ErrorCode != 0 {
		return bad("error_code applies only to kind error")
	}
	return nil
}

// Add adds a fault and returns it with its id.
func (s *Set) Add(sp Spec) (Fault, error) {
	if sp.Kind == Kill {
		s.lifeMu.Lock()
		defer s.lifeMu.Unlock()
	}
	if err := s.check(sp); err != nil {
		return Fault{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	f := &fault{Fault: Fault{ID: s.nextID, Spec: sp, Remaining: sp.Count, AddedAt: time.Now()}}
	if sp.Kind == Pause || sp.Kind == HoldMarkers {
		f.released = make(chan struct{})
	}
	firstPause := sp.Kind == Pause && !s.pausedLocked(sp.Node)
	s.faults = append(s.faults, f)
	s.armed.Store(true)
	if firstPause && s.lifecycle.Pause != nil {
		s.lifecycle.Pause(sp.Node, true)
	}
	if sp.Kind == Kill {
		// Stopped outside the lock: the node's connections end, and its
		// handlers may ask the set about requests meanwhile.
		stop := s.lifecycle.Stop
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
		err := stop(ctx, sp.Node)
		cancel()
		s.mu.Lock()
		if err != nil {
			for i, g := range s.faults {
				if g == f {
					s.faults = append(s.faults[:i], s.faults[i+1:]...)
				}
			}
			s.armed.Store(len(s.faults) > 0)
			return Fault{}, fmt.Errorf("kill node %d: %w", sp.Node, err)
		}
		f.Injected++
		s.count(f)
	}
	if sp.For > 0 {
		at := time.Now().Add(time.Duration(sp.For))
		f.ExpiresAt = &at
		id := f.ID
		f.timer = time.AfterFunc(time.Duration(sp.For), func() { s.remove(id, "expired") })
	}
	ev := s.log.Warn().Uint64("fault", f.ID).Str("kind", string(sp.Kind)).Int32("node", sp.Node)
	if sp.APIKey != nil {
		ev = ev.Str("api", kmsg.NameForKey(*sp.APIKey))
	}
	ev.Int16("error_code", sp.ErrorCode).Dur("delay", time.Duration(sp.Delay)).Int("count", sp.Count).
		Dur("for", time.Duration(sp.For)).Msg("fault injected")
	return f.Fault, nil
}

// List returns the active faults and the held marker requests.
func (s *Set) List() List {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := List{Faults: make([]Fault, 0, len(s.faults)), HeldMarkers: make([]HeldMarker, 0, len(s.held))}
	for _, f := range s.faults {
		l.Faults = append(l.Faults, f.Fault)
	}
	for _, h := range s.held {
		l.HeldMarkers = append(l.HeldMarkers, *h)
	}
	return l
}

// Remove ends one fault: a paused node resumes, held markers are sent.
func (s *Set) Remove(id uint64) error {
	if !s.remove(id, "removed") {
		return fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return nil
}

// Clear ends every fault and forgets the held marker copies.
func (s *Set) Clear() {
	s.mu.Lock()
	ids := make([]uint64, 0, len(s.faults))
	for _, f := range s.faults {
		ids = append(ids, f.ID)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.remove(id, "cleared")
	}
	s.mu.Lock()
	kept := s.held[:0]
	for _, h := range s.held {
		if h.Held { // a fault added meanwhile holds it
			kept = append(kept, h)
		}
	}
	s.held = kept
	s.mu.Unlock()
}

func (s *Set) remove(id uint64, why string) bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.mu.Lock()
	for i, f := range s.faults {
		if f.ID != id {
			continue
		}
		s.removeLocked(i, why)
		start := s.lifecycle.Start
		s.mu.Unlock()
		if f.Kind == Kill {
			ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
			err := start(ctx, f.Node)
			cancel()
			if err != nil {
				s.log.Error().Err(err).Uint64("fault", f.ID).Int32("node", f.Node).Msg("restart of a killed node failed")
			} else {
				s.log.Warn().Uint64("fault", f.ID).Int32("node", f.Node).Msg("killed node restarted on its state")
			}
		}
		return true
	}
	s.mu.Unlock()
	return false
}

func (s *Set) removeLocked(i int, why string) {
	f := s.faults[i]
	s.faults = append(s.faults[:i], s.faults[i+1:]...)
	if f.timer != nil {
		f.timer.Stop()
	}
	if f.released != nil {
		close(f.released)
	}
	if f.Kind == Pause && !s.pausedLocked(f.Node) && s.lifecycle.Pause != nil {
		s.lifecycle.Pause(f.Node, false)
	}
	s.armed.Store(len(s.faults) > 0)
	s.log.Warn().Uint64("fault", f.ID).Str("kind", string(f.Kind)).Int32("node", f.Node).Int64("injected", f.Injected).
		Str("reason", why).Msg("fault ended")
}

// pausedLocked reports whether a Pause fault holds node.
func (s *Set) pausedLocked(node int32) bool {
	for _, f := range s.faults {
		if f.Kind == Pause && f.Node == node {
			return true
		}
	}
	return false
}

// Close ends every fault: what waits on one goes on. A nil set has none.
func (s *Set) Close() {
	if s != nil {
		s.Clear()
	}
}

// Armed reports whether any fault is set (one atomic load; false for a nil
// set).
func (s *Set) Armed() bool { return s != nil && s.armed.Load() }

// Node is the handle of one node's listener on the set.
type Node struct {
	set *Set
	id  int32
}

// Node returns node id's handle; nil for a nil set.
func (s *Set) Node(id int32) *Node {
	if s == nil {
		return nil
	}
	return &Node{set: s, id: id}
}

// Armed reports whether any fault is set (one atomic load): the caller
// asks Request only then.
func (n *Node) Armed() bool { return n != nil && n.set.armed.Load() }

// Decision is what to do with one request.
type Decision struct {
	// Kind is DelayResponse, DropRequest, DropResponse or Error, or ""
	// to serve the request as usual (a DelayRequest has been waited for
	// already).
	Kind      Kind
	Delay     time.Duration
	ErrorCode int16
	Fault     uint64
	// Stopped: stop closed while the node was paused or a request
	// delayed; the caller gives up on the request.
	Stopped bool
}

// Request is called before a request of key is handled: it waits while the
// node is paused and while a DelayRequest delays it (until stop or also
// closes; a nil channel never does), and returns what else a fault wants
// done with it. The first matching fault wins; its count goes down by one.
func (n *Node) Request(stop, also <-chan struct{}, key int16) Decision {
	s := n.set
	for {
		s.mu.Lock()
		var paused chan struct{}
		for _, f := range s.faults {
			if f.Kind == Pause && f.Node == n.id {
				if paused == nil {
					f.Injected++
					s.count(f)
				}
				paused = f.released
				break
			}
		}
		if paused == nil {
			break // s.mu held
		}
		s.mu.Unlock()
		select {
		case <-paused:
		case <-stop:
			return Decision{Stopped: true}
		case <-also:
			return Decision{Stopped: true}
		}
	}
	var d Decision
	for i, f := range s.faults {
		if !f.Kind.perRequest() || f.Node != n.id || (f.APIKey != nil && *f.APIKey != key) {
			continue
		}
		d = Decision{Kind: f.Kind, Delay: time.Duration(f.Delay), ErrorCode: f.ErrorCode, Fault: f.ID}
		f.Injected++
		s.count(f)
		s.log.Info().Uint64("fault", f.ID).Str("kind", string(f.Kind)).Int32("node", n.id).Str("api", kmsg.NameForKey(key)).
			Int16("error_code", f.ErrorCode).Dur("delay", time.Duration(f.Delay)).Msg("fault acted on a request")
		if f.Count > 0 {
			if f.Remaining--; f.Remaining == 0 {
				s.removeLocked(i, "count reached")
			}
		}
		break
	}
	s.mu.Unlock()
	if d.Kind == DelayRequest {
		t := time.NewTimer(d.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-stop:
			return Decision{Stopped: true}
		case <-also:
			return Decision{Stopped: true}
		}
		return Decision{}
	}
	return d
}

func (s *Set) count(f *fault) {
	s.injected.WithLabelValues(fmt.Sprint(f.Node), string(f.Kind)).Inc()
}

// HoldMarkers is called by the marker sender before it sends req to
// leader: while a HoldMarkers fault holds that leader it keeps a copy of
// req (for Replay, through resend) and waits until the fault ends or ctx
// is done (then it returns ctx.Err() and req must not be sent).
func (s *Set) HoldMarkers(ctx context.Context, leader int32, req *kmsg.WriteTxnMarkersRequest, resend Resend) error {
	if !s.Armed() {
		return nil
	}
	s.mu.Lock()
	var hold *fault
	for _, f := range s.faults {
		if f.Kind == HoldMarkers && f.Node == leader {
			hold = f
			break
		}
	}
	if hold == nil {
		s.mu.Unlock()
		return nil
	}
	hold.Injected++
	s.count(hold)
	s.nextID++
	h := &HeldMarker{ID: s.nextID, Fault: hold.ID, Leader: leader, Held: true, HeldAt: time.Now(), req: copyMarkers(req), resend: resend}
	h.Markers = describe(h.req)
	s.held = append(s.held, h)
	if len(s.held) > maxHeldMarkers {
		for i, old := range s.held {
			if !old.Held {
				s.held = append(s.held[:i], s.held[i+1:]...)
				break
			}
		}
	}
	released := hold.released
	s.mu.Unlock()
	s.log.Info().Uint64("fault", hold.ID).Uint64("marker", h.ID).Int32("leader", leader).Int("markers", len(req.Markers)).
		Msg("fault holds a WriteTxnMarkers request")
	select {
	case <-released:
	case <-ctx.Done():
	}
	s.mu.Lock()
	h.Held = false
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	s.log.Info().Uint64("fault", hold.ID).Uint64("marker", h.ID).Int32("leader", leader).Msg("held WriteTxnMarkers request released")
	return nil
}

// Replay sends a copy of held marker request id to its leader again (a
// late or duplicate marker) and returns the leader's answer.
func (s *Set) Replay(ctx context.Context, id uint64) (ReplayResult, error) {
	s.mu.Lock()
	var h *HeldMarker
	for _, x := range s.held {
		if x.ID == id {
			h = x
		}
	}
	s.mu.Unlock()
	if h == nil {
		return ReplayResult{}, fmt.Errorf("%w: no held marker %d", ErrNotFound, id)
	}
	req := copyMarkers(h.req)
	resp, err := h.resend(ctx, req)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("replay marker %d to leader %d: %w", id, h.Leader, err)
	}
	r := ReplayResult{Marker: id, Leader: h.Leader, Version: req.Version, Partitions: []ReplayPartition{}}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				name := ""
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					name = e.(*kerr.Error).Message
				}
				r.Partitions = append(r.Partitions, ReplayPartition{ProducerID: m.ProducerID, Topic: t.Topic, Partition: p.Partition, ErrorCode: p.ErrorCode, Error: name})
			}
		}
	}
	sort.Slice(r.Partitions, func(i, j int) bool {
		a, b := r.Partitions[i], r.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	s.count(&fault{Fault: Fault{Spec: Spec{Node: h.Leader, Kind: "replay_marker"}}})
	s.log.Warn().Uint64("marker", id).Int32("leader", h.Leader).Int16("wtm_version", req.Version).
		Interface("partitions", r.Partitions).Msg("held WriteTxnMarkers request replayed")
	return r, nil
}

func copyMarkers(req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersRequest {
	c := kmsg.NewPtrWriteTxnMarkersRequest()
	c.Version = req.Version
	for _, m := range req.Markers {
		cm := m
		cm.Topics = nil
		for _, t := range m.Topics {
			ct := t
			ct.Partitions = append([]int32(nil), t.Partitions...)
			cm.Topics = append(cm.Topics, ct)
		}
		c.Markers = append(c.Markers, cm)
	}
	return c
}

func describe(req *kmsg.WriteTxnMarkersRequest) []MarkerEntry {
	out := make([]MarkerEntry, 0, len(req.Markers))
	for _, m := range req.Markers {
		e := MarkerEntry{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Committed: m.Committed,
			CoordinatorEpoch: m.CoordinatorEpoch, TransactionVersion: m.TransactionVersion}
		for _, t := range m.Topics {
			e.Topics = append(e.Topics, MarkerTopic{Topic: t.Topic, Partitions: append([]int32(nil), t.Partitions...)})
		}
		out = append(out, e)
	}
	return out
}
