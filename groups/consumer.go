package groups

import (
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// KIP-848 consumer groups in the pure core: ConsumerGroupHeartbeat's
// state machine (Kafka's GroupMetadataManager.consumerGroupHeartbeat,
// ConsumerGroup and CurrentAssignmentBuilder), session and rebalance
// timeouts, and the checks OffsetCommit, TxnOffsetCommit and OffsetFetch
// make for a consumer group's members.
//
// A consumer group is a *Group of Type TypeConsumer whose members live in
// Group.consumer (Group.Members stays empty); its offsets are the group's
// Offsets and Txn, shared with the classic protocol: an Empty classic
// group (a simple consumer's, or one whose members all left) becomes a
// consumer group on its first ConsumerGroupHeartbeat, and an Empty
// consumer group a classic one on its first JoinGroup, keeping its
// offsets.
//
// The protocol, in short: the group epoch counts changes of membership
// and subscriptions; a change computes a new target assignment (assign.go)
// at that epoch; every member then moves towards its target through
// heartbeats: a partition it must give up is revoked first (the member
// stays at its epoch, UNREVOKED_PARTITIONS, until a heartbeat no longer
// lists it as owned), and a partition another member still owns is not
// given out before that member released it (UNRELEASED_PARTITIONS). A
// member's epoch is the target epoch it reached; OffsetCommit v9 carries
// it and must match (STALE_MEMBER_EPOCH).
//
// Where this differs from Kafka:
//   - a member that joins again with epoch 0 and the member id it has
//     (kgo and the Java consumer do after FENCED_MEMBER_EPOCH) is taken
//     back in place: it owns nothing (a join reports no partitions), so
//     what it had is released and its target is given again. Kafka
//     answers FENCED_MEMBER_EPOCH until the session expires, unless it
//     is a lost response's retry;
//   - regular expressions are resolved when the heartbeat is handled
//     (Kafka resolves them in the background and bumps the epoch when
//     done), against every topic the view has, internal ones included
//     (as Kafka's resolution does); the subscribed topics are checked on
//     every heartbeat, not at a refresh interval, so a created topic or
//     added partitions are assigned at the next heartbeat;
//   - no classic members in consumer groups (Kafka's online migration):
//     JoinGroup to a non-empty consumer group is GROUP_ID_NOT_FOUND, a
//     ConsumerGroupHeartbeat to a non-empty classic group too;
//   - the group's state is one record (the group's value in bbolt, its
//     consumer members and target assignment inside) rewritten on each
//     change, not Kafka's records per member.

// ConsumerState is a consumer group's state (Kafka's ConsumerGroupState).
type ConsumerState int8

const (
	ConsumerEmpty ConsumerState = iota
	ConsumerAssigning
	ConsumerReconciling
	ConsumerStable
)

func (s ConsumerState) String() string {
	return [...]string{"Empty", "Assigning", "Reconciling", "Stable"}[s]
}

// memberState is a member's reconciliation state (Kafka's MemberState).
type memberState int8

const (
	memberStable     memberState = iota // at its target
	memberUnrevoked                     // must revoke partitions before its next epoch
	memberUnreleased                    // waits for partitions others still own
)

func (s memberState) String() string {
	return [...]string{"stable", "unrevoked", "unreleased"}[s]
}

// Leave epochs of ConsumerGroupHeartbeat.
const (
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// consumerMember is one member of a consumer group.
type consumerMember struct {
	ID, InstanceID, RackID, ClientID, ClientHost string
	RebalanceTimeout                             time.Duration
	Topics                                       []string // subscribed topic names, sorted
	Regex                                        string   // subscribed regular expression ("": none)
	Assignor                                     string   // its ServerAssignor ("": none)

	Epoch, PrevEpoch int32
	State            memberState
	// Assigned are the partitions it owns (or is being given); Revoking
	// those it must give up before its next epoch.
	Assigned, Revoking partSet
	// AssignedAt is the member epoch at which it was given each partition
	// of Assigned and Revoking (KIP-1251's assignment epochs): a commit
	// with an older member epoch is accepted for a partition it already
	// owned then.
	AssignedAt map[tpid]int32

	re                *regexp.Regexp
	sessionDeadline   time.Time
	rebalanceDeadline time.Time // UNREVOKED_PARTITIONS: fenced then unless it moved on
	rebalanceEpoch    int32
}

func (m *consumerMember) reconciledTo(epoch int32) bool {
	return m.State == memberStable && m.Epoch == epoch
}

// consumerGroup is the KIP-848 part of a Group of type "consumer".
type consumerGroup struct {
	epoch       int32 // the group epoch
	assignEpoch int32 // the epoch of target
	members     map[string]*consumerMember
	static      map[string]string  // group.instance.id → member id
	target      map[string]partSet // member id → target assignment
	// owners is the epoch of each partition's current owner (assigned or
	// being revoked): Kafka's currentPartitionEpoch. A partition in it is
	// not given to another member.
	owners map[tpid]int32
	// subscribed are the subscribed topics that exist, as of the last
	// target assignment: a change (a topic created, deleted, grown, a
	// regex matching another topic) bumps the group epoch.
	subscribed map[string]assignTopic
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*consumerMember{}, static: map[string]string{},
		target: map[string]partSet{}, owners: map[tpid]int32{}, subscribed: map[string]assignTopic{}}
}

// state is ConsumerGroup.maybeUpdateGroupState.
func (cg *consumerGroup) state() ConsumerState {
	switch {
	case len(cg.members) == 0:
		return ConsumerEmpty
	case cg.epoch > cg.assignEpoch:
		return ConsumerAssigning
	}
	for _, m := range cg.members {
		if !m.reconciledTo(cg.assignEpoch) {
			return ConsumerReconciling
		}
	}
	return ConsumerStable
}

// preferredAssignor is the assignor most members ask for (ties: the name
// first in order), or the default.
func (cg *consumerGroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.Assignor != "" {
			votes[m.Assignor]++
		}
	}
	best, n := defaultAssignor, 0
	for name, v := range votes {
		if v > n || (v == n && name < best) {
			best, n = name, v
		}
	}
	return best
}

