package groups

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
// Where it simplifies Kafka: share-group membership is held in memory,
// not written to the log: after a restart a member's heartbeat is
// GROUP_ID_NOT_FOUND and it joins again (the records' state, which is
// what must survive, is at the leaders). A group with no members and
// no share state is forgotten at a restart.

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
	switch {
	case r.MemberEpoch == -1:
		if m == nil {
			return ShareHeartbeatResult{Err: kerr.UnknownMemberID.Code}
		}
		delete(g.Members, r.MemberID)
		g.Epoch++
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
	// The target follows the topics too (created, grown, deleted).
	if target := shareAssign(g, img); !sameShareAssignment(target, g.assignment) || g.AssignmentEpoch != g.Epoch {
		g.assignment, g.AssignmentEpoch = target, g.Epoch
	}
	res := ShareHeartbeatResult{MemberID: m.ID}
	if m.Epoch != g.Epoch {
		m.PrevEpoch, m.Epoch = m.Epoch, g.Epoch
		res.HasAssignment = true
	}
	if r.Topics != nil || r.MemberEpoch == 0 {
		res.HasAssignment = true
	}
	res.Epoch = m.Epoch
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
				out = append(out, ShareMemberRef{g.ID, id})
				c.event(g.ID, false, "share member "+id+" fenced: session timed out")
			}
		}
	}
	return out
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
