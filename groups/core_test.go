package groups

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// The group state machine's scenarios: testdata/*.txt, replayed against one
// Core per file with a clock that only `tick` moves. Commands:
//
//	join g=G [member=M] [instance=I] [client=C] [session=10s] [rebalance=20s] [protocols=a,b] [meta=x] [v=N] [as=TOKEN]
//	sync g=G member=M gen=N [instance=I] [assign=m1:x,m2:y] [as=TOKEN]
//	heartbeat g=G member=M gen=N [instance=I]
//	leave g=G members=m1,m2 [instances=i1,i2]
//	tick d=DURATION
//	settings initial-delay=DURATION   (group.initial.rebalance.delay.ms)
//	commit g=G [member=M] [gen=N] [instance=I] offsets=t:p:o,...
//	txn-commit g=G pid=P epoch=E [member=M] [gen=N] offsets=t:p:o,...
//	marker g=G pid=P epoch=E coord=C tv=T commit|abort   (the group's partition)
//	fetch g=G [stable] [tps=t:p,...]
//	delete g=G
//	expire
//	state g=G
//
// Each command prints its direct result, then every answer released to a
// waiting request ("-> TOKEN: ..."). go test ./groups -run TestScenarios
// -args -rewrite refreshes the expected output.

type scenario struct {
	t      *testing.T
	core   *Core
	now    time.Time
	tokens map[string]uint64
	names  map[uint64]string
	next   uint64
	ids    int
}

func newScenario(t *testing.T) *scenario {
	s := &scenario{t: t, now: time.Unix(1_000_000, 0), tokens: map[string]uint64{}, names: map[uint64]string{}}
	s.core = NewCore(Timeouts{MinSession: time.Second, MaxSession: time.Minute, OffsetsRetention: time.Hour}, 4, func() string {
		s.ids++
		return strconv.Itoa(s.ids)
	})
	return s
}

func (s *scenario) token(name string) uint64 {
	s.next++
	s.tokens[name] = s.next
	s.names[s.next] = name
	return s.next
}

func dur(t *testing.T, c *datadriven.Case, key, def string) time.Duration {
	d, err := time.ParseDuration(c.Arg(key, def))
	if err != nil {
		t.Fatalf("%s: %s: %v", c.Pos, key, err)
	}
	return d
}

func num(t *testing.T, c *datadriven.Case, key string, def int64) int64 {
	v, ok := c.Args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", c.Pos, key, v, err)
	}
	return n
}

func code(c int16) string {
	if c == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(c))
}

func fmtJoin(r JoinResult) string {
	if r.Err != 0 {
		if r.MemberID != "" {
			return fmt.Sprintf("join %s member=%s", code(r.Err), r.MemberID)
		}
		return "join " + code(r.Err)
	}
	out := fmt.Sprintf("join gen=%d protocol=%s leader=%s member=%s", r.Generation, r.Protocol, r.Leader, r.MemberID)
	if r.Members != nil {
		var ms []string
		for _, m := range r.Members {
			ms = append(ms, m.ID+"("+string(m.Metadata)+")")
		}
		out += " members=" + strings.Join(ms, ",")
	}
	if r.SkipAssignment {
		out += " skip-assignment"
	}
	return out
}

func fmtSync(r SyncResult) string {
	if r.Err != 0 {
		return "sync " + code(r.Err)
	}
	return fmt.Sprintf("sync assignment=%q", r.Assignment)
}

func parseOffsets(t *testing.T, c *datadriven.Case) map[TP]Offset {
	out := map[TP]Offset{}
	for _, s := range strings.Split(c.Arg("offsets", ""), ",") {
		f := strings.Split(s, ":")
		if len(f) != 3 {
			t.Fatalf("%s: offsets entry %q: want topic:partition:offset", c.Pos, s)
		}
		p, _ := strconv.Atoi(f[1])
		o, _ := strconv.ParseInt(f[2], 10, 64)
		out[TP{f[0], int32(p)}] = Offset{Offset: o, LeaderEpoch: -1}
	}
	return out
}

