package groups

import (
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The pure core: every group, its members and offsets, and the producer
// state of each __consumer_offsets partition, changed only by the step
// methods below. A step takes `now` and plain values and returns plain
// values; what it changed that must be stored is collected as ops
// (take), and the answers to requests that were waiting (a JoinGroup
// until the rebalance completes, a SyncGroup until the leader's
// assignment) as Answers. No clock, no channels, no I/O: the shell
// (coordinator.go) appends the ops to the log and releases the answers
// once they are durable, in the etcd raft manner.
//
// Where this differs from Kafka's ClassicGroup / GroupMetadataManager:
//   - one lock over every group (the shell's), not one per
//     __consumer_offsets partition;
//   - members that joined but never synced are removed at the sync
//     deadline (Kafka's pending-sync timeout) the same way;
//   - an offset commit's retention time (v2–v4) is ignored: every offset
//     expires by offsets.retention.minutes, counted for an Empty consumer
//     group from when it became Empty, else from the commit (Kafka
//     ignores it too since 2.1 for groups it expires that way);
//   - a JoinGroup from a member that already waits in a join answers the
//     earlier one REBALANCE_IN_PROGRESS (Kafka drops it unanswered).

// State is a classic group's state (Kafka's ClassicGroupState).
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[s]
}

// Type is a group's protocol family. Only TypeClassic is served; the map
// of groups keeps the field so that KIP-848 "consumer" groups can live
// beside classic ones.
type Type string

const (
	TypeClassic  Type = "classic"
	TypeConsumer Type = "consumer"
)

// Protocol is one protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member is one member of a classic group.
type Member struct {
	ID, InstanceID, ClientID, ClientHost string
	ProtocolType                         string
	Protocols                            []Protocol
	SessionTimeout, RebalanceTimeout     time.Duration
	Assignment                           []byte

	heartbeatDeadline time.Time
	// joinToken / syncToken name the JoinGroup / SyncGroup this member
	// waits in (0: none); its answer is an Answer with that token.
	joinToken, syncToken uint64
}

func (m *Member) metadataFor(protocol string) []byte {
	for _, p := range m.Protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// Group is one group: its classic membership and its offsets.
type Group struct {
	ID           string
	Type         Type
	State        State
	StateSince   time.Time
	ProtocolType string
	Protocol     string
	Generation   int32
	Leader       string
	Members      map[string]*Member
	Static       map[string]string    // group.instance.id → member id
	Pending      map[string]time.Time // KIP-394: member ids given out, not yet joined, until
	Offsets      map[TP]Offset
	// Txn holds transactional offsets not yet committed by a marker, by
	// producer id.
	Txn map[int64]map[TP]Offset

	joinDeadline  time.Time // PreparingRebalance: complete the join by then
	initialPhase  bool      // the join waits out the initial rebalance delay
	initialLimit  time.Time // the initial delay is extended up to this
	syncDeadline  time.Time // CompletingRebalance: members must sync by then
	pendingSync   map[string]bool
	partition     int32 // its __consumer_offsets partition
	metadataDirty bool  // store the group's metadata at the end of the step
	// consumer is the KIP-848 state of a TypeConsumer group (consumer.go).
	consumer *consumerGroup
}

func (g *Group) setState(s State, now time.Time) {
	g.State = s
	g.StateSince = now
}

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

// Offset is a committed (or pending transactional) offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
	// Record is the position of the commit in its __consumer_offsets
	// partition: a transaction's offsets replace a committed offset at
	// its COMMIT marker only if they were written after it, as Kafka
	// compares log offsets.
	Record int64
	// ProducerEpoch is the epoch a pending transactional offset was
	// written with.
	ProducerEpoch int16
}

