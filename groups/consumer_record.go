package groups

import (
	"encoding/hex"
	"fmt"
	"time"
)

// A consumer group's state in its group record (groupRecord.Consumer):
// what Kafka keeps in its ConsumerGroupMetadata, ConsumerGroupMemberMetadata,
// ConsumerGroupTargetAssignment* and ConsumerGroupCurrentMemberAssignment
// records: the group and target epochs, each member's subscription, epoch,
// reconciliation state and partitions, and the target assignment. Session
// deadlines are not stored: after a restart every member's session starts
// again, and members come back by heartbeating with the epoch they have, as
// they do after a Kafka coordinator moves.
type consumerRecord struct {
	Epoch       int32                  `json:"epoch"`
	AssignEpoch int32                  `json:"assignment_epoch"`
	Members     []consumerMemberRecord `json:"members,omitempty"`
	// Subscribed are the subscribed topics that existed at the last target
	// assignment (name → id, partitions).
	Subscribed map[string]topicRecord `json:"subscribed,omitempty"`
}

type topicRecord struct {
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
}

type consumerMemberRecord struct {
	ID              string `json:"id"`
	InstanceID      string `json:"instance_id,omitempty"`
	RackID          string `json:"rack_id,omitempty"`
	ClientID        string `json:"client_id"`
	ClientHost      string `json:"client_host"`
	RebalanceMillis int64  `json:"rebalance_ms"`
	// Topics is non-nil when the member subscribes by names (an empty list
	// is a subscription to nothing).
	Topics    []string           `json:"topics"`
	Regex     string             `json:"regex,omitempty"`
	Assignor  string             `json:"assignor,omitempty"`
	Epoch     int32              `json:"epoch"`
	PrevEpoch int32              `json:"previous_epoch"`
	State     string             `json:"state"`
	Assigned  map[string][]int32 `json:"assigned,omitempty"`
	// AssignedAt is the assignment epoch of each partition of Assigned
	// and Revoking, in the same order (topic, then partition).
	AssignedAt []int32            `json:"assigned_at,omitempty"`
	Revoking   map[string][]int32 `json:"revoking,omitempty"`
	Target     map[string][]int32 `json:"target,omitempty"`
}

func partsRecord(s partSet) map[string][]int32 {
	if len(s) == 0 {
		return nil
	}
	ids, parts := s.byTopic()
	out := make(map[string][]int32, len(ids))
	for _, id := range ids {
		out[hex.EncodeToString(id[:])] = parts[id]
	}
	return out
}

func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("groups: bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

func partsFromRecord(r map[string][]int32) (partSet, error) {
	s := partSet{}
	for k, ps := range r {
		id, err := parseTopicID(k)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			s[tpid{id, p}] = struct{}{}
		}
	}
	return s, nil
}

func (cg *consumerGroup) record() *consumerRecord {
	r := &consumerRecord{Epoch: cg.epoch, AssignEpoch: cg.assignEpoch}
	for _, id := range cg.sortedMembers() {
		m := cg.members[id]
		r.Members = append(r.Members, consumerMemberRecord{ID: m.ID, InstanceID: m.InstanceID, RackID: m.RackID,
			ClientID: m.ClientID, ClientHost: m.ClientHost, RebalanceMillis: m.RebalanceTimeout.Milliseconds(),
			Topics: m.Topics, Regex: m.Regex, Assignor: m.Assignor, Epoch: m.Epoch, PrevEpoch: m.PrevEpoch,
			State: m.State.String(), Assigned: partsRecord(m.Assigned), Revoking: partsRecord(m.Revoking),
			Target: partsRecord(cg.target[m.ID]), AssignedAt: assignedAtRecord(m)})
	}
	if len(cg.subscribed) > 0 {
		r.Subscribed = map[string]topicRecord{}
		for name, t := range cg.subscribed {
			r.Subscribed[name] = topicRecord{ID: hex.EncodeToString(t.ID[:]), Partitions: t.Partitions}
		}
	}
	return r
}

// loadConsumer restores a consumer group from its record: every member's
// session starts at now; a member that was revoking gets its rebalance
// timeout again from now.
func (c *Core) loadConsumer(g *Group, r *consumerRecord, now time.Time) error {
	cg := newConsumerGroup()
	cg.epoch, cg.assignEpoch = r.Epoch, r.AssignEpoch
	for name, t := range r.Subscribed {
		id, err := parseTopicID(t.ID)
		if err != nil {
			return err
		}
		cg.subscribed[name] = assignTopic{ID: id, Partitions: t.Partitions}
	}
	for _, mr := range r.Members {
		m := &consumerMember{ID: mr.ID, InstanceID: mr.InstanceID, RackID: mr.RackID, ClientID: mr.ClientID, ClientHost: mr.ClientHost,
			RebalanceTimeout: time.Duration(mr.RebalanceMillis) * time.Millisecond, Topics: mr.Topics, Regex: mr.Regex,
			Assignor: mr.Assignor, Epoch: mr.Epoch, PrevEpoch: mr.PrevEpoch}
		switch mr.State {
		case memberStable.String():
			m.State = memberStable
		case memberUnrevoked.String():
			m.State = memberUnrevoked
			m.rebalanceDeadline, m.rebalanceEpoch = now.Add(m.RebalanceTimeout), m.Epoch
		case memberUnreleased.String():
			m.State = memberUnreleased
		default:
			return fmt.Errorf("groups: group %q member %q: unknown state %q", g.ID, mr.ID, mr.State)
		}
		if m.Regex != "" {
			re, err := compileSubscriptionRegex(m.Regex)
			if err != nil {
				return fmt.Errorf("groups: group %q member %q: %w", g.ID, mr.ID, err)
			}
			m.re = re
		}
		var err error
		if m.Assigned, err = partsFromRecord(mr.Assigned); err != nil {
			return err
		}
		if m.Revoking, err = partsFromRecord(mr.Revoking); err != nil {
			return err
		}
		if cg.target[m.ID], err = partsFromRecord(mr.Target); err != nil {
			return err
		}
		m.AssignedAt = map[tpid]int32{}
		for i, p := range ownedOf(m) {
			if i < len(mr.AssignedAt) {
				m.AssignedAt[p] = mr.AssignedAt[i]
			}
		}
		m.sessionDeadline = now.Add(c.t.ConsumerSession)
		cg.members[m.ID] = m
		cg.addOwners(m)
		if m.InstanceID != "" {
			cg.static[m.InstanceID] = m.ID
		}
	}
	g.Type, g.ProtocolType, g.consumer = TypeConsumer, "consumer", cg
	c.syncClassicFields(g, g.StateSince)
	return nil
}

// ownedOf lists a member's assigned and revoking partitions in a stable
// order (the order of AssignedAt in its record).
func ownedOf(m *consumerMember) []tpid {
	all := m.Assigned.clone()
	for p := range m.Revoking {
		all[p] = struct{}{}
	}
	return all.sorted()
}

func assignedAtRecord(m *consumerMember) []int32 {
	owned := ownedOf(m)
	if len(owned) == 0 {
		return nil
	}
	out := make([]int32, len(owned))
	for i, p := range owned {
		out[i] = m.AssignedAt[p]
	}
	return out
}
