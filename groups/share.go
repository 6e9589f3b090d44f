package groups

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/shares"
)

// Share groups (KIP-932), the group coordinator's part: membership,
// epochs, the server-side assignment and session timeouts. The records
// and their acquisition are the partition leaders' (package leaderstub,
// with package shares' state machine); the coordinator reaches them
// through Config.Shares.
//
// The assignment is Kafka's "simple" share assignor in spirit: every
// partition of a subscribed topic is assigned, members share partitions
// when there are more members than partitions, and nothing needs to be
// revoked first (records are acquired per fetch, not owned by a member),
// so a member gets its new assignment at its next heartbeat.
//
// Durability: a share group's epochs and members are one record
// (bucket share_groups, shareGroupRecord) rewritten at every change of
// membership, subscriptions or epochs; a heartbeat that changed one is
// answered once it is durable. After a restart the members' sessions
// start again (they are fenced if they do not heartbeat within the
// session timeout) and the assignment is computed again from the
// members' subscriptions at the next heartbeat.

// shareGroup is one share group.
type shareGroup struct {
	ID    string
	Epoch int32
	// AssignmentEpoch is the group epoch the assignment was computed at.
	AssignmentEpoch int32
	Members         map[string]*shareMember
	// assignment is the target assignment: member → topic id →
	// partitions (sorted).
	assignment map[string]map[[16]byte][]int32
}

// shareMember is one member of a share group.
type shareMember struct {
	ID, ClientID, ClientHost string
	RackID                   *string
	Epoch, PrevEpoch         int32
	Topics                   []string // sorted
	Deadline                 time.Time
}

// ShareMemberRef names a member that left or was fenced: its records at
// the leaders go back to the group.
type ShareMemberRef struct{ Group, Member string }

// ShareHeartbeatRequest is a ShareGroupHeartbeat's fields.
type ShareHeartbeatRequest struct {
	Group, MemberID      string
	MemberEpoch          int32
	RackID               *string
	Topics               []string // nil: unchanged
	ClientID, ClientHost string
	// SessionTimeout and Interval are the group's (its configs, else the
	// broker's defaults).
	SessionTimeout, Interval time.Duration
}

// ShareHeartbeatResult is a ShareGroupHeartbeat's answer.
type ShareHeartbeatResult struct {
	Err           int16
	ErrMsg        string
	MemberID      string
	Epoch         int32
	HasAssignment bool
	Assignment    []OwnedTopic
	// Left is the member whose records must be released (it left).
	Left *ShareMemberRef
}