func (cg *consumerGroup) sortedMembers() []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// removeOwners / addOwners keep owners in step with a member's partitions.
func (cg *consumerGroup) removeOwners(m *consumerMember) {
	for p := range m.Assigned {
		delete(cg.owners, p)
	}
	for p := range m.Revoking {
		delete(cg.owners, p)
	}
}

func (cg *consumerGroup) addOwners(m *consumerMember) {
	for p := range m.Assigned {
		cg.owners[p] = m.Epoch
	}
	for p := range m.Revoking {
		cg.owners[p] = m.Epoch
	}
}

// subscribedTo reports whether a member subscribes to topic (by name or
// regex): OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC.
func (cg *consumerGroup) subscribedTo(topic string) bool {
	for _, m := range cg.members {
		if slices.Contains(m.Topics, topic) || (m.re != nil && m.re.MatchString(topic)) {
			return true
		}
	}
	return false
}

// TopicImage is what a consumer group step reads of the cluster's
// topics (the shell passes the cluster view; tests a fixed set).
type TopicImage interface {
	// TopicByName returns a topic's id and partition count.
	TopicByName(name string) (id [16]byte, partitions int32, ok bool)
	// TopicByID returns a topic's name.
	TopicByID(id [16]byte) (name string, ok bool)
	// TopicNames lists every topic (regex subscriptions match them).
	TopicNames() []string
}

// compileSubscriptionRegex compiles a SubscribedTopicRegex: RE2 syntax
// (Kafka uses RE2/J), matched against whole topic names.
func compileSubscriptionRegex(s string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + s + ")$")
}

// HeartbeatRequest is a ConsumerGroupHeartbeat in plain values: nil
// pointers and slices are Kafka's "null: unchanged".
type HeartbeatRequest struct {
	Version              int16
	Group, MemberID      string
	MemberEpoch          int32
	InstanceID, RackID   *string
	RebalanceTimeoutMs   int32 // -1: unchanged
	Topics               []string
	Regex                *string
	Assignor             *string
	Owned                []OwnedTopic
	ClientID, ClientHost string

	ownedSet partSet // Owned as a set
}

// OwnedTopic is one topic's partitions, as heartbeats carry them.
type OwnedTopic struct {
	TopicID    [16]byte
	Partitions []int32
}

// HeartbeatResult is a ConsumerGroupHeartbeat's answer.
type HeartbeatResult struct {
	Err      int16
	ErrMsg   string
	MemberID string
	Epoch    int32
	Interval time.Duration
	// Assignment is the member's assignment, when the answer carries one
	// (HasAssignment).
	Assignment    []OwnedTopic
	HasAssignment bool
}

func hbErr(code int16, msg string) HeartbeatResult { return HeartbeatResult{Err: code, ErrMsg: msg} }