// Timeouts are the group coordinator's settings (Kafka's names).
type Timeouts struct {
	MinSession            time.Duration // group.min.session.timeout.ms (6 s)
	MaxSession            time.Duration // group.max.session.timeout.ms (30 min)
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms (Open takes it from the cluster view; 0: none)
	OffsetsRetention      time.Duration // offsets.retention.minutes (7 days)
	ConsumerSession       time.Duration // group.consumer.session.timeout.ms (45 s)
	ConsumerHeartbeat     time.Duration // group.consumer.heartbeat.interval.ms (5 s)
	// ShareSession and ShareHeartbeat are the share groups' defaults
	// (group.share.session.timeout.ms 45 s, group.share.heartbeat.interval.ms
	// 5 s; 0: those), which a group's share.* configs override.
	ShareSession   time.Duration
	ShareHeartbeat time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.MinSession <= 0 {
		t.MinSession = 6 * time.Second
	}
	if t.MaxSession <= 0 {
		t.MaxSession = 30 * time.Minute
	}
	if t.OffsetsRetention <= 0 {
		t.OffsetsRetention = 7 * 24 * time.Hour
	}
	if t.ConsumerSession <= 0 {
		t.ConsumerSession = 45 * time.Second
	}
	if t.ConsumerHeartbeat <= 0 {
		t.ConsumerHeartbeat = 5 * time.Second
	}
	return t
}

// Answer is the answer to a request that waited.
type Answer struct {
	Token uint64
	Join  *JoinResult
	Sync  *SyncResult
	// SupersededBy, when set, is the request of the same member that
	// took the waiting place of request Token: Kafka (ClassicGroup's
	// updateMember and the SyncGroup of CompletingRebalance) replaces the
	// waiting future and never completes the earlier one, so Token gets
	// no answer of its own (the shell: see Coordinator.flushLocked).
	SupersededBy uint64
}

// Event is something a step reports for the log: a rebalance (info) or a
// refusal (debug).
type Event struct {
	Group string
	Info  bool
	Msg   string
	// Rebalance counts a completed rebalance (the metric).
	Rebalance bool
}

// Core is the state of the group coordinator.
type Core struct {
	t          Timeouts
	partitions int32
	newID      func() string
	groups     map[string]*Group
	parts      map[int32]*offsetsPartition
	// shareGroups are the share groups (share.go), apart from groups:
	// an id is one type or the other.
	shareGroups map[string]*shareGroup
	// shareDirty are the share groups changed since the last Take (a
	// record each: put, or delete when gone).
	shareDirty map[string]bool

	answers []Answer
	events  []Event
	ops     []op
	deleted map[string]bool // groups deleted in this step
}

// NewCore returns an empty core. partitions is the partition count of
// __consumer_offsets; newID returns a fresh suffix for member ids (a UUID
// in production).
func NewCore(t Timeouts, partitions int32, newID func() string) *Core {
	return &Core{t: t.withDefaults(), partitions: partitions, newID: newID,
		groups: map[string]*Group{}, parts: map[int32]*offsetsPartition{}, deleted: map[string]bool{},
		shareGroups: map[string]*shareGroup{}, shareDirty: map[string]bool{}}
}

// Out is what a step produced.
type Out struct {
	Answers []Answer
	Events  []Event
	Ops     []op
}

// Take returns and clears what the steps since the last Take produced,
// with the metadata of every group they changed.
func (c *Core) Take() Out {
	for _, g := range c.groups {
		if g.metadataDirty {
			g.metadataDirty = false
			c.ops = append(c.ops, putGroupOp(g))
		}
	}
	for id := range c.deleted {
		if c.groups[id] == nil {
			c.ops = append(c.ops, op{bucket: bucketGroups, key: []byte(id)})
		}
	}
	clear(c.deleted)
	c.shareOps()
	out := Out{Answers: c.answers, Events: c.events, Ops: c.ops}
	c.answers, c.events, c.ops = nil, nil, nil
	return out
}

// Group returns a group (nil if none); read-only for callers.
func (c *Core) Group(id string) *Group { return c.groups[id] }

