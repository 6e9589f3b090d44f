package groups

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// The consumer group state machine's scenarios: testdata/consumer/*.txt,
// replayed against one Core per file with a clock only `tick` moves. Every
// step's records are applied to a bbolt file, so `restart` loads a new
// Core from what was stored. Commands:
//
//	topics a=3 b=2                   (the cluster's topics: name=partitions)
//	hb g=G member=M epoch=E [instance=I] [topics=a,b] [regex=R] [assignor=A]
//	   [owned=a:0,1;b:2 | owned= (none) | owned=- (null)] [rebalance=30s|-1] [rack=R] [v=1]
//	     epoch 0 defaults to owned= and rebalance=30s; other epochs to
//	     owned=- (null), rebalance=-1 and no subscription fields
//	tick d=DURATION
//	commit g=G member=M epoch=E [v=9] [txn] offsets=t:p:o,...
//	fetch-check g=G [member=M] epoch=E
//	describe g=G
//	offsets g=G                      (the committed offsets)
//	classic-join g=G                 (a JoinGroup v0 of a new member)
//	restart
//
// hb prints the answer (the assignment only when the answer has one);
// describe the group's state and epochs, then one line per member: epoch,
// reconciliation state, assigned / revoking partitions and target. go
// test ./groups -run TestConsumerScenarios -args -rewrite refreshes the
// expected output.

type fakeTopics map[string]int32

func fakeTopicID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

func (f fakeTopics) TopicByName(name string) ([16]byte, int32, bool) {
	n, ok := f[name]
	return fakeTopicID(name), n, ok
}

func (f fakeTopics) TopicByID(id [16]byte) (string, bool) {
	for name := range f {
		if fakeTopicID(name) == id {
			return name, true
		}
	}
	return "", false
}