// validate is GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (req *HeartbeatRequest) validate() (int16, string) {
	invalid := kerr.InvalidRequest.Code
	switch {
	case req.Group == "":
		return invalid, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return invalid, "RackId can't be empty."
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveEpoch:
		if req.MemberID == "" {
			return invalid, "MemberId can't be empty."
		}
	case e == 0:
		if req.Version >= 1 && req.MemberID == "" {
			return invalid, "MemberId can't be empty."
		}
		if req.RebalanceTimeoutMs == -1 {
			return invalid, "RebalanceTimeoutMs must be provided in first request."
		}
		if req.Owned == nil || len(req.Owned) > 0 {
			return invalid, "TopicPartitions must be empty when (re-)joining."
		}
		if req.Topics == nil && req.Regex == nil {
			return invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	case e == staticLeaveEpoch:
		if req.MemberID == "" {
			return invalid, "MemberId can't be empty."
		}
		if req.InstanceID == nil {
			return invalid, "InstanceId can't be null."
		}
	default:
		return invalid, "MemberEpoch is invalid."
	}
	if req.Assignor != nil && !validAssignor(*req.Assignor) {
		return kerr.UnsupportedAssignor.Code, "ServerAssignor " + *req.Assignor + " is not supported. Supported assignors: range, uniform."
	}
	if req.Regex != nil {
		if _, err := compileSubscriptionRegex(*req.Regex); err != nil {
			return kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex `" + *req.Regex + "` is not a valid regular expression: " + err.Error() + "."
		}
	}
	return 0, ""
}

func ownedSet(owned []OwnedTopic) partSet {
	s := partSet{}
	for _, t := range owned {
		for _, p := range t.Partitions {
			s[tpid{t.TopicID, p}] = struct{}{}
		}
	}
	return s
}