// GroupIDs returns the ids of every group, sorted.
func (c *Core) GroupIDs() []string {
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (c *Core) event(g string, info bool, msg string) {
	c.events = append(c.events, Event{Group: g, Info: info, Msg: msg})
}

func (c *Core) newGroup(id string, now time.Time) *Group {
	g := &Group{ID: id, Type: TypeClassic, State: Empty, StateSince: now,
		Members: map[string]*Member{}, Static: map[string]string{}, Pending: map[string]time.Time{},
		Offsets: map[TP]Offset{}, Txn: map[int64]map[TP]Offset{}, partition: c.partitionOf(id)}
	c.groups[id] = g
	delete(c.deleted, id)
	return g
}

func (c *Core) deleteGroup(g *Group) {
	delete(c.groups, g.ID)
	c.deleted[g.ID] = true
	g.State = Dead
}

// ---- JoinGroup ----

// JoinRequest is a JoinGroup in plain values.
type JoinRequest struct {
	Group, MemberID, InstanceID, ClientID, ClientHost, ProtocolType string
	Protocols                                                       []Protocol
	SessionTimeout, RebalanceTimeout                                time.Duration
	// RequireKnownMemberID: v4+ (KIP-394), a new dynamic member first
	// gets MEMBER_ID_REQUIRED with its id.
	RequireKnownMemberID bool
	Reason               string
}

// JoinResult is a JoinGroup's answer in plain values.
type JoinResult struct {
	Err            int16
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	MemberID       string
	Members        []JoinMember // the leader's only
	SkipAssignment bool
}

// JoinMember is one member as the leader sees it.
type JoinMember struct {
	ID, InstanceID string
	Metadata       []byte
}

func joinErr(code int16, memberID string) JoinResult {
	return JoinResult{Err: code, Generation: -1, MemberID: memberID}
}

// Join handles a JoinGroup. It answers now (waiting false) or later, with
// an Answer carrying token.
func (c *Core) Join(now time.Time, req JoinRequest, token uint64) (res JoinResult, waiting bool) {
	if req.Group == "" {
		return joinErr(kerr.InvalidGroupID.Code, req.MemberID), false
	}
	if req.SessionTimeout < c.t.MinSession || req.SessionTimeout > c.t.MaxSession {
		c.event(req.Group, false, "join refused: session timeout out of range")
		return joinErr(kerr.InvalidSessionTimeout.Code, req.MemberID), false
	}
	if c.shareGroups[req.Group] != nil {
		// Kafka: "Group G is not a classic group."
		return joinErr(kerr.GroupIDNotFound.Code, req.MemberID), false
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return joinErr(kerr.UnknownMemberID.Code, req.MemberID), false
		}
		if req.ProtocolType == "" || len(req.Protocols) == 0 {
			return joinErr(kerr.InconsistentGroupProtocol.Code, req.MemberID), false
		}
		g = c.newGroup(req.Group, now)
	}
	if g.Type == TypeConsumer && len(g.consumer.members) == 0 {
		c.toClassic(g, now)
	}
	if g.Type != TypeClassic {
		return joinErr(kerr.GroupIDNotFound.Code, req.MemberID), false
	}
	if !c.supportsProtocols(g, req.MemberID, req.ProtocolType, req.Protocols) {
		c.event(g.ID, false, "join refused: inconsistent group protocol")
		return joinErr(kerr.InconsistentGroupProtocol.Code, req.MemberID), false
	}
	if req.MemberID == "" {
		return c.joinNew(now, g, req, token)
	}
	return c.joinKnown(now, g, req, token)
}