func (f fakeTopics) TopicNames() []string {
	var out []string
	for name := range f {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

type consumerScenario struct {
	t      *testing.T
	core   *Core
	now    time.Time
	topics fakeTopics
	names  map[[16]byte]string // every topic id ever seen
	db     *bbolt.DB
	ids    int
}

var consumerTimeouts = Timeouts{MinSession: time.Second, MaxSession: time.Minute, OffsetsRetention: time.Hour,
	ConsumerSession: 10 * time.Second, ConsumerHeartbeat: 2 * time.Second}

func newConsumerScenario(t *testing.T) *consumerScenario {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "groups.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &consumerScenario{t: t, now: time.Unix(1_000_000, 0), topics: fakeTopics{}, names: map[[16]byte]string{}, db: db}
	s.core = s.newCore()
	return s
}

func (s *consumerScenario) newCore() *Core {
	return NewCore(consumerTimeouts, 4, func() string {
		s.ids++
		return "gen" + strconv.Itoa(s.ids)
	})
}

// store applies what the last step produced to bbolt, as the shell's log
// does.
func (s *consumerScenario) store() {
	out := s.core.Take()
	if len(out.Ops) == 0 {
		return
	}
	rec := encodeOps(out.Ops)
	if err := s.db.Update(func(tx *bbolt.Tx) error { return ApplyRecord(tx, rec) }); err != nil {
		s.t.Fatal(err)
	}
}

func (s *consumerScenario) restart() {
	s.core = s.newCore()
	if err := s.db.View(func(tx *bbolt.Tx) error { return s.core.load(bboltEach(tx), s.now) }); err != nil {
		s.t.Fatal(err)
	}
}

func (s *consumerScenario) fmtParts(ps partSet) string {
	ids, parts := ps.byTopic()
	var names []string
	byName := map[string][]int32{}
	for _, id := range ids {
		n := s.names[id]
		names = append(names, n)
		byName[n] = parts[id]
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		var ps []string
		for _, p := range byName[n] {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		out = append(out, n+":"+strings.Join(ps, ","))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ";")
}

func (s *consumerScenario) parseParts(c *datadriven.Case, v string) []OwnedTopic {
	out := []OwnedTopic{}
	if v == "" {
		return out
	}
	for _, t := range strings.Split(v, ";") {
		name, ps, ok := strings.Cut(t, ":")
		if !ok {
			s.t.Fatalf("%s: owned %q: want topic:p,p;topic:p", c.Pos, v)
		}
		ot := OwnedTopic{TopicID: fakeTopicID(name)}
		s.names[ot.TopicID] = name
		for _, p := range strings.Split(ps, ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				s.t.Fatalf("%s: partition %q: %v", c.Pos, p, err)
			}
			ot.Partitions = append(ot.Partitions, int32(n))
		}
		out = append(out, ot)
	}
	return out
}

func optStr(c *datadriven.Case, key string) *string {
	if v, ok := c.Args[key]; ok {
		return &v
	}
	return nil
}

func (s *consumerScenario) run(t *testing.T, c *datadriven.Case) string {
	defer s.store()
	g := c.Arg("g", "g")
	switch c.Cmd {
	case "topics":
		s.topics = fakeTopics{}
		for k, v := range c.Args {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %s=%q: %v", c.Pos, k, v, err)
			}
			s.topics[k] = int32(n)
			s.names[fakeTopicID(k)] = k
		}
		return "ok"
	case "hb":
		epoch := int32(num(t, c, "epoch", 0))
		req := HeartbeatRequest{Version: int16(num(t, c, "v", 1)), Group: g, MemberID: c.Arg("member", ""), MemberEpoch: epoch,
			InstanceID: optStr(c, "instance"), RackID: optStr(c, "rack"), Regex: optStr(c, "regex"), Assignor: optStr(c, "assignor"),
			ClientID: "cl", ClientHost: "/127.0.0.1", RebalanceTimeoutMs: -1}
		def := func(key, v string) string {
			if epoch == 0 {
				return c.Arg(key, v)
			}
			return c.Arg(key, "-")
		}
		if r := def("rebalance", "30s"); r != "-" && r != "-1" {
			req.RebalanceTimeoutMs = int32(dur(t, c, "rebalance", r).Milliseconds())
		}
		if o := def("owned", ""); o != "-" {
			req.Owned = s.parseParts(c, o)
		}
		if v, ok := c.Args["topics"]; ok {
			req.Topics = []string{}
			if v != "" {
				req.Topics = strings.Split(v, ",")
			}
		}
		res := s.core.ConsumerHeartbeat(s.now, s.topics, req)
		if res.Err != 0 {
			return "hb " + code(res.Err) + ": " + res.ErrMsg
		}
		out := fmt.Sprintf("hb member=%s epoch=%d interval=%s", res.MemberID, res.Epoch, res.Interval)
		if res.HasAssignment {
			out += " assignment=" + s.fmtParts(ownedSet(res.Assignment))
		}
		return out
	case "tick":
		s.now = s.now.Add(dur(t, c, "d", "1s"))
		if next := s.core.NextDeadline(); !next.IsZero() && !s.now.Before(next) {
			s.core.Tick(s.now)
		}
		return "ticked"
	case "commit":
		req := CommitRequest{Group: g, MemberID: c.Arg("member", ""), Generation: int32(num(t, c, "epoch", -1)),
			Offsets: parseOffsets(t, c), Version: int16(num(t, c, "v", 9))}
		if c.Has("txn") {
			return "txn-commit " + code(s.core.TxnCommit(s.now, req, 1, 0))
		}
		return "commit " + code(s.core.Commit(s.now, req))
	case "fetch-check":
		return "fetch " + code(s.core.ValidateConsumerFetch(g, optStr(c, "member"), int32(num(t, c, "epoch", -1))))
	case "offsets":
		var lines []string
		for _, f := range s.core.Fetch(g, nil, false) {
			lines = append(lines, fmt.Sprintf("%s:%d offset=%d", f.Topic, f.Partition, f.Offset.Offset))
		}
		if len(lines) == 0 {
			return "no offsets"
		}
		return strings.Join(lines, "\n")
	case "classic-join":
		res, waiting := s.core.Join(s.now, JoinRequest{Group: g, ClientID: "c", ProtocolType: "consumer",
			Protocols: []Protocol{{Name: "range", Metadata: []byte("m")}}, SessionTimeout: 10 * time.Second,
			RebalanceTimeout: 10 * time.Second}, 1)
		if waiting {
			return "join waiting"
		}
		return fmtJoin(res)
	case "restart":
		s.restart()
		return "restarted"
	case "describe":
		gr := s.core.Group(g)
		if gr == nil {
			return "no group"
		}
		if gr.consumer == nil {
			return fmt.Sprintf("%s group, state %s", gr.Type, gr.stateName())
		}
		cg := gr.consumer
		lines := []string{fmt.Sprintf("%s epoch=%d assignment-epoch=%d assignor=%s", cg.state(), cg.epoch, cg.assignEpoch, cg.preferredAssignor())}
		for _, id := range cg.sortedMembers() {
			m := cg.members[id]
			l := fmt.Sprintf("  %s epoch=%d %s assigned=%s", id, m.Epoch, m.State, s.fmtParts(m.Assigned))
			if len(m.Revoking) > 0 {
				l += " revoking=" + s.fmtParts(m.Revoking)
			}
			l += " target=" + s.fmtParts(cg.target[id])
			if m.InstanceID != "" {
				l += " instance=" + m.InstanceID
			}
			lines = append(lines, l)
		}
		return strings.Join(lines, "\n")
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func TestConsumerScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/consumer/*.txt", func(t *testing.T, path string) {
		s := newConsumerScenario(t)
		datadriven.RunFile(t, path, s.run)
	})
}

// TestConsumerProtocolByProfile: the KIP-848 keys are served by nodes of
// Kafka 4.0 and later only (3.9 had ConsumerGroupHeartbeat v0 as an
// early-access preview, off by default).
func TestConsumerProtocolByProfile(t *testing.T) {
	for version, want := range map[string]bool{"3.9": false, "4.0": true, "4.1": true, "4.2": true, "9.9": false} {
		if got := ServesConsumerProtocol(version); got != want {
			t.Errorf("ServesConsumerProtocol(%q) = %v, want %v", version, got, want)
		}
	}
}

// bboltEach reads a bbolt transaction's buckets as Core.load does a log's.
func bboltEach(tx *bbolt.Tx) func([]byte, func(k, v []byte) error) error {
	return func(bucket []byte, fn func(k, v []byte) error) error {
		bk := tx.Bucket(bucket)
		if bk == nil {
			return nil
		}
		return bk.ForEach(fn)
	}
}