func (s *scenario) run(t *testing.T, c *datadriven.Case) string {
	g := c.Arg("g", "g")
	var lines []string
	switch c.Cmd {
	case "join":
		var ps []Protocol
		for _, p := range strings.Split(c.Arg("protocols", "range"), ",") {
			ps = append(ps, Protocol{Name: p, Metadata: []byte(c.Arg("meta", "m"))})
		}
		req := JoinRequest{Group: g, MemberID: c.Arg("member", ""), InstanceID: c.Arg("instance", ""), ClientID: c.Arg("client", "c"),
			ProtocolType: c.Arg("type", "consumer"), Protocols: ps, SessionTimeout: dur(t, c, "session", "10s"),
			RebalanceTimeout: dur(t, c, "rebalance", "20s"), RequireKnownMemberID: num(t, c, "v", 9) >= 4}
		res, waiting := s.core.Join(s.now, req, s.token(c.Arg("as", "join")))
		if waiting {
			lines = append(lines, "waiting")
		} else {
			lines = append(lines, fmtJoin(res))
		}
	case "sync":
		req := SyncRequest{Group: g, MemberID: c.Arg("member", ""), InstanceID: c.Arg("instance", ""), Generation: int32(num(t, c, "gen", 0)),
			Assignments: map[string][]byte{}}
		if a := c.Arg("assign", ""); a != "" {
			for _, kv := range strings.Split(a, ",") {
				k, v, _ := strings.Cut(kv, ":")
				req.Assignments[k] = []byte(v)
			}
		}
		res, waiting := s.core.Sync(s.now, req, s.token(c.Arg("as", "sync")))
		if waiting {
			lines = append(lines, "waiting")
		} else {
			lines = append(lines, fmtSync(res))
		}
	case "heartbeat":
		lines = append(lines, "heartbeat "+code(s.core.Heartbeat(s.now, g, c.Arg("member", ""), c.Arg("instance", ""), int32(num(t, c, "gen", 0)))))
	case "leave":
		var ms []LeaveMember
		insts := strings.Split(c.Arg("instances", ""), ",")
		for i, m := range strings.Split(c.Arg("members", ""), ",") {
			lm := LeaveMember{MemberID: m}
			if i < len(insts) {
				lm.InstanceID = insts[i]
			}
			ms = append(ms, lm)
		}
		top, codes := s.core.Leave(s.now, g, ms)
		out := "leave " + code(top)
		for _, cd := range codes {
			out += " " + code(cd)
		}
		lines = append(lines, out)
	case "settings":
		s.core.t.InitialRebalanceDelay = dur(t, c, "initial-delay", "0s")
		lines = append(lines, "ok")
	case "tick":
		s.now = s.now.Add(dur(t, c, "d", "1s"))
		s.core.Tick(s.now)
		lines = append(lines, "ticked")
	case "commit":
		lines = append(lines, "commit "+code(s.core.Commit(s.now, CommitRequest{Group: g, MemberID: c.Arg("member", ""),
			InstanceID: c.Arg("instance", ""), Generation: int32(num(t, c, "gen", -1)), Offsets: parseOffsets(t, c)})))
	case "txn-commit":
		lines = append(lines, "txn-commit "+code(s.core.TxnCommit(s.now, CommitRequest{Group: g, MemberID: c.Arg("member", ""),
			Generation: int32(num(t, c, "gen", -1)), Offsets: parseOffsets(t, c)}, num(t, c, "pid", 1), int16(num(t, c, "epoch", 0)))))
	case "marker":
		err := s.core.Marker(s.now, s.core.partitionOf(g), num(t, c, "pid", 1), int16(num(t, c, "epoch", 0)), int32(num(t, c, "coord", 0)),
			int8(num(t, c, "tv", 2)), c.Has("commit"))
		if ke, ok := err.(*kerr.Error); ok {
			lines = append(lines, "marker "+ke.Message)
		} else if err != nil {
			lines = append(lines, "marker "+err.Error())
		} else {
			lines = append(lines, "marker NONE")
		}
		ps := s.core.Producers(s.core.partitionOf(g))[num(t, c, "pid", 1)]
		lines = append(lines, fmt.Sprintf("producer epoch=%d coord=%d txn_open=%v", ps.Epoch, ps.CoordinatorEpoch, ps.TxnOpen))
	case "fetch":
		var tps []TP
		if v := c.Arg("tps", ""); v != "" {
			tps = []TP{}
			for _, s := range strings.Split(v, ",") {
				topic, p, _ := strings.Cut(s, ":")
				n, _ := strconv.Atoi(p)
				tps = append(tps, TP{topic, int32(n)})
			}
		}
		for _, f := range s.core.Fetch(g, tps, c.Has("stable")) {
			lines = append(lines, fmt.Sprintf("%s:%d offset=%d %s", f.Topic, f.Partition, f.Offset.Offset, code(f.Err)))
		}
		if len(lines) == 0 {
			lines = append(lines, "no offsets")
		}
	case "delete":
		lines = append(lines, "delete "+code(s.core.DeleteGroup(s.now, g)))
	case "expire":
		lines = append(lines, fmt.Sprintf("expired %d", s.core.ExpireOffsets(s.now)))
	case "state":
		gr := s.core.Group(g)
		if gr == nil {
			lines = append(lines, "no group")
			break
		}
		out := fmt.Sprintf("%s gen=%d protocol=%s leader=%s", gr.State, gr.Generation, gr.Protocol, gr.Leader)
		var ms []string
		for _, id := range sortedMembers(gr) {
			m := gr.Members[id]
			desc := id
			if m.InstanceID != "" {
				desc += "[" + m.InstanceID + "]"
			}
			if len(m.Assignment) > 0 {
				desc += "=" + string(m.Assignment)
			}
			ms = append(ms, desc)
		}
		lines = append(lines, out+" members="+strings.Join(ms, ","))
		if len(gr.Pending) > 0 {
			var ps []string
			for id := range gr.Pending {
				ps = append(ps, id)
			}
			sort.Strings(ps)
			lines = append(lines, "pending="+strings.Join(ps, ","))
		}
	default:
		t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	out := s.core.Take()
	for _, a := range out.Answers {
		name := s.names[a.Token]
		switch {
		case a.SupersededBy != 0:
			lines = append(lines, "-> "+name+": superseded by "+s.names[a.SupersededBy])
		case a.Join != nil:
			lines = append(lines, "-> "+name+": "+fmtJoin(*a.Join))
		case a.Sync != nil:
			lines = append(lines, "-> "+name+": "+fmtSync(*a.Sync))
		}
	}
	// Every record the step produced must decode and name its bucket.
	if len(out.Ops) > 0 {
		if _, err := decodeOps(encodeOps(out.Ops)); err != nil {
			t.Fatalf("%s: record: %v", c.Pos, err)
		}
		if c.Has("records") {
			var bs []string
			for _, o := range out.Ops {
				kind := "put"
				if o.value == nil {
					kind = "del"
				}
				bs = append(bs, kind+":"+string(bucketNames[o.bucket]))
			}
			lines = append(lines, "records "+strings.Join(bs, " "))
		}
	}
	return strings.Join(lines, "\n")
}

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		s := newScenario(t)
		datadriven.RunFile(t, path, s.run)
	})
}
