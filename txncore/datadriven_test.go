package txncore

// TestScenarios runs testdata/*.txt through internal/datadriven: each file
// is a list of steps
//
//	command key=value ...
//	----
//	expected output
//	<blank line>
//
// replayed against the pure core with one transactional id "t". Run with
// `go test ./txncore -run TestScenarios -args -rewrite` to regenerate
// the expected output after a deliberate change (then review the diff).

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// scenario is the runner's world: one stored transaction, a clock, a pid
// counter, the cluster TV, and the last markers handed out.
type scenario struct {
	md       *Metadata
	pending  bool
	now      int64
	nextPID  int64
	serverTV int16
	markers  *Markers
	// completed is the last markers reported written, for a duplicate
	// completion.
	completed *Markers
}

// intArg returns the integer argument key of c, or def when absent.
func intArg(t *testing.T, c *datadriven.Case, key string, def int64) int64 {
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

func parsePartitions(t *testing.T, v string) []TopicPartition {
	var out []TopicPartition
	if v == "" {
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		i := strings.LastIndex(p, "-")
		n, err := strconv.Atoi(p[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("bad partition %q", p)
		}
		out = append(out, TopicPartition{Topic: p[:i], Partition: int32(n)})
	}
	return out
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return fmt.Sprintf("%s(%d)", e.Message, code)
	}
	return strconv.Itoa(int(code))
}

func fmtPartitions(tps []TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func fmtMetadata(m *Metadata) string {
	return fmt.Sprintf("pid=%d epoch=%d last=%d prev=%d next=%d state=%s tv=%d partitions=%s start=%d updated=%d timeout=%d",
		m.ProducerID, m.ProducerEpoch, m.LastProducerEpoch, m.PrevProducerID, m.NextProducerID, m.State,
		m.ClientTransactionVersion, fmtPartitions(m.Partitions), m.StartTimestamp, m.LastUpdateTimestamp, m.TimeoutMs) + fmtCompleting(m.Completing)
}

func fmtCompleting(c *Completion) string {
	if c == nil {
		return ""
	}
	result := "abort"
	if c.Commit {
		result = "commit"
	}
	return fmt.Sprintf(" completing=%s pid=%d epoch=%d tv=%d partitions=%s", result, c.ProducerID, c.ProducerEpoch, c.TransactionVersion, fmtPartitions(c.Partitions))
}

func (sc *scenario) pids() int64 {
	p := sc.nextPID
	sc.nextPID++
	return p
}

// apply records an outcome as durable and renders it.
func (sc *scenario) apply(o Outcome, answerPID bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "answer: %s", codeName(o.Err))
	if answerPID {
		fmt.Fprintf(&b, " pid=%d epoch=%d", o.ProducerID, o.ProducerEpoch)
	}
	keys := make([]TopicPartition, 0, len(o.PartitionErrs))
	for tp := range o.PartitionErrs {
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	for _, tp := range keys {
		fmt.Fprintf(&b, " %s-%d=%s", tp.Topic, tp.Partition, codeName(o.PartitionErrs[tp]))
	}
	switch {
	case o.Delete:
		b.WriteString("\npersist: delete")
		sc.md = nil
	case o.Persist != nil:
		m := o.Persist.Clone()
		sc.md = &m
		fmt.Fprintf(&b, "\npersist: %s", fmtMetadata(&m))
	default:
		b.WriteString("\npersist: none")
	}
	if o.Markers != nil {
		sc.markers = o.Markers
		result := "abort"
		if o.Markers.Commit {
			result = "commit"
		}
		fmt.Fprintf(&b, "\nmarkers: %s pid=%d epoch=%d tv=%d partitions=%s", result, o.Markers.ProducerID, o.Markers.ProducerEpoch, o.Markers.TransactionVersion, fmtPartitions(o.Markers.Partitions))
	}
	return b.String()
}

func (sc *scenario) run(t *testing.T, s *datadriven.Case) string {
	if v, ok := s.Args["now"]; ok {
		n, _ := strconv.ParseInt(v, 10, 64)
		sc.now = n
	}
	switch s.Cmd {
	case "set":
		m := Metadata{
			TransactionalID: "t", ProducerID: intArg(t, s, "pid", 1000), ProducerEpoch: int16(intArg(t, s, "epoch", 0)),
			LastProducerEpoch: int16(intArg(t, s, "last", -1)), PrevProducerID: intArg(t, s, "prev", -1), NextProducerID: intArg(t, s, "next", -1),
			TimeoutMs: int32(intArg(t, s, "timeout", 60000)), ClientTransactionVersion: int16(intArg(t, s, "tv", 0)),
			Partitions: parsePartitions(t, s.Args["partitions"]), StartTimestamp: intArg(t, s, "start", 0), LastUpdateTimestamp: intArg(t, s, "updated", 0),
		}
		st, ok := ParseState(s.Args["state"])
		if !ok {
			t.Fatalf("%s: bad state %q", s.Pos, s.Args["state"])
		}
		m.State = st
		sc.md = &m
		return "stored: " + fmtMetadata(&m)
	case "pending":
		sc.pending = s.Has("on")
		return fmt.Sprintf("pending=%v", sc.pending)
	case "nextpid":
		sc.nextPID = intArg(t, s, "pid", 0)
		return fmt.Sprintf("next producer id %d", sc.nextPID)
	case "servertv":
		sc.serverTV = int16(intArg(t, s, "tv", 2))
		return fmt.Sprintf("cluster transaction.version=%d", sc.serverTV)
	case "init":
		o := InitProducerID(sc.md, sc.pending, InitPIDRequest{
			TransactionalID: "t", TimeoutMs: int32(intArg(t, s, "timeout", 60000)),
			ProducerID: intArg(t, s, "pid", -1), ProducerEpoch: int16(intArg(t, s, "epoch", -1)),
		}, sc.now, sc.serverTV, PIDFunc(sc.pids))
		return sc.apply(o, true)
	case "add":
		tps := parsePartitions(t, s.Args["partitions"])
		pid, epoch := intArg(t, s, "pid", 1000), int16(intArg(t, s, "epoch", 0))
		if s.Has("verify") {
			return sc.apply(VerifyPartitions(sc.md, sc.pending, pid, epoch, tps), false)
		}
		tv := int16(0)
		if intArg(t, s, "v", 3) >= 4 {
			tv = 2
		}
		// As the handler: a leader's (v4+) registration may overlap the
		// previous transaction's markers.
		return sc.apply(AddPartitions(sc.md, sc.pending, AddPartitionsRequest{ProducerID: pid, ProducerEpoch: epoch, Partitions: tps,
			ClientTV: tv, Overlap: tv >= 2}, sc.now), false)
	case "end":
		if s.Has("commit") == s.Has("abort") {
			t.Fatalf("%s: end needs commit or abort", s.Pos)
		}
		v := int16(intArg(t, s, "v", 5))
		o := EndTxn(sc.md, sc.pending, EndTxnRequest{ProducerID: intArg(t, s, "pid", 1000), ProducerEpoch: int16(intArg(t, s, "epoch", 0)), Commit: s.Has("commit"), Version: v}, sc.now, PIDFunc(sc.pids))
		return sc.apply(o, v >= 5)
	case "complete":
		// The marker sender reports the last markers (or those the
		// stored record still needs, as recovery would resend them)
		// written; with neither, the last ones again (a duplicate).
		txn := sc.markers
		if txn == nil && sc.md != nil {
			txn = OutstandingMarkers(sc.md)
		}
		if txn == nil {
			txn = sc.completed
		}
		if txn == nil {
			return "no markers"
		}
		sc.markers, sc.completed = nil, txn
		return sc.apply(Complete(sc.md, sc.pending, *txn, sc.now), false)
	case "scan":
		// One timeout/expiry pass at now.
		if sc.md == nil {
			return "nothing stored"
		}
		switch {
		case TimedOut(sc.md, sc.now):
			return "timed out\n" + sc.apply(AbortTimedOut(sc.md, sc.pending, sc.now, sc.serverTV, PIDFunc(sc.pids)), false)
		case Expired(sc.md, sc.pending, sc.now, intArg(t, s, "idle", 7*24*3600*1000)):
			return "expired\n" + sc.apply(Outcome{Delete: true}, false)
		}
		return "nothing to do"
	}
	t.Fatalf("%s: unknown command %q", s.Pos, s.Cmd)
	return ""
}

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		sc := &scenario{nextPID: 2000, serverTV: 2}
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			if len(c.Input) > 0 {
				t.Fatalf("%s: expected ---- after %q", c.Pos, c.Line)
			}
			return sc.run(t, c)
		})
	})
}