// ShareHeartbeat runs one share-group heartbeat: epoch 0 joins (creating
// the group), -1 leaves, a positive epoch heartbeats (the member's
// current or previous epoch; else FENCED_MEMBER_EPOCH).
func (c *Core) ShareHeartbeat(now time.Time, img TopicImage, r ShareHeartbeatRequest) ShareHeartbeatResult {
	switch {
	case r.Group == "":
		return ShareHeartbeatResult{Err: kerr.InvalidRequest.Code, ErrMsg: "GroupId can't be empty."}
	case r.MemberID == "":
		return ShareHeartbeatResult{Err: kerr.InvalidRequest.Code, ErrMsg: "MemberId can't be empty."}
	case r.MemberEpoch == 0 && len(r.Topics) == 0:
		return ShareHeartbeatResult{Err: kerr.InvalidRequest.Code, ErrMsg: "SubscribedTopicNames must be set in first request."}
	case r.MemberEpoch < -1:
		return ShareHeartbeatResult{Err: kerr.InvalidRequest.Code, ErrMsg: "MemberEpoch is invalid."}
	}
	if _, other := c.groups[r.Group]; other {
		return ShareHeartbeatResult{Err: kerr.GroupIDNotFound.Code, ErrMsg: "Group " + r.Group + " is not a share group."}
	}
	g := c.shareGroups[r.Group]
	if g == nil {
		if r.MemberEpoch != 0 {
			// Kafka's answer (a member of a group forgotten at a
			// restart joins again on it).
			return ShareHeartbeatResult{Err: kerr.GroupIDNotFound.Code, ErrMsg: "Share group " + r.Group + " not found."}
		}
		g = c.newShareGroup(r.Group)
	}
	m := g.Members[r.MemberID]
	bump := false // the group epoch moves once per heartbeat that changed it
	joined := m == nil
	epochBefore, memberEpochBefore := g.Epoch, int32(-2)
	var topicsBefore []string
	if m != nil {
		memberEpochBefore, topicsBefore = m.Epoch, m.Topics
	}
	switch {
	case r.MemberEpoch == -1:
		if m == nil {
			return ShareHeartbeatResult{Err: kerr.UnknownMemberID.Code}
		}
		delete(g.Members, r.MemberID)
		g.Epoch++
		c.shareDirty[g.ID] = true
		c.event(g.ID, true, "share member "+r.MemberID+" left")
		return ShareHeartbeatResult{MemberID: r.MemberID, Epoch: -1, Left: &ShareMemberRef{g.ID, r.MemberID}}
	case m == nil && r.MemberEpoch != 0:
		return ShareHeartbeatResult{Err: kerr.UnknownMemberID.Code}
	case m == nil:
		if len(g.Members) >= shareMaxGroupSize {
			return ShareHeartbeatResult{Err: kerr.GroupMaxSizeReached.Code}
		}
		m = &shareMember{ID: r.MemberID}
		g.Members[r.MemberID] = m
		bump = true
		c.event(g.ID, true, "share member "+r.MemberID+" joined")
	case r.MemberEpoch != 0 && r.MemberEpoch != m.Epoch && r.MemberEpoch != m.PrevEpoch:
		return ShareHeartbeatResult{Err: kerr.FencedMemberEpoch.Code}
	}
	m.ClientID, m.ClientHost, m.Deadline = r.ClientID, r.ClientHost, now.Add(r.SessionTimeout)
	if r.RackID != nil {
		m.RackID = r.RackID
	}
	if r.Topics != nil {
		topics := slices.Sorted(slices.Values(r.Topics))
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.Topics) {
			m.Topics = topics
			bump = true
		}
	}
	if bump {
		g.Epoch++
	}
	// The target follows the topics too (created, grown, deleted): a
	// target that changed while the assignment was the epoch's own (no
	// membership change since) is a new epoch, so every member learns it.
	if target := shareAssign(g, img); !sameShareAssignment(target, g.assignment) {
		if g.AssignmentEpoch == g.Epoch {
			g.Epoch++
		}
		g.assignment = target
	}
	g.AssignmentEpoch = g.Epoch
	res := ShareHeartbeatResult{MemberID: m.ID}
	if m.Epoch != g.Epoch {
		m.PrevEpoch, m.Epoch = m.Epoch, g.Epoch
		res.HasAssignment = true
	}
	if r.Topics != nil || r.MemberEpoch == 0 {
		res.HasAssignment = true
	}
	res.Epoch = m.Epoch
	if joined || g.Epoch != epochBefore || m.Epoch != memberEpochBefore || !slices.Equal(m.Topics, topicsBefore) {
		c.shareDirty[g.ID] = true // a heartbeat that changed nothing stores nothing
	}
	if res.HasAssignment {
		res.Assignment = shareOwned(g.assignment[m.ID])
	}
	return res
}

// shareMaxGroupSize is group.share.max.size (Kafka's default).
const shareMaxGroupSize = 200

func (c *Core) newShareGroup(id string) *shareGroup {
	g := &shareGroup{ID: id, Members: map[string]*shareMember{}}
	c.shareGroups[id] = g
	c.shareDirty[id] = true
	return g
}

// EnsureShareGroup creates an empty share group (AlterShareGroupOffsets
// on a group that does not exist yet); GROUP_ID_NOT_FOUND when the id is
// another type's, NON_EMPTY_GROUP... is the caller's check.
func (c *Core) EnsureShareGroup(id string) int16 {
	if _, other := c.groups[id]; other {
		return kerr.GroupIDNotFound.Code
	}
	if c.shareGroups[id] == nil {
		c.newShareGroup(id)
	}
	return 0
}

// ShareGroupMembers is how many members a share group has; ok false when
// there is no such share group.
func (c *Core) ShareGroupMembers(id string) (int, bool) {
	g := c.shareGroups[id]
	if g == nil {
		return 0, false
	}
	return len(g.Members), true
}

// DeleteShareGroup deletes an empty share group: GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, or 0.
func (c *Core) DeleteShareGroup(id string) int16 {
	g := c.shareGroups[id]
	switch {
	case g == nil:
		return kerr.GroupIDNotFound.Code
	case len(g.Members) > 0:
		return kerr.NonEmptyGroup.Code
	}
	delete(c.shareGroups, id)
	c.shareDirty[id] = true
	return 0
}

// ExpireShareMembers fences every share member whose session timed out.
func (c *Core) ExpireShareMembers(now time.Time) []ShareMemberRef {
	var out []ShareMemberRef
	for _, g := range c.shareGroups {
		for id, m := range g.Members {
			if !now.Before(m.Deadline) {
				delete(g.Members, id)
				g.Epoch++
				c.shareDirty[g.ID] = true
				out = append(out, ShareMemberRef{g.ID, id})
				c.event(g.ID, false, "share member "+id+" fenced: session timed out")
			}
		}
	}
	return out
}