// supportsProtocols is ClassicGroup.supportsProtocols: an Empty group
// takes any non-empty protocol list; otherwise the protocol type must
// match and one protocol must be supported by every other member.
func (c *Core) supportsProtocols(g *Group, memberID, protocolType string, protocols []Protocol) bool {
	if len(g.Members) == 0 || (len(g.Members) == 1 && g.Members[memberID] != nil) {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.ProtocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for id, m := range g.Members {
			if id != memberID && !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(m *Member, name string) bool {
	return slices.ContainsFunc(m.Protocols, func(p Protocol) bool { return p.Name == name })
}

func (c *Core) joinNew(now time.Time, g *Group, req JoinRequest, token uint64) (JoinResult, bool) {
	if g.State == Dead {
		return joinErr(kerr.CoordinatorNotAvailable.Code, ""), false
	}
	id := req.ClientID + "-" + c.newID()
	if req.InstanceID != "" {
		if old, ok := g.Static[req.InstanceID]; ok {
			return c.replaceStatic(now, g, old, id, req, token)
		}
		c.addMember(now, g, id, req, token)
		return JoinResult{}, true
	}
	if req.RequireKnownMemberID {
		// KIP-394: the member gets its id and must join again with it
		// within its session timeout.
		g.Pending[id] = now.Add(req.SessionTimeout)
		return joinErr(kerr.MemberIDRequired.Code, id), false
	}
	c.addMember(now, g, id, req, token)
	return JoinResult{}, true
}

func (c *Core) joinKnown(now time.Time, g *Group, req JoinRequest, token uint64) (JoinResult, bool) {
	if _, ok := g.Pending[req.MemberID]; ok {
		c.addMember(now, g, req.MemberID, req, token)
		return JoinResult{}, true
	}
	if code := validateMember(g, req.MemberID, req.InstanceID); code != 0 {
		c.event(g.ID, false, "join refused: "+errName(code)+" member="+req.MemberID)
		return joinErr(code, req.MemberID), false
	}
	m := g.Members[req.MemberID]
	switch g.State {
	case PreparingRebalance:
		c.updateMember(now, g, m, req, token)
		c.tryCompleteJoin(now, g)
		return JoinResult{}, true
	case CompletingRebalance:
		if protocolsEqual(m.Protocols, req.Protocols) {
			// A retry of a join that was answered: the same answer.
			return c.joinAnswer(g, m), false
		}
		c.updateMember(now, g, m, req, token)
		c.prepareRebalance(now, g, "member "+m.ID+" changed its protocols")
		return JoinResult{}, true
	case Stable:
		if m.ID == g.Leader || !protocolsEqual(m.Protocols, req.Protocols) {
			c.updateMember(now, g, m, req, token)
			c.prepareRebalance(now, g, "leader or member with new protocols joined: "+m.ID)
			return JoinResult{}, true
		}
		return c.joinAnswer(g, m), false
	default: // Empty, Dead: no members
		return joinErr(kerr.UnknownMemberID.Code, req.MemberID), false
	}
}

// validateMember is ClassicGroup.validateMember: a static member's
// instance id must map to its member id (else FENCED_INSTANCE_ID), and the
// member must exist.
func validateMember(g *Group, memberID, instanceID string) int16 {
	if instanceID != "" {
		if id, ok := g.Static[instanceID]; ok && id != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.Members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func protocolsEqual(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && string(x.Metadata) == string(y.Metadata) })
}

// joinAnswer is the answer of the current generation to m.
func (c *Core) joinAnswer(g *Group, m *Member) JoinResult {
	res := JoinResult{Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Leader: g.Leader, MemberID: m.ID}
	if m.ID == g.Leader {
		res.Members = c.memberList(g)
	}
	return res
}

func (c *Core) memberList(g *Group) []JoinMember {
	out := make([]JoinMember, 0, len(g.Members))
	for _, id := range sortedMembers(g) {
		m := g.Members[id]
		out = append(out, JoinMember{ID: m.ID, InstanceID: m.InstanceID, Metadata: m.metadataFor(g.Protocol)})
	}
	return out
}

func sortedMembers(g *Group) []string {
	ids := make([]string, 0, len(g.Members))
	for id := range g.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (c *Core) addMember(now time.Time, g *Group, id string, req JoinRequest, token uint64) {
	m := &Member{ID: id, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost}
	delete(g.Pending, id)
	g.Members[id] = m
	if req.InstanceID != "" {
		g.Static[req.InstanceID] = id
	}
	if g.Leader == "" {
		g.Leader = id
	}
	if len(g.Members) == 1 {
		g.ProtocolType = req.ProtocolType
	}
	c.updateMember(now, g, m, req, token)
	if g.State == PreparingRebalance && g.initialPhase {
		// Kafka's InitialDelayedJoin: every new member extends the delay,
		// up to the rebalance timeout.
		g.joinDeadline = minTime(now.Add(c.t.InitialRebalanceDelay), g.initialLimit)
	}
	c.maybeRebalance(now, g, "member "+id+" joined")
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (c *Core) updateMember(now time.Time, g *Group, m *Member, req JoinRequest, token uint64) {
	m.Protocols = req.Protocols
	m.ProtocolType = req.ProtocolType
	m.SessionTimeout, m.RebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	if req.ClientID != "" {
		m.ClientID, m.ClientHost = req.ClientID, req.ClientHost
	}
	if m.joinToken != 0 {
		c.answers = append(c.answers, Answer{Token: m.joinToken, SupersededBy: token})
	}
	m.joinToken = token
	m.heartbeatDeadline = now.Add(m.SessionTimeout)
}

func ptr[T any](v T) *T { return &v }

func (c *Core) maybeRebalance(now time.Time, g *Group, reason string) {
	switch g.State {
	case Stable, CompletingRebalance, Empty:
		c.prepareRebalance(now, g, reason)
	case PreparingRebalance:
		c.tryCompleteJoin(now, g)
	}
}

func (c *Core) maxRebalanceTimeout(g *Group) time.Duration {
	var d time.Duration
	for _, m := range g.Members {
		d = max(d, m.RebalanceTimeout)
	}
	return d
}

// prepareRebalance moves g to PreparingRebalance: members waiting in a
// SyncGroup get REBALANCE_IN_PROGRESS and assignments are dropped.
func (c *Core) prepareRebalance(now time.Time, g *Group, reason string) {
	if g.State == CompletingRebalance {
		for _, id := range sortedMembers(g) {
			m := g.Members[id]
			m.Assignment = nil
			if m.syncToken != 0 {
				c.answers = append(c.answers, Answer{Token: m.syncToken, Join: nil, Sync: &SyncResult{Err: kerr.RebalanceInProgress.Code}})
				m.syncToken = 0
			}
		}
	}
	g.pendingSync = nil
	g.syncDeadline = time.Time{}
	if g.State == Empty && c.t.InitialRebalanceDelay > 0 {
		g.initialPhase = true
		g.initialLimit = now.Add(c.maxRebalanceTimeout(g))
		g.joinDeadline = minTime(now.Add(c.t.InitialRebalanceDelay), g.initialLimit)
	} else {
		g.initialPhase = false
		g.joinDeadline = now.Add(c.maxRebalanceTimeout(g))
	}
	g.setState(PreparingRebalance, now)
	c.event(g.ID, true, "preparing to rebalance: "+reason)
	c.tryCompleteJoin(now, g)
}

func (c *Core) allJoined(g *Group) bool {
	if len(g.Pending) > 0 {
		return false
	}
	for _, m := range g.Members {
		if m.joinToken == 0 {
			return false
		}
	}
	return true
}

func (c *Core) tryCompleteJoin(now time.Time, g *Group) {
	if g.State == PreparingRebalance && !g.initialPhase && c.allJoined(g) {
		c.completeJoin(now, g)
	}
}

// completeJoin ends PreparingRebalance (every member rejoined, or the
// rebalance timeout passed): dynamic members that did not rejoin are
// removed, static ones kept; the next generation starts.
func (c *Core) completeJoin(now time.Time, g *Group) {
	g.initialPhase = false
	for _, id := range sortedMembers(g) {
		if m := g.Members[id]; m.joinToken == 0 && m.InstanceID == "" {
			c.event(g.ID, true, "member "+id+" did not rejoin in time: removed")
			c.removeMember(g, m)
		}
	}
	if len(g.Members) > 0 {
		if l := g.Members[g.Leader]; l == nil || l.joinToken == 0 {
			leader := ""
			for _, id := range sortedMembers(g) {
				if g.Members[id].joinToken != 0 {
					leader = id
					break
				}
			}
			if leader == "" {
				// Only static members that did not rejoin are left: wait
				// another rebalance timeout for them (or for their
				// sessions to expire), as Kafka does.
				g.joinDeadline = now.Add(c.maxRebalanceTimeout(g))
				return
			}
			g.Leader = leader
		}
	}
	g.Generation++
	g.pendingSync = nil
	if len(g.Members) == 0 {
		g.Protocol, g.Leader = "", ""
		g.setState(Empty, now)
		g.metadataDirty = true
		c.event(g.ID, true, "group is empty")
		c.events = append(c.events, Event{Group: g.ID, Rebalance: true})
		return
	}
	g.Protocol = c.selectProtocol(g)
	g.setState(CompletingRebalance, now)
	g.syncDeadline = now.Add(c.maxRebalanceTimeout(g))
	g.pendingSync = map[string]bool{}
	for _, id := range sortedMembers(g) {
		m := g.Members[id]
		g.pendingSync[id] = true
		if m.joinToken != 0 {
			res := c.joinAnswer(g, m)
			c.answers = append(c.answers, Answer{Token: m.joinToken, Join: &res})
			m.joinToken = 0
		}
		m.heartbeatDeadline = now.Add(m.SessionTimeout)
	}
	c.event(g.ID, true, "rebalance completed: generation "+itoa(int64(g.Generation))+", protocol "+g.Protocol+
		", "+itoa(int64(len(g.Members)))+" members, leader "+g.Leader)
	c.events = append(c.events, Event{Group: g.ID, Rebalance: true})
}

// selectProtocol is ClassicGroup.selectProtocol: among the protocols every
// member supports, each member votes for the first of its own list; most
// votes wins (ties: the name first in order, for a stable answer).
func (c *Core) selectProtocol(g *Group) string {
	ids := sortedMembers(g)
	supported := func(name string) bool {
		for _, id := range ids {
			if !hasProtocol(g.Members[id], name) {
				return false
			}
		}
		return true
	}
	votes := map[string]int{}
	for _, id := range ids {
		for _, p := range g.Members[id].Protocols {
			if supported(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", -1
	for name, v := range votes {
		if v > n || (v == n && name < best) {
			best, n = name, v
		}
	}
	return best
}

// replaceStatic is Kafka's static member replacement: a known
// group.instance.id joins with no member id; the new member id takes the
// old one's place, and the old one is fenced (FENCED_INSTANCE_ID for any
// request it still waits in).
func (c *Core) replaceStatic(now time.Time, g *Group, oldID, newID string, req JoinRequest, token uint64) (JoinResult, bool) {
	old := g.Members[oldID]
	if old.joinToken != 0 {
		c.answers = append(c.answers, Answer{Token: old.joinToken, Join: ptr(joinErr(kerr.FencedInstanceID.Code, oldID))})
	}
	if old.syncToken != 0 {
		c.answers = append(c.answers, Answer{Token: old.syncToken, Sync: &SyncResult{Err: kerr.FencedInstanceID.Code}})
	}
	oldProtocols := old.Protocols
	m := &Member{ID: newID, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost,
		Assignment: old.Assignment, Protocols: old.Protocols}
	delete(g.Members, oldID)
	g.Members[newID] = m
	g.Static[req.InstanceID] = newID
	if g.Leader == oldID {
		g.Leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	c.event(g.ID, true, "static member "+req.InstanceID+" replaced: "+oldID+" -> "+newID)
	switch g.State {
	case Stable:
		c.updateMember(now, g, m, req, 0)
		if c.selectProtocol(g) != g.Protocol || string(m.metadataFor(g.Protocol)) != string(metadataIn(oldProtocols, g.Protocol)) {
			m.joinToken = token
			c.prepareRebalance(now, g, "static member "+req.InstanceID+" rejoined with new protocols")
			return JoinResult{}, true
		}
		// Same subscription: no rebalance. The new id is stored before
		// the answer; the leader is told to skip the assignment.
		g.metadataDirty = true
		res := c.joinAnswer(g, m)
		if m.ID == g.Leader {
			res.SkipAssignment = true
		}
		return res, false
	case CompletingRebalance:
		c.updateMember(now, g, m, req, token)
		c.prepareRebalance(now, g, "static member "+req.InstanceID+" replaced during the sync")
		return JoinResult{}, true
	default: // PreparingRebalance
		c.updateMember(now, g, m, req, token)
		c.tryCompleteJoin(now, g)
		return JoinResult{}, true
	}
}

func metadataIn(ps []Protocol, name string) []byte {
	for _, p := range ps {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// removeMember drops m from g, answering what it waits in with
// UNKNOWN_MEMBER_ID; the caller moves the group on.
func (c *Core) removeMember(g *Group, m *Member) {
	if m.joinToken != 0 {
		c.answers = append(c.answers, Answer{Token: m.joinToken, Join: ptr(joinErr(kerr.UnknownMemberID.Code, m.ID))})
		m.joinToken = 0
	}
	if m.syncToken != 0 {
		c.answers = append(c.answers, Answer{Token: m.syncToken, Sync: &SyncResult{Err: kerr.UnknownMemberID.Code}})
		m.syncToken = 0
	}
	delete(g.Members, m.ID)
	delete(g.pendingSync, m.ID)
	if m.InstanceID != "" && g.Static[m.InstanceID] == m.ID {
		delete(g.Static, m.InstanceID)
	}
	if g.Leader == m.ID {
		g.Leader = ""
		if ids := sortedMembers(g); len(ids) > 0 {
			g.Leader = ids[0]
		}
	}
}

// removeAndRebalance is a member leaving or expiring.
func (c *Core) removeAndRebalance(now time.Time, g *Group, m *Member, reason string) {
	c.removeMember(g, m)
	switch g.State {
	case Stable, CompletingRebalance:
		c.prepareRebalance(now, g, reason)
	case PreparingRebalance:
		c.tryCompleteJoin(now, g)
	}
}

// ---- SyncGroup ----

// SyncRequest is a SyncGroup in plain values.
type SyncRequest struct {
	Group, MemberID, InstanceID string
	Generation                  int32
	ProtocolType, Protocol      *string // v5+
	Assignments                 map[string][]byte
}

// SyncResult is a SyncGroup's answer.
type SyncResult struct {
	Err          int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Sync handles a SyncGroup.
func (c *Core) Sync(now time.Time, req SyncRequest, token uint64) (SyncResult, bool) {
	g := c.groups[req.Group]
	if g == nil || g.Type != TypeClassic {
		return SyncResult{Err: kerr.UnknownMemberID.Code}, false
	}
	if g.State == Dead {
		return SyncResult{Err: kerr.CoordinatorNotAvailable.Code}, false
	}
	if code := validateMember(g, req.MemberID, req.InstanceID); code != 0 {
		c.event(g.ID, false, "sync refused: "+errName(code)+" member="+req.MemberID)
		return SyncResult{Err: code}, false
	}
	if req.Generation != g.Generation {
		c.event(g.ID, false, "sync refused: ILLEGAL_GENERATION member="+req.MemberID)
		return SyncResult{Err: kerr.IllegalGeneration.Code}, false
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.ProtocolType) || (req.Protocol != nil && *req.Protocol != g.Protocol) {
		return SyncResult{Err: kerr.InconsistentGroupProtocol.Code}, false
	}
	m := g.Members[req.MemberID]
	m.heartbeatDeadline = now.Add(m.SessionTimeout)
	switch g.State {
	case Empty:
		return SyncResult{Err: kerr.UnknownMemberID.Code}, false
	case PreparingRebalance:
		return SyncResult{Err: kerr.RebalanceInProgress.Code}, false
	case Stable:
		delete(g.pendingSync, m.ID)
		return SyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: m.Assignment}, false
	}
	// CompletingRebalance: wait for the leader's assignment.
	if m.syncToken != 0 {
		c.answers = append(c.answers, Answer{Token: m.syncToken, SupersededBy: token})
	}
	m.syncToken = token
	delete(g.pendingSync, m.ID)
	if m.ID == g.Leader {
		for id, mm := range g.Members {
			mm.Assignment = req.Assignments[id] // a member left out gets an empty assignment
		}
		g.setState(Stable, now)
		g.syncDeadline, g.pendingSync = time.Time{}, nil
		// The assignment is stored before any member gets it.
		g.metadataDirty = true
		for _, id := range sortedMembers(g) {
			mm := g.Members[id]
			if mm.syncToken != 0 {
				c.answers = append(c.answers, Answer{Token: mm.syncToken,
					Sync: &SyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: mm.Assignment}})
				mm.syncToken = 0
			}
		}
		c.event(g.ID, true, "group is stable: generation "+itoa(int64(g.Generation)))
	}
	return SyncResult{}, true
}

// ---- Heartbeat ----

// Heartbeat handles a Heartbeat.
func (c *Core) Heartbeat(now time.Time, group, memberID, instanceID string, generation int32) int16 {
	g := c.groups[group]
	if g == nil || g.Type != TypeClassic {
		return kerr.UnknownMemberID.Code
	}
	switch {
	case g.State == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case g.State == Empty:
		return kerr.UnknownMemberID.Code
	}
	if code := validateMember(g, memberID, instanceID); code != 0 {
		c.event(g.ID, false, "heartbeat refused: "+errName(code)+" member="+memberID)
		return code
	}
	if generation != g.Generation {
		c.event(g.ID, false, "heartbeat refused: ILLEGAL_GENERATION member="+memberID)
		return kerr.IllegalGeneration.Code
	}
	m := g.Members[memberID]
	m.heartbeatDeadline = now.Add(m.SessionTimeout)
	if g.State == PreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// ---- LeaveGroup ----

// LeaveMember is one member of a LeaveGroup.
type LeaveMember struct{ MemberID, InstanceID string }

// Leave handles a LeaveGroup: a group-level error, or one code per member.
func (c *Core) Leave(now time.Time, group string, members []LeaveMember) (int16, []int16) {
	codes := make([]int16, len(members))
	g := c.groups[group]
	if g == nil || g.Type != TypeClassic {
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return 0, codes
	}
	if g.State == Dead {
		return kerr.CoordinatorNotAvailable.Code, codes
	}
	for i, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != "" {
			sid, ok := g.Static[lm.InstanceID]
			switch {
			case !ok:
				codes[i] = kerr.UnknownMemberID.Code
				continue
			case id != "" && sid != id:
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			id = sid
		}
		if _, ok := g.Pending[id]; ok {
			delete(g.Pending, id)
			c.tryCompleteJoin(now, g)
			continue
		}
		m := g.Members[id]
		if m == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		c.removeAndRebalance(now, g, m, "member "+id+" left")
	}
	return 0, codes
}

// ---- time ----

// Tick runs what is due at now: pending member ids and sessions that
// expired, rebalances and syncs that timed out.
func (c *Core) Tick(now time.Time) {
	c.tickConsumer(now)
	for _, gid := range c.GroupIDs() {
		g := c.groups[gid]
		if g == nil || g.Type != TypeClassic {
			continue
		}
		for id, until := range g.Pending {
			if !now.Before(until) {
				delete(g.Pending, id)
				c.tryCompleteJoin(now, g)
			}
		}
		for _, id := range sortedMembers(g) {
			m := g.Members[id]
			if m == nil || m.joinToken != 0 || m.syncToken != 0 || now.Before(m.heartbeatDeadline) {
				continue
			}
			c.event(g.ID, true, "member "+id+" session timed out")
			c.removeAndRebalance(now, g, m, "member "+id+" session timed out")
		}
		if g.State == PreparingRebalance && !now.Before(g.joinDeadline) {
			c.completeJoin(now, g)
		}
		if g.State == CompletingRebalance && !g.syncDeadline.IsZero() && !now.Before(g.syncDeadline) {
			var late []*Member
			for _, id := range sortedMembers(g) {
				if g.pendingSync[id] {
					late = append(late, g.Members[id])
				}
			}
			if len(late) > 0 {
				for _, m := range late {
					c.event(g.ID, true, "member "+m.ID+" did not sync in time: removed")
					c.removeMember(g, m)
				}
				c.prepareRebalance(now, g, "members did not sync in time")
			}
		}
	}
}

// NextDeadline is the earliest time Tick has something to do (zero: none).
func (c *Core) NextDeadline() time.Time {
	var next time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, g := range c.groups {
		for _, until := range g.Pending {
			take(until)
		}
		for _, m := range g.Members {
			if m.joinToken == 0 && m.syncToken == 0 {
				take(m.heartbeatDeadline)
			}
		}
		if g.State == PreparingRebalance {
			take(g.joinDeadline)
		}
		if g.State == CompletingRebalance {
			take(g.syncDeadline)
		}
	}
	take(c.consumerNextDeadline())
	return next
}
