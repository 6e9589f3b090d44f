package groups

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The read and delete accessors the admin API calls (GET /v1/groups,
// GET /v1/groups/{id}, DELETE /v1/groups/{id}, `txn describe`'s pending
// offsets). They read the in-memory state under the coordinator's lock;
// each answer is a copy.

// GroupSummary is one group as ListGroups shows it.
type GroupSummary struct {
	Group        string `json:"group"`
	Type         string `json:"type"`  // "classic" (KIP-848 "consumer" later)
	State        string `json:"state"` // Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"` // the selected assignor; "" unless Stable or CompletingRebalance
	Generation   int32  `json:"generation"`
	Members      int    `json:"members"`
	// Coordinator is the node id of the group's coordinator.
	Coordinator int32 `json:"coordinator"`
	// Partition is the group's __consumer_offsets partition.
	Partition int32 `json:"offsets_partition"`
}

// TopicPartitions is an assignment of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// MemberInfo is one member of a group.
type MemberInfo struct {
	MemberID         string        `json:"member_id"`
	InstanceID       string        `json:"instance_id,omitempty"`
	ClientID         string        `json:"client_id"`
	ClientHost       string        `json:"client_host"`
	SessionTimeout   time.Duration `json:"session_timeout"`
	RebalanceTimeout time.Duration `json:"rebalance_timeout"`
	// Assignment is the member's partitions, decoded when the group's
	// protocol type is "consumer"; AssignmentBytes is the raw assignment.
	Assignment      []TopicPartitions `json:"assignment,omitempty"`
	AssignmentBytes []byte            `json:"assignment_bytes,omitempty"`
}

// OffsetInfo is a committed offset.
type OffsetInfo struct {
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	Offset      int64     `json:"offset"`
	LeaderEpoch int32     `json:"leader_epoch"`
	Metadata    string    `json:"metadata,omitempty"`
	CommitTime  time.Time `json:"commit_time"`
}

// PendingOffsetInfo is a transactional offset waiting for its marker.
type PendingOffsetInfo struct {
	Group string `json:"group"`
	OffsetInfo
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
}

// GroupDescription is one group in full.
type GroupDescription struct {
	GroupSummary
	Leader  string              `json:"leader,omitempty"`
	Members []MemberInfo        `json:"members"`
	Offsets []OffsetInfo        `json:"offsets"`
	Pending []PendingOffsetInfo `json:"pending_offsets"`
	// SharePartitions are a share group's partitions at the leaders:
	// start offset, end, lag and records in flight.
	SharePartitions []SharePartition `json:"share_partitions,omitempty"`
}

func (c *Coordinator) summary(g *Group) GroupSummary {
	return GroupSummary{Group: g.ID, Type: string(g.Type), State: g.stateName(), ProtocolType: g.ProtocolType,
		Protocol: g.Protocol, Generation: g.Generation, Members: g.memberCount(), Coordinator: c.cfg.NodeID, Partition: g.partition}
}

// ListGroups returns every group, sorted by id.
func (c *Coordinator) ListGroups() []GroupSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []GroupSummary{}
	for _, id := range c.core.GroupIDs() {
		out = append(out, c.summary(c.core.groups[id]))
	}
	for _, id := range c.core.ShareGroupIDs() {
		out = append(out, c.shareSummary(c.core.shareGroups[id]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// shareSummary is a share group as ListGroups shows it: its generation is
// the group epoch.
func (c *Coordinator) shareSummary(g *shareGroup) GroupSummary {
	return GroupSummary{Group: g.ID, Type: "share", State: g.stateName(), ProtocolType: "share", Protocol: "simple",
		Generation: g.Epoch, Members: len(g.Members), Coordinator: c.cfg.NodeID, Partition: -1}
}

// describeShareGroup describes a share group: members, their assignment,
// and its partitions at the leaders (as kafka-share-groups.sh --describe),
// asked once the coordinator's lock is released; false if id is not a
// share group.
func (c *Coordinator) describeShareGroup(id string) (GroupDescription, bool) {
	c.mu.Lock()
	g := c.core.shareGroups[id]
	if g == nil {
		c.mu.Unlock()
		return GroupDescription{}, false
	}
	d := GroupDescription{GroupSummary: c.shareSummary(g), Members: []MemberInfo{}, Offsets: []OffsetInfo{}, Pending: []PendingOffsetInfo{}}
	for _, mid := range sortedKeys(g.Members) {
		m := g.Members[mid]
		mi := MemberInfo{MemberID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		for _, t := range shareOwned(g.assignment[m.ID]) {
			if name, ok := c.cfg.View.TopicByID(t.TopicID); ok {
				mi.Assignment = append(mi.Assignment, TopicPartitions{Topic: name.Name, Partitions: t.Partitions})
			}
		}
		d.Members = append(d.Members, mi)
	}
	c.mu.Unlock()
	if c.cfg.Shares != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shareStateTimeout)
		defer cancel()
		// A leader that cannot be asked leaves its partitions out of
		// the view: the members and assignment are still shown.
		d.SharePartitions, _ = c.cfg.Shares.Partitions(ctx, id)
	}
	return d, true
}

// DescribeGroup returns one group; false if there is none.
func (c *Coordinator) DescribeGroup(id string) (GroupDescription, bool) {
	if d, ok := c.describeShareGroup(id); ok {
		return d, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.core.groups[id]
	if g == nil {
		return GroupDescription{}, false
	}
	d := GroupDescription{GroupSummary: c.summary(g), Leader: g.Leader, Members: []MemberInfo{}, Offsets: []OffsetInfo{}, Pending: []PendingOffsetInfo{}}
	for _, mid := range sortedMembers(g) {
		m := g.Members[mid]
		mi := MemberInfo{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SessionTimeout: m.SessionTimeout, RebalanceTimeout: m.RebalanceTimeout, AssignmentBytes: m.Assignment}
		if g.ProtocolType == "consumer" && len(m.Assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.Assignment) == nil {
				for _, t := range a.Topics {
					mi.Assignment = append(mi.Assignment, TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
		}
		d.Members = append(d.Members, mi)
	}
	if g.Type == TypeConsumer && g.consumer != nil {
		d.Members = append(d.Members, c.consumerMembers(g.consumer)...)
	}
	for _, tp := range sortedTPs(g.Offsets) {
		d.Offsets = append(d.Offsets, offsetInfo(tp, g.Offsets[tp]))
	}
	d.Pending = pendingOf(g, -1)
	return d, true
}

// PendingOffsets returns the transactional offsets of producerID that
// wait for their marker, in every group.
func (c *Coordinator) PendingOffsets(producerID int64) []PendingOffsetInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []PendingOffsetInfo{}
	for _, id := range c.core.GroupIDs() {
		out = append(out, pendingOf(c.core.groups[id], producerID)...)
	}
	return out
}

// DeleteGroup deletes an Empty group and its committed offsets, once
// durable: kerr.GroupIDNotFound, kerr.NonEmptyGroup, or a storage error.
func (c *Coordinator) DeleteGroup(ctx context.Context, id string) error {
	var share bool
	var shareCode int16
	sharePos, err := c.step(func(time.Time) {
		if _, share = c.core.shareGroups[id]; share {
			shareCode = c.core.DeleteShareGroup(id)
		}
	})
	if share {
		if shareCode != 0 {
			return kerr.ErrorForCode(shareCode)
		}
		if err == nil && sharePos != 0 {
			err = c.space.Log().WaitDurable(ctx, sharePos)
		}
		if err != nil {
			return err
		}
		if c.cfg.Shares != nil {
			return c.cfg.Shares.Delete(ctx, id, "")
		}
		return nil
	}
	var code int16
	pos, err := c.step(func(now time.Time) { code = c.core.DeleteGroup(now, id) })
	if code != 0 {
		return kerr.ErrorForCode(code)
	}
	if err != nil {
		return err
	}
	if pos == 0 {
		return nil
	}
	return c.space.Log().WaitDurable(ctx, pos)
}

func offsetInfo(tp TP, o Offset) OffsetInfo {
	return OffsetInfo{Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
		Metadata: o.Metadata, CommitTime: o.CommitTime}
}

// pendingOf lists g's pending offsets of one producer (-1: every one).
func pendingOf(g *Group, producerID int64) []PendingOffsetInfo {
	var pids []int64
	for pid := range g.Txn {
		if producerID < 0 || pid == producerID {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	out := []PendingOffsetInfo{}
	for _, pid := range pids {
		for _, tp := range sortedTPs(g.Txn[pid]) {
			o := g.Txn[pid][tp]
			out = append(out, PendingOffsetInfo{Group: g.ID, OffsetInfo: offsetInfo(tp, o), ProducerID: pid, ProducerEpoch: o.ProducerEpoch})
		}
	}
	return out
}

func sortedTPs(m map[TP]Offset) []TP {
	tps := make([]TP, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	return tps
}

// consumerMembers describes a KIP-848 group's members: the partitions each
// owns, named through the view (a topic deleted since is left out).
func (c *Coordinator) consumerMembers(cg *consumerGroup) []MemberInfo {
	var out []MemberInfo
	for _, id := range cg.sortedMembers() {
		m := cg.members[id]
		mi := MemberInfo{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeout: m.RebalanceTimeout}
		ids, parts := m.Assigned.byTopic()
		for _, tid := range ids {
			if t, ok := c.cfg.View.TopicByID(tid); ok {
				mi.Assignment = append(mi.Assignment, TopicPartitions{Topic: t.Name, Partitions: parts[tid]})
			}
		}
		out = append(out, mi)
	}
	return out
}