// hasShareMembers reports whether any share group has a member, whose
// session can time out.
func (c *Core) hasShareMembers() bool {
	for _, g := range c.shareGroups {
		if len(g.Members) > 0 {
			return true
		}
	}
	return false
}

// ShareGroupIDs lists the share groups, sorted.
func (c *Core) ShareGroupIDs() []string { return slices.Sorted(maps.Keys(c.shareGroups)) }

// shareAssign is the target assignment: per subscribed topic, partition
// p goes to subscriber p mod M when the M subscribers are no more than
// the N partitions, else subscriber i gets partition i mod N (every
// partition assigned, members sharing them), subscribers in member-id
// order.
func shareAssign(g *shareGroup, img TopicImage) map[string]map[[16]byte][]int32 {
	out := map[string]map[[16]byte][]int32{}
	subs := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		for _, t := range g.Members[id].Topics {
			subs[t] = append(subs[t], id)
		}
	}
	for topic, members := range subs {
		tid, n, ok := img.TopicByName(topic)
		if !ok || n <= 0 {
			continue
		}
		add := func(member string, p int32) {
			if out[member] == nil {
				out[member] = map[[16]byte][]int32{}
			}
			out[member][tid] = append(out[member][tid], p)
		}
		if int32(len(members)) <= n {
			for p := range n {
				add(members[int(p)%len(members)], p)
			}
		} else {
			for i, m := range members {
				add(m, int32(i)%n)
			}
		}
	}
	return out
}

func sameShareAssignment(a, b map[string]map[[16]byte][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y map[[16]byte][]int32) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]int32])
	})
}

func shareOwned(a map[[16]byte][]int32) []OwnedTopic {
	out := make([]OwnedTopic, 0, len(a))
	for _, id := range slices.SortedFunc(maps.Keys(a), func(x, y [16]byte) int { return slices.Compare(x[:], y[:]) }) {
		out = append(out, OwnedTopic{TopicID: id, Partitions: slices.Clone(a[id])})
	}
	return out
}

// shareState is a share group's state name (Kafka's ShareGroupState).
func (g *shareGroup) stateName() string {
	if len(g.Members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func sortedInt32(s []int32) []int32 { return slices.Sorted(slices.Values(s)) }

// shareGroupRecord is a share group as stored (JSON, as the other group
// records, so a later release can add fields).
type shareGroupRecord struct {
	Epoch           int32               `json:"epoch"`
	AssignmentEpoch int32               `json:"assignment_epoch"`
	Members         []shareMemberRecord `json:"members,omitempty"`
}

type shareMemberRecord struct {
	ID         string   `json:"id"`
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	RackID     *string  `json:"rack_id,omitempty"`
	Epoch      int32    `json:"epoch"`
	PrevEpoch  int32    `json:"prev_epoch"`
	Topics     []string `json:"topics"`
}

// shareOps turns the share groups changed since the last Take into ops.
func (c *Core) shareOps() {
	for _, id := range sortedKeys(c.shareDirty) {
		g := c.shareGroups[id]
		if g == nil {
			c.ops = append(c.ops, op{bucket: bucketShareGroups, key: []byte(id)})
			continue
		}
		r := shareGroupRecord{Epoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch}
		for _, mid := range sortedKeys(g.Members) {
			m := g.Members[mid]
			r.Members = append(r.Members, shareMemberRecord{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost,
				RackID: m.RackID, Epoch: m.Epoch, PrevEpoch: m.PrevEpoch, Topics: m.Topics})
		}
		c.ops = append(c.ops, op{bucket: bucketShareGroups, key: []byte(id), value: mustJSON(r)})
	}
	clear(c.shareDirty)
}

// loadShareGroup restores a stored share group; its members' sessions
// start at now (with Kafka's default timeout until their next heartbeat
// brings the group's).
func (c *Core) loadShareGroup(id string, v []byte, now time.Time) error {
	var r shareGroupRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return fmt.Errorf("groups: share group %q: %w", id, err)
	}
	g := &shareGroup{ID: id, Epoch: r.Epoch, AssignmentEpoch: r.AssignmentEpoch, Members: map[string]*shareMember{}}
	for _, mr := range r.Members {
		g.Members[mr.ID] = &shareMember{ID: mr.ID, ClientID: mr.ClientID, ClientHost: mr.ClientHost, RackID: mr.RackID,
			Epoch: mr.Epoch, PrevEpoch: mr.PrevEpoch, Topics: mr.Topics, Deadline: now.Add(shares.DefaultSessionTimeout)}
	}
	c.shareGroups[id] = g
	return nil
}
