package groups

import (
	"bytes"
	"sort"
)

// The server-side assignors of KIP-848 consumer groups ("uniform" and
// "range", group.consumer.assignors), as pure functions of the members'
// subscriptions, the subscribed topics and the previous target
// assignment. The group's reconciliation (consumer.go) moves members
// towards what they return.
//
// Where this differs from Kafka's UniformAssignor / RangeAssignor:
//   - uniform is one algorithm for homogeneous and heterogeneous
//     subscriptions (Kafka has two builders): keep every partition of the
//     previous target that its member still subscribes to, give each
//     remaining partition to the least loaded subscriber, then move
//     partitions from the most to the least loaded subscriber until no
//     move lowers the spread. For homogeneous subscriptions the result is
//     balanced within one partition, as Kafka's; which member gets an
//     extra partition may differ (Kafka's depends on a hash map's order,
//     ours on member ids);
//   - racks are not considered (neither does Kafka's uniform assignor
//     today).

// Assignor names, as clients send them in ServerAssignor.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
	// defaultAssignor is the first of Kafka's group.consumer.assignors.
	defaultAssignor = AssignorUniform
)

func validAssignor(name string) bool { return name == AssignorUniform || name == AssignorRange }

// tpid is a partition of a topic named by its id (consumer groups track
// topics by id, so a re-created topic is another topic).
type tpid struct {
	Topic     [16]byte
	Partition int32
}

// partSet is a set of partitions.
type partSet map[tpid]struct{}

func (s partSet) has(p tpid) bool { _, ok := s[p]; return ok }

func (s partSet) clone() partSet {
	out := make(partSet, len(s))
	for p := range s {
		out[p] = struct{}{}
	}
	return out
}

func (s partSet) equal(o partSet) bool {
	if len(s) != len(o) {
		return false
	}
	for p := range s {
		if !o.has(p) {
			return false
		}
	}
	return true
}

// sorted lists s by topic id, then partition.
func (s partSet) sorted() []tpid {
	out := make([]tpid, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return tpidLess(out[i], out[j]) })
	return out
}

func tpidLess(a, b tpid) bool {
	if c := bytes.Compare(a.Topic[:], b.Topic[:]); c != 0 {
		return c < 0
	}
	return a.Partition < b.Partition
}

// byTopic groups s by topic id (topics sorted by id, partitions sorted).
func (s partSet) byTopic() ([][16]byte, map[[16]byte][]int32) {
	m := map[[16]byte][]int32{}
	var ids [][16]byte
	for _, p := range s.sorted() {
		if _, ok := m[p.Topic]; !ok {
			ids = append(ids, p.Topic)
		}
		m[p.Topic] = append(m[p.Topic], p.Partition)
	}
	return ids, m
}

// assignTopic is a subscribed topic that exists.
type assignTopic struct {
	ID         [16]byte
	Partitions int32
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	ID, InstanceID string
	// Topics are the ids of the existing topics it subscribes to.
	Topics map[[16]byte]bool
	// Previous is its previous target assignment.
	Previous partSet
}

// assign runs the named assignor: topics in a stable order (the caller's:
// by name), members in any order. The result has an entry for every
// member.
func assign(name string, members []assignMember, topics []assignTopic) map[string]partSet {
	if name == AssignorRange {
		return assignRange(members, topics)
	}
	return assignUniform(members, topics)
}

// assignUniform is the sticky, balanced assignor (see the file comment).
func assignUniform(members []assignMember, topics []assignTopic) map[string]partSet {
	ms := append([]assignMember(nil), members...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	out := make(map[string]partSet, len(ms))
	partitions := map[[16]byte]int32{}
	for _, t := range topics {
		partitions[t.ID] = t.Partitions
	}
	owner := map[tpid]int{} // partition → index into ms
	for i, m := range ms {
		out[m.ID] = partSet{}
		for _, p := range m.Previous.sorted() {
			n, exists := partitions[p.Topic]
			if _, taken := owner[p]; taken || !exists || p.Partition >= n || !m.Topics[p.Topic] {
				continue
			}
			owner[p] = i
			out[m.ID][p] = struct{}{}
		}
	}
	// leastLoaded is the subscriber of topic with the fewest partitions
	// (the first by id on a tie), or -1.
	leastLoaded := func(topic [16]byte) int {
		best := -1
		for i, m := range ms {
			if m.Topics[topic] && (best < 0 || len(out[m.ID]) < len(out[ms[best].ID])) {
				best = i
			}
		}
		return best
	}
	for _, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			tp := tpid{t.ID, p}
			if _, taken := owner[tp]; taken {
				continue
			}
			if i := leastLoaded(t.ID); i >= 0 {
				owner[tp] = i
				out[ms[i].ID][tp] = struct{}{}
			}
		}
	}
	// Balance: move a partition from a member to a less loaded subscriber
	// of its topic while that lowers the spread by at least one. Each
	// move lowers the sum of squared loads, so this ends.
	for moved := true; moved; {
		moved = false
		order := make([]int, len(ms))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return len(out[ms[order[a]].ID]) > len(out[ms[order[b]].ID]) })
		for _, from := range order {
			fromSet := out[ms[from].ID]
			owned := fromSet.sorted()
			for k := len(owned) - 1; k >= 0 && !moved; k-- {
				p := owned[k]
				to := leastLoaded(p.Topic)
				if to < 0 || len(out[ms[to].ID])+1 >= len(fromSet) {
					continue
				}
				delete(fromSet, p)
				out[ms[to].ID][p] = struct{}{}
				moved = true
			}
			if moved {
				break
			}
		}
	}
	return out
}

// assignRange is Kafka's server-side range assignor: per topic, its
// partitions in contiguous ranges over the topic's subscribers, static
// members first (by instance id), then dynamic ones (by member id); the
// first partitions%subscribers subscribers get one more. Members that
// subscribe to the same topics with the same partition counts get the
// same partition numbers of each (co-partitioning).
func assignRange(members []assignMember, topics []assignTopic) map[string]partSet {
	ms := append([]assignMember(nil), members...)
	sort.Slice(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return a.InstanceID < b.InstanceID
		case a.InstanceID != "":
			return true
		case b.InstanceID != "":
			return false
		}
		return a.ID < b.ID
	})
	out := make(map[string]partSet, len(ms))
	for _, m := range ms {
		out[m.ID] = partSet{}
	}
	for _, t := range topics {
		var subs []string
		for _, m := range ms {
			if m.Topics[t.ID] {
				subs = append(subs, m.ID)
			}
		}
		if len(subs) == 0 {
			continue
		}
		quota, extra := int(t.Partitions)/len(subs), int(t.Partitions)%len(subs)
		next := 0
		for i, id := range subs {
			n := quota
			if i < extra {
				n++
			}
			for p := next; p < next+n; p++ {
				out[id][tpid{t.ID, int32(p)}] = struct{}{}
			}
			next += n
		}
	}
	return out
}
