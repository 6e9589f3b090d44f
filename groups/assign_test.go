package groups

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// The assignors' tables: testdata/assign/*.txt. One command per case:
//
//	assign uniform|range topics=a:6,b:3
//	m1 [instance=I] topics=a,b [prev=a:0,1;b:2]
//	m2 topics=a
//	----
//	m1 a:0,1;b:2   (each member's assignment, then the moved partitions)
//
// go test ./groups -run TestAssignTables -args -rewrite refreshes them.

func TestAssignTables(t *testing.T) {
	datadriven.Walk(t, "testdata/assign/*.txt", func(t *testing.T, path string) {
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			names := map[[16]byte]string{}
			var topics []assignTopic
			for _, tv := range strings.Split(c.Arg("topics", ""), ",") {
				name, n, _ := strings.Cut(tv, ":")
				p, err := strconv.Atoi(n)
				if err != nil {
					t.Fatalf("%s: topics %q: %v", c.Pos, tv, err)
				}
				topics = append(topics, assignTopic{ID: fakeTopicID(name), Partitions: int32(p)})
				names[fakeTopicID(name)] = name
			}
			s := &consumerScenario{t: t, names: names}
			var members []assignMember
			for _, line := range c.Input {
				f := strings.Fields(line)
				m := assignMember{ID: f[0], Topics: map[[16]byte]bool{}, Previous: partSet{}}
				for _, kv := range f[1:] {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "instance":
						m.InstanceID = v
					case "topics":
						for _, name := range strings.Split(v, ",") {
							m.Topics[fakeTopicID(name)] = true
						}
					case "prev":
						m.Previous = ownedSet(s.parseParts(c, v))
					}
				}
				members = append(members, m)
			}
			out := assign(c.Line[len("assign "):strings.Index(c.Line+" ", " topics")], members, topics)
			var lines []string
			moved := 0
			for _, m := range members {
				lines = append(lines, fmt.Sprintf("%s %s (%d)", m.ID, s.fmtParts(out[m.ID]), len(out[m.ID])))
				for p := range m.Previous {
					if !out[m.ID].has(p) {
						moved++
					}
				}
			}
			lines = append(lines, fmt.Sprintf("moved %d", moved))
			return strings.Join(lines, "\n")
		})
	})
}

// TestAssignProperties checks both assignors on random groups: every
// partition of a subscribed topic goes to exactly one of its subscribers;
// the uniform assignor balances homogeneous groups within one partition
// and keeps a previous assignment that is still balanced as it is.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		var topics []assignTopic
		for i := range 1 + rng.IntN(4) {
			topics = append(topics, assignTopic{ID: fakeTopicID("t" + strconv.Itoa(i)), Partitions: int32(1 + rng.IntN(12))})
		}
		homogeneous := rng.IntN(2) == 0
		var members []assignMember
		for i := range 1 + rng.IntN(7) {
			m := assignMember{ID: "m" + strconv.Itoa(i), Topics: map[[16]byte]bool{}, Previous: partSet{}}
			for _, tp := range topics {
				if homogeneous || rng.IntN(2) == 0 {
					m.Topics[tp.ID] = true
				}
				// Random previous partitions, possibly of others or stale.
				for p := range tp.Partitions + 2 {
					if rng.IntN(4) == 0 {
						m.Previous[tpid{tp.ID, p}] = struct{}{}
					}
				}
			}
			members = append(members, m)
		}
		for _, name := range []string{AssignorUniform, AssignorRange} {
			out := assign(name, members, topics)
			owner := map[tpid]string{}
			for _, m := range members {
				for p := range out[m.ID] {
					if prev, dup := owner[p]; dup {
						t.Fatalf("iter %d %s: partition %v given to %s and %s", iter, name, p, prev, m.ID)
					}
					if !m.Topics[p.Topic] {
						t.Fatalf("iter %d %s: %s got a partition of a topic it does not subscribe to", iter, name, m.ID)
					}
					owner[p] = m.ID
				}
			}
			for _, tp := range topics {
				subscribed := false
				for _, m := range members {
					subscribed = subscribed || m.Topics[tp.ID]
				}
				for p := range tp.Partitions {
					if _, ok := owner[tpid{tp.ID, p}]; subscribed && !ok {
						t.Fatalf("iter %d %s: partition %d of a subscribed topic unassigned", iter, name, p)
					}
				}
				if _, ok := owner[tpid{tp.ID, tp.Partitions}]; ok {
					t.Fatalf("iter %d %s: a partition beyond the topic's count was assigned", iter, name)
				}
			}
			if name != AssignorUniform {
				continue
			}
			if homogeneous {
				var loads []int
				for _, m := range members {
					loads = append(loads, len(out[m.ID]))
				}
				sort.Ints(loads)
				if loads[len(loads)-1]-loads[0] > 1 {
					t.Fatalf("iter %d: homogeneous group unbalanced: %v", iter, loads)
				}
			}
			// Sticky: with its own result as the previous assignment, the
			// assignor moves nothing.
			again := make([]assignMember, len(members))
			for i, m := range members {
				again[i] = m
				again[i].Previous = out[m.ID]
			}
			out2 := assign(name, again, topics)
			for _, m := range members {
				if !out2[m.ID].equal(out[m.ID]) {
					t.Fatalf("iter %d: a second run moved partitions of %s", iter, m.ID)
				}
			}
		}
	}
}