func toOwned(s partSet) []OwnedTopic {
	ids, parts := s.byTopic()
	out := make([]OwnedTopic, 0, len(ids))
	for _, id := range ids {
		out = append(out, OwnedTopic{TopicID: id, Partitions: parts[id]})
	}
	return out
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat.
func (c *Core) ConsumerHeartbeat(now time.Time, img TopicImage, req HeartbeatRequest) HeartbeatResult {
	if code, msg := req.validate(); code != 0 {
		c.event(req.Group, false, "consumer heartbeat refused: "+errName(code)+": "+msg)
		return hbErr(code, msg)
	}
	if req.Owned != nil {
		req.ownedSet = ownedSet(req.Owned)
	}
	var res HeartbeatResult
	switch req.MemberEpoch {
	case leaveEpoch, staticLeaveEpoch:
		res = c.consumerLeave(now, img, req)
	default:
		res = c.consumerJoinOrHeartbeat(now, img, req)
	}
	if res.Err != 0 {
		c.event(req.Group, false, "consumer heartbeat refused: "+errName(res.Err)+" member="+req.MemberID+
			" epoch="+itoa(int64(req.MemberEpoch))+": "+res.ErrMsg)
		res.Epoch = 0
	}
	res.Interval = c.t.ConsumerHeartbeat
	return res
}

// consumerGroupOf finds (or, to join, creates) the consumer group of a
// heartbeat: an Empty classic group is converted, keeping its offsets.
func (c *Core) consumerGroupOf(now time.Time, id string, create bool) (*Group, int16, string) {
	g := c.groups[id]
	switch {
	case c.shareGroups[id] != nil:
		return nil, kerr.GroupIDNotFound.Code, "Group " + id + " is not a consumer group."
	case g == nil && !create:
		return nil, kerr.GroupIDNotFound.Code, "Consumer group " + id + " not found."
	case g == nil:
		g = c.newGroup(id, now)
	case g.Type == TypeConsumer:
		return g, 0, ""
	case !create || len(g.Members) > 0 || len(g.Pending) > 0 || g.State != Empty:
		return nil, kerr.GroupIDNotFound.Code, "Group " + id + " is not a consumer group."
	default:
		c.event(id, true, "empty classic group becomes a consumer group (offsets kept)")
	}
	g.Type, g.ProtocolType, g.Protocol, g.Leader, g.Generation = TypeConsumer, "consumer", "", "", 0
	g.consumer = newConsumerGroup()
	g.metadataDirty = true
	return g, 0, ""
}

// toClassic turns an Empty consumer group into a classic one (JoinGroup),
// keeping its offsets.
func (c *Core) toClassic(g *Group, now time.Time) {
	g.Type, g.consumer = TypeClassic, nil
	g.ProtocolType, g.Protocol, g.Generation = "", "", 0
	g.setState(Empty, now)
	g.metadataDirty = true
	c.event(g.ID, true, "empty consumer group becomes a classic group (offsets kept)")
}

// syncClassicFields keeps the fields every group type shares (what the
// classic code, ListGroups and the admin API read) in step with the
// consumer state: State is Empty without members, else Stable; the
// generation is the group epoch, the protocol the preferred assignor.
func (c *Core) syncClassicFields(g *Group, now time.Time) {
	cg := g.consumer
	st := Stable
	if len(cg.members) == 0 {
		st = Empty
	}
	if st != g.State {
		g.setState(st, now)
	}
	g.Generation, g.Protocol = cg.epoch, cg.preferredAssignor()
}

func (c *Core) consumerJoinOrHeartbeat(now time.Time, img TopicImage, req HeartbeatRequest) HeartbeatResult {
	joining := req.MemberEpoch == 0
	g, code, msg := c.consumerGroupOf(now, req.Group, joining)
	if code != 0 {
		return hbErr(code, msg)
	}
	cg := g.consumer
	defer c.syncClassicFields(g, now)
	if req.MemberID == "" { // v0: the coordinator names the member
		req.MemberID = c.newID()
	}

	m, replaced, code, msg := c.consumerMemberOf(now, g, req)
	if code != 0 {
		return hbErr(code, msg)
	}
	isNew := cg.members[m.ID] == nil

	// 1. The member's subscription and metadata.
	changed := isNew || replaced != nil
	subChanged := isNew && replaced == nil
	set := func(dst *string, v *string) {
		if v != nil && *dst != *v {
			*dst, changed = *v, true
		}
	}
	set(&m.InstanceID, req.InstanceID)
	set(&m.RackID, req.RackID)
	set(&m.Assignor, req.Assignor)
	if req.RebalanceTimeoutMs >= 0 && m.RebalanceTimeout != millis(req.RebalanceTimeoutMs) {
		m.RebalanceTimeout, changed = millis(req.RebalanceTimeoutMs), true
	}
	if req.Topics != nil {
		topics := slices.Clone(req.Topics)
		sort.Strings(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.Topics) {
			m.Topics, changed, subChanged = topics, true, true
		}
	}
	if req.Regex != nil && *req.Regex != m.Regex {
		m.Regex, changed, subChanged = *req.Regex, true, true
		m.re = nil
		if m.Regex != "" {
			m.re, _ = compileSubscriptionRegex(m.Regex) // validated
		}
	}
	if m.ClientID != req.ClientID || m.ClientHost != req.ClientHost {
		m.ClientID, m.ClientHost, changed = req.ClientID, req.ClientHost, true
	}
	if m.InstanceID != "" && cg.static[m.InstanceID] != m.ID && !isNew {
		cg.static[m.InstanceID] = m.ID // a dynamic member that became static
	}
	if replaced != nil {
		target := cg.target[replaced.ID]
		c.removeConsumerMember(g, replaced)
		cg.target[m.ID] = target
	}
	if isNew {
		cg.members[m.ID] = m
		cg.addOwners(m)
		if m.InstanceID != "" {
			cg.static[m.InstanceID] = m.ID
		}
		if replaced != nil {
			c.event(g.ID, true, "static member "+m.InstanceID+" replaced: "+replaced.ID+" -> "+m.ID)
		} else {
			c.event(g.ID, true, "member "+m.ID+" joined the consumer group")
		}
	}

	// The subscribed topics that exist, and the group epoch: bumped for
	// a new group, a subscription change, or the topics changing.
	subscribed := c.resolveSubscriptions(cg, img)
	if cg.epoch == 0 || subChanged || !sameTopics(subscribed, cg.subscribed) {
		cg.subscribed = subscribed
		cg.epoch++
		c.events = append(c.events, Event{Group: g.ID, Rebalance: true})
		c.event(g.ID, true, "group epoch "+itoa(int64(cg.epoch))+": member "+m.ID+" joined or changed its subscription, or the subscribed topics changed")
		changed = true
	}

	// 2. The target assignment, when the group epoch moved past it.
	if cg.epoch > cg.assignEpoch {
		c.computeTarget(g)
		changed = true
	}

	// 3. Reconcile the member towards its target.
	before := m.Assigned
	if c.reconcile(now, cg, m, req.ownedSet, req.Owned != nil) {
		changed = true
	}
	m.sessionDeadline = now.Add(c.t.ConsumerSession)
	if changed {
		g.metadataDirty = true
	}

	res := HeartbeatResult{MemberID: m.ID, Epoch: m.Epoch}
	full := joining || (req.RebalanceTimeoutMs != -1 && (req.Topics != nil || req.Regex != nil) && req.Owned != nil)
	if full || !before.equal(m.Assigned) {
		res.Assignment, res.HasAssignment = toOwned(m.Assigned), true
	}
	return res
}

// consumerMemberOf finds or creates the member of a heartbeat (Kafka's
// getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember with its epoch
// checks). A static member replacing one that left with epoch -2 is
// returned new, with replaced set: it takes over its partitions.
func (c *Core) consumerMemberOf(now time.Time, g *Group, req HeartbeatRequest) (m, replaced *consumerMember, code int16, msg string) {
	cg := g.consumer
	joining := req.MemberEpoch == 0
	newMember := func() *consumerMember {
		return &consumerMember{ID: req.MemberID, RebalanceTimeout: millis(req.RebalanceTimeoutMs),
			Assigned: partSet{}, Revoking: partSet{}, AssignedAt: map[tpid]int32{}}
	}
	if req.InstanceID == nil {
		m = cg.members[req.MemberID]
		switch {
		case m == nil && joining:
			return newMember(), nil, 0, ""
		case m == nil:
			return nil, nil, kerr.UnknownMemberID.Code, "Member " + req.MemberID + " is not a member of group " + g.ID + "."
		case joining:
			c.rejoin(g, m)
			return m, nil, 0, ""
		}
		code, msg = checkMemberEpoch(m, req)
		return m, nil, code, msg
	}
	inst := *req.InstanceID
	existing := cg.members[cg.static[inst]]
	if joining {
		switch {
		case existing == nil:
			if m = cg.members[req.MemberID]; m != nil { // a dynamic member becoming static
				c.rejoin(g, m)
				return m, nil, 0, ""
			}
			return newMember(), nil, 0, ""
		case existing.ID == req.MemberID:
			c.rejoin(g, existing)
			return existing, nil, 0, ""
		case existing.Epoch != staticLeaveEpoch:
			return nil, nil, kerr.UnreleasedInstanceID.Code, "Static member " + req.MemberID + " with instance id " + inst +
				" cannot join the group because the instance id is owned by " + existing.ID + " member."
		}
		// The instance left with epoch -2: the new member takes its
		// place, its subscription and partitions, at epoch 0.
		m = &consumerMember{ID: req.MemberID, InstanceID: inst, RackID: existing.RackID, RebalanceTimeout: existing.RebalanceTimeout,
			Topics: existing.Topics, Regex: existing.Regex, re: existing.re, Assignor: existing.Assignor,
			State: memberStable, Assigned: existing.Assigned.clone(), Revoking: partSet{}, AssignedAt: map[tpid]int32{}}
		for p := range m.Assigned {
			m.AssignedAt[p] = 0 // from its first epoch on
		}
		return m, existing, 0, ""
	}
	switch {
	case existing == nil:
		return nil, nil, kerr.UnknownMemberID.Code, "Instance id " + inst + " is unknown."
	case existing.ID != req.MemberID:
		return nil, nil, kerr.FencedInstanceID.Code, "Static member " + req.MemberID + " with instance id " + inst +
			" was fenced by member " + existing.ID + "."
	}
	code, msg = checkMemberEpoch(existing, req)
	return existing, nil, code, msg
}

// checkMemberEpoch is throwIfConsumerGroupMemberEpochIsInvalid: an epoch
// ahead is fenced; one behind too, unless it is the previous epoch with
// owned partitions the member still has (the answer bumping it was lost).
func checkMemberEpoch(m *consumerMember, req HeartbeatRequest) (int16, string) {
	switch {
	case req.MemberEpoch > m.Epoch:
		return kerr.FencedMemberEpoch.Code, "The consumer group member has a greater member epoch (" + itoa(int64(req.MemberEpoch)) +
			") than the one known by the group coordinator (" + itoa(int64(m.Epoch)) + "). The member must abandon all its partitions and rejoin."
	case req.MemberEpoch < m.Epoch:
		if req.MemberEpoch != m.PrevEpoch || req.Owned == nil || !subset(req.ownedSet, m.Assigned) {
			return kerr.FencedMemberEpoch.Code, "The consumer group member has a smaller member epoch (" + itoa(int64(req.MemberEpoch)) +
				") than the one known by the group coordinator (" + itoa(int64(m.Epoch)) + "). The member must abandon all its partitions and rejoin."
		}
	}
	return 0, ""
}

func subset(s, of partSet) bool {
	for p := range s {
		if !of.has(p) {
			return false
		}
	}
	return true
}

// rejoin takes back a member that joins again with its own id (epoch 0):
// it reported no partitions, so what it owned is released.
func (c *Core) rejoin(g *Group, m *consumerMember) {
	cg := g.consumer
	cg.removeOwners(m)
	m.Assigned, m.Revoking, m.AssignedAt = partSet{}, partSet{}, map[tpid]int32{}
	m.Epoch, m.PrevEpoch, m.State = 0, 0, memberStable
	m.rebalanceDeadline = time.Time{}
	g.metadataDirty = true
	c.event(g.ID, true, "member "+m.ID+" rejoined with epoch 0: its partitions are released")
}

// resolveSubscriptions is the set of existing topics the members
// subscribe to, by name or regex.
func (c *Core) resolveSubscriptions(cg *consumerGroup, img TopicImage) map[string]assignTopic {
	out := map[string]assignTopic{}
	add := func(name string) {
		if _, ok := out[name]; ok {
			return
		}
		if id, n, ok := img.TopicByName(name); ok {
			out[name] = assignTopic{ID: id, Partitions: n}
		}
	}
	var names []string
	for _, m := range cg.members {
		for _, t := range m.Topics {
			add(t)
		}
		if m.re != nil {
			if names == nil {
				names = img.TopicNames()
			}
			for _, t := range names {
				if m.re.MatchString(t) {
					add(t)
				}
			}
		}
	}
	return out
}

func sameTopics(a, b map[string]assignTopic) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// computeTarget is the TargetAssignmentBuilder: the preferred assignor
// over every member's subscription, from the previous target.
func (c *Core) computeTarget(g *Group) {
	cg := g.consumer
	names := make([]string, 0, len(cg.subscribed))
	for name := range cg.subscribed {
		names = append(names, name)
	}
	sort.Strings(names)
	topics := make([]assignTopic, 0, len(names))
	for _, n := range names {
		topics = append(topics, cg.subscribed[n])
	}
	members := make([]assignMember, 0, len(cg.members))
	for _, id := range cg.sortedMembers() {
		m := cg.members[id]
		am := assignMember{ID: m.ID, InstanceID: m.InstanceID, Topics: map[[16]byte]bool{}, Previous: cg.target[m.ID]}
		for _, t := range m.Topics {
			if at, ok := cg.subscribed[t]; ok {
				am.Topics[at.ID] = true
			}
		}
		if m.re != nil {
			for _, n := range names {
				if m.re.MatchString(n) {
					am.Topics[cg.subscribed[n].ID] = true
				}
			}
		}
		members = append(members, am)
	}
	assignor := cg.preferredAssignor()
	cg.target = assign(assignor, members, topics)
	cg.assignEpoch = cg.epoch
	c.event(g.ID, true, "target assignment of epoch "+itoa(int64(cg.epoch))+" computed by the "+assignor+" assignor for "+
		itoa(int64(len(members)))+" members and "+itoa(int64(len(topics)))+" topics")
}

// reconcile is CurrentAssignmentBuilder.build: it moves m one step
// towards its target and reports whether m changed. owned are the
// partitions the heartbeat reported (ownedGiven false: not reported,
// which counts as still owning everything).
func (c *Core) reconcile(now time.Time, cg *consumerGroup, m *consumerMember, owned partSet, ownedGiven bool) bool {
	if m.Epoch == staticLeaveEpoch || m.reconciledTo(cg.assignEpoch) {
		return false
	}
	ownsAny := func(revoking partSet) bool {
		if !ownedGiven {
			return true
		}
		for p := range owned {
			if revoking.has(p) {
				return true
			}
		}
		return false
	}
	epoch := m.Epoch
	switch m.State {
	case memberUnrevoked:
		if ownsAny(m.Revoking) {
			return false
		}
		epoch = m.Epoch + 1
	case memberStable:
		if m.Epoch == cg.assignEpoch {
			return false
		}
	}
	target := cg.target[m.ID]
	assigned, revoking, pending := partSet{}, partSet{}, partSet{}
	unreleased := false
	for p := range m.Assigned {
		if target.has(p) {
			assigned[p] = struct{}{}
		} else {
			revoking[p] = struct{}{}
		}
	}
	for p := range target {
		if assigned.has(p) {
			continue
		}
		if _, owned := cg.owners[p]; owned {
			unreleased = true
			continue
		}
		pending[p] = struct{}{}
	}
	oldEpoch, oldState, oldAssigned, oldRevoking := m.Epoch, m.State, m.Assigned, m.Revoking
	cg.removeOwners(m)
	switch {
	case len(revoking) > 0 && ownsAny(revoking):
		// Revoke first: the member stays at its epoch until it no longer
		// reports these partitions.
		m.State, m.Assigned, m.Revoking = memberUnrevoked, assigned, revoking
		m.setEpoch(epoch)
	default:
		for p := range pending {
			assigned[p] = struct{}{}
		}
		m.State = memberStable
		if unreleased {
			m.State = memberUnreleased
		}
		m.Assigned, m.Revoking = assigned, partSet{}
		m.setEpoch(cg.assignEpoch)
	}
	cg.addOwners(m)
	at := make(map[tpid]int32, len(m.Assigned)+len(m.Revoking))
	for _, s := range []partSet{m.Assigned, m.Revoking} {
		for p := range s {
			if e, ok := m.AssignedAt[p]; ok && (oldAssigned.has(p) || oldRevoking.has(p)) {
				at[p] = e
			} else {
				at[p] = m.Epoch
			}
		}
	}
	m.AssignedAt = at
	changed := m.Epoch != oldEpoch || m.State != oldState || !m.Assigned.equal(oldAssigned) || !m.Revoking.equal(oldRevoking)
	if changed {
		if m.State == memberUnrevoked {
			m.rebalanceDeadline, m.rebalanceEpoch = now.Add(m.RebalanceTimeout), m.Epoch
		} else {
			m.rebalanceDeadline = time.Time{}
		}
	}
	return changed
}

// setEpoch moves the member to epoch, remembering the one it leaves.
func (m *consumerMember) setEpoch(epoch int32) {
	if epoch != m.Epoch {
		m.PrevEpoch, m.Epoch = m.Epoch, epoch
	}
}

// consumerLeave handles member epochs -1 (leave) and -2 (a static member
// leaves for now and keeps its partitions until its session expires or a
// new member takes its instance id).
func (c *Core) consumerLeave(now time.Time, img TopicImage, req HeartbeatRequest) HeartbeatResult {
	g := c.groups[req.Group]
	if g == nil || g.Type != TypeConsumer {
		return hbErr(kerr.GroupIDNotFound.Code, "Group "+req.Group+" is not a consumer group.")
	}
	defer c.syncClassicFields(g, now)
	cg := g.consumer
	var m *consumerMember
	if req.InstanceID == nil {
		if m = cg.members[req.MemberID]; m == nil {
			return hbErr(kerr.UnknownMemberID.Code, "Member "+req.MemberID+" is not a member of group "+g.ID+".")
		}
	} else {
		inst := *req.InstanceID
		switch m = cg.members[cg.static[inst]]; {
		case m == nil:
			return hbErr(kerr.UnknownMemberID.Code, "Instance id "+inst+" is unknown.")
		case m.ID != req.MemberID:
			return hbErr(kerr.FencedInstanceID.Code, "Static member "+req.MemberID+" with instance id "+inst+" was fenced by member "+m.ID+".")
		}
		if req.MemberEpoch == staticLeaveEpoch {
			cg.removeOwners(m)
			m.Epoch, m.Revoking = staticLeaveEpoch, partSet{}
			m.rebalanceDeadline = time.Time{}
			cg.addOwners(m)
			g.metadataDirty = true
			c.event(g.ID, true, "static member "+inst+" ("+m.ID+") left for now: it keeps its partitions until its session expires")
			return HeartbeatResult{MemberID: m.ID, Epoch: staticLeaveEpoch}
		}
	}
	c.fenceConsumerMember(g, m, "left the group")
	return HeartbeatResult{MemberID: m.ID, Epoch: req.MemberEpoch}
}

// removeConsumerMember drops m with its partitions and target.
func (c *Core) removeConsumerMember(g *Group, m *consumerMember) {
	cg := g.consumer
	cg.removeOwners(m)
	delete(cg.members, m.ID)
	delete(cg.target, m.ID)
	if m.InstanceID != "" && cg.static[m.InstanceID] == m.ID {
		delete(cg.static, m.InstanceID)
	}
}

// fenceConsumerMember removes m and bumps the group epoch (the others'
// target assignment is computed at their next heartbeat).
func (c *Core) fenceConsumerMember(g *Group, m *consumerMember, why string) {
	c.removeConsumerMember(g, m)
	g.consumer.epoch++
	g.metadataDirty = true
	c.events = append(c.events, Event{Group: g.ID, Rebalance: true})
	c.event(g.ID, true, "member "+m.ID+" "+why+": removed, group epoch "+itoa(int64(g.consumer.epoch)))
}

// tickConsumer fences the members whose session expired or that did not
// revoke within their rebalance timeout.
func (c *Core) tickConsumer(now time.Time) {
	for _, gid := range c.GroupIDs() {
		g := c.groups[gid]
		if g == nil || g.Type != TypeConsumer {
			continue
		}
		for _, id := range g.consumer.sortedMembers() {
			m := g.consumer.members[id]
			switch {
			case !now.Before(m.sessionDeadline):
				c.fenceConsumerMember(g, m, "session timed out")
			case !m.rebalanceDeadline.IsZero() && !now.Before(m.rebalanceDeadline) && m.State == memberUnrevoked && m.Epoch == m.rebalanceEpoch:
				c.fenceConsumerMember(g, m, "did not revoke its partitions within its rebalance timeout of "+m.RebalanceTimeout.String())
			}
		}
		c.syncClassicFields(g, now)
	}
}

// consumerNextDeadline is the earliest session or rebalance deadline.
func (c *Core) consumerNextDeadline() time.Time {
	var next time.Time
	for _, g := range c.groups {
		if g.Type != TypeConsumer {
			continue
		}
		for _, m := range g.consumer.members {
			for _, t := range []time.Time{m.sessionDeadline, m.rebalanceDeadline} {
				if !t.IsZero() && (next.IsZero() || t.Before(next)) {
					next = t
				}
			}
		}
	}
	return next
}

// validateConsumerCommit is ConsumerGroup.validateOffsetCommit (with the
// transactional mapping of OffsetMetadataManager): a commit with a
// negative epoch is accepted only by an Empty group (the admin client,
// simple consumers); otherwise the member must exist and commit with
// OffsetCommit v9+, and its epoch must be the member's, or (KIP-1251, as
// Kafka 4.3) an older one at which the member already owned every
// partition of the commit, which it still owns or is revoking: the
// commit a client sends while a heartbeat moves it to the next epoch.
// Else STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for TxnOffsetCommit), for
// the whole request.
func validateConsumerCommit(g *Group, req CommitRequest, transactional bool) int16 {
	cg := g.consumer
	if req.Generation < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[req.MemberID]
	stale := kerr.StaleMemberEpoch.Code
	if transactional {
		stale = kerr.IllegalGeneration.Code
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case !transactional && req.Version < 9:
		return kerr.UnsupportedVersion.Code
	case req.Generation == m.Epoch:
		return 0
	case req.Generation > m.Epoch || req.Generation < 0:
		return stale
	}
	for tp := range req.Offsets {
		t, ok := cg.subscribed[tp.Topic]
		if !ok {
			return stale
		}
		if at, owned := m.AssignedAt[tpid{t.ID, tp.Partition}]; !owned || at > req.Generation {
			return stale
		}
	}
	return 0
}

// ValidateConsumerFetch is ConsumerGroup.validateOffsetFetch for an
// OffsetFetch v9+ group that names a member: 0 when the group is not a
// consumer group or no member is named.
func (c *Core) ValidateConsumerFetch(group string, memberID *string, epoch int32) int16 {
	g := c.groups[group]
	if g == nil || g.Type != TypeConsumer || (memberID == nil && epoch < 0) {
		return 0
	}
	m := g.consumer.members[str(memberID)]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case m.Epoch != epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// expireConsumerOffsets expires an Empty consumer group's offsets (by
// commit time, Kafka's consumer-group condition) and deletes the group
// once none are left.
func (c *Core) expireConsumerOffsets(now time.Time, g *Group) (expired int) {
	if len(g.consumer.members) > 0 {
		return 0
	}
	for tp, o := range g.Offsets {
		if !now.Before(o.CommitTime.Add(c.t.OffsetsRetention)) {
			delete(g.Offsets, tp)
			c.ops = append(c.ops, op{bucket: bucketOffsets, key: offsetKey(g.ID, 0, tp)})
			expired++
		}
	}
	if len(g.Offsets) == 0 && len(g.Txn) == 0 {
		c.deleteGroup(g)
		c.event(g.ID, true, "empty consumer group with no offsets left: deleted")
	}
	return expired
}

// stateName is the group's state as ListGroups and the admin API show it:
// a consumer group's ConsumerState, else the classic State.
func (g *Group) stateName() string {
	if g.consumer != nil {
		return g.consumer.state().String()
	}
	return g.State.String()
}

// memberCount is the number of members of either protocol.
func (g *Group) memberCount() int {
	if g.consumer != nil {
		return len(g.consumer.members)
	}
	return len(g.Members)
}
