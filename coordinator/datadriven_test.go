package coordinator

// A tiny data-driven runner (after etcd raft's datadriven): each file in
// testdata/*.txt is a list of steps
//
//	command key=value ...
//	----
//	expected output
//	<blank line>
//
// replayed against the pure core with one transactional id "t". Run with
// `go test ./coordinator -run TestScenarios -args -rewrite` to regenerate
// the expected output after a deliberate change (then review the diff).

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txnlog"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

type step struct {
	line   int
	cmd    string
	args   map[string]string
	flags  map[string]bool
	expect string
}

func parseScenario(t *testing.T, raw string) []step {
	var steps []step
	lines := strings.Split(raw, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		s := step{line: i + 1, args: map[string]string{}, flags: map[string]bool{}}
		fields := strings.Fields(l)
		s.cmd = fields[0]
		for _, f := range fields[1:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				s.args[k] = v
			} else {
				s.flags[f] = true
			}
		}
		i++
		if i >= len(lines) || strings.TrimSpace(lines[i]) != "----" {
			t.Fatalf("line %d: expected ---- after %q", s.line, l)
		}
		var out []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			out = append(out, lines[i])
		}
		s.expect = strings.Join(out, "\n")
		steps = append(steps, s)
	}
	return steps
}

// scenario is the runner's world: one stored transaction, a clock, a pid
// counter, the cluster TV, and the last markers handed out.
type scenario struct {
	md       *Metadata
	pending  bool
	now      int64
	nextPID  int64
	serverTV int16
	markers  *markersender.Txn
}

func (s *step) int(t *testing.T, key string, def int64) int64 {
	v, ok := s.args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("line %d: %s=%q: %v", s.line, key, v, err)
	}
	return n
}

func parsePartitions(t *testing.T, v string) []txnlog.TopicPartition {
	var out []txnlog.TopicPartition
	if v == "" {
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		i := strings.LastIndex(p, "-")
		n, err := strconv.Atoi(p[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("bad partition %q", p)
		}
		out = append(out, txnlog.TopicPartition{Topic: p[:i], Partition: int32(n)})
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

func fmtPartitions(tps []txnlog.TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func fmtMetadata(m *Metadata) string {
	return fmt.Sprintf("pid=%d epoch=%d last=%d prev=%d next=%d state=%s tv=%d partitions=%s start=%d updated=%d timeout=%d",
		m.ProducerID, m.ProducerEpoch, m.LastProducerEpoch, m.PrevProducerID, m.NextProducerID, m.State,
		m.ClientTransactionVersion, fmtPartitions(m.Partitions), m.StartTimestamp, m.LastUpdateTimestamp, m.TimeoutMs)
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
	keys := make([]txnlog.TopicPartition, 0, len(o.PartitionErrs))
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
		tps := make([]txnlog.TopicPartition, len(o.Markers.Partitions))
		for i, p := range o.Markers.Partitions {
			tps[i] = txnlog.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		}
		fmt.Fprintf(&b, "\nmarkers: %s pid=%d epoch=%d tv=%d partitions=%s", result, o.Markers.ProducerID, o.Markers.ProducerEpoch, o.Markers.TransactionVersion, fmtPartitions(tps))
	}
	return b.String()
}

func (sc *scenario) run(t *testing.T, s *step) string {
	if v, ok := s.args["now"]; ok {
		n, _ := strconv.ParseInt(v, 10, 64)
		sc.now = n
	}
	switch s.cmd {
	case "set":
		m := Metadata{
			TransactionalID: "t", ProducerID: s.int(t, "pid", 1000), ProducerEpoch: int16(s.int(t, "epoch", 0)),
			LastProducerEpoch: int16(s.int(t, "last", -1)), PrevProducerID: s.int(t, "prev", -1), NextProducerID: s.int(t, "next", -1),
			TimeoutMs: int32(s.int(t, "timeout", 60000)), ClientTransactionVersion: int16(s.int(t, "tv", 0)),
			Partitions: parsePartitions(t, s.args["partitions"]), StartTimestamp: s.int(t, "start", 0), LastUpdateTimestamp: s.int(t, "updated", 0),
		}
		st, ok := txnlog.ParseState(s.args["state"])
		if !ok {
			t.Fatalf("line %d: bad state %q", s.line, s.args["state"])
		}
		m.State = st
		sc.md = &m
		return "stored: " + fmtMetadata(&m)
	case "pending":
		sc.pending = s.flags["on"]
		return fmt.Sprintf("pending=%v", sc.pending)
	case "nextpid":
		sc.nextPID = s.int(t, "pid", 0)
		return fmt.Sprintf("next producer id %d", sc.nextPID)
	case "servertv":
		sc.serverTV = int16(s.int(t, "tv", 2))
		return fmt.Sprintf("cluster transaction.version=%d", sc.serverTV)
	case "init":
		o := InitProducerID(sc.md, sc.pending, InitPIDRequest{
			TransactionalID: "t", TimeoutMs: int32(s.int(t, "timeout", 60000)),
			ProducerID: s.int(t, "pid", -1), ProducerEpoch: int16(s.int(t, "epoch", -1)),
		}, sc.now, sc.serverTV, sc.pids)
		return sc.apply(o, true)
	case "add":
		tps := parsePartitions(t, s.args["partitions"])
		pid, epoch := s.int(t, "pid", 1000), int16(s.int(t, "epoch", 0))
		if s.flags["verify"] {
			return sc.apply(VerifyPartitions(sc.md, sc.pending, pid, epoch, tps), false)
		}
		tv := int16(0)
		if s.int(t, "v", 3) >= 4 {
			tv = 2
		}
		return sc.apply(AddPartitions(sc.md, sc.pending, AddPartitionsRequest{ProducerID: pid, ProducerEpoch: epoch, Partitions: tps, ClientTV: tv}, sc.now), false)
	case "end":
		if s.flags["commit"] == s.flags["abort"] {
			t.Fatalf("line %d: end needs commit or abort", s.line)
		}
		v := int16(s.int(t, "v", 5))
		o := EndTxn(sc.md, sc.pending, EndTxnRequest{ProducerID: s.int(t, "pid", 1000), ProducerEpoch: int16(s.int(t, "epoch", 0)), Commit: s.flags["commit"], Version: v}, sc.now, sc.pids)
		return sc.apply(o, v >= 5)
	case "complete":
		// The marker sender reports the last markers (or those of the
		// stored Prepare, as recovery would resend them) written.
		txn := sc.markers
		if txn == nil && sc.md != nil {
			m := markersFor(sc.md)
			txn = &m
		}
		if txn == nil {
			return "no markers"
		}
		sc.markers = nil
		return sc.apply(Complete(sc.md, sc.pending, *txn, sc.now), false)
	case "scan":
		// One timeout/expiry pass at now.
		if sc.md == nil {
			return "nothing stored"
		}
		switch {
		case TimedOut(sc.md, sc.now):
			return "timed out\n" + sc.apply(AbortTimedOut(sc.md, sc.pending, sc.now, sc.serverTV, sc.pids), false)
		case Expired(sc.md, sc.pending, sc.now, s.int(t, "idle", 7*24*3600*1000)):
			return "expired\n" + sc.apply(Outcome{Delete: true}, false)
		}
		return "nothing to do"
	}
	t.Fatalf("line %d: unknown command %q", s.line, s.cmd)
	return ""
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := &scenario{nextPID: 2000, serverTV: 2}
			steps := parseScenario(t, string(raw))
			var rewritten strings.Builder
			lines := strings.Split(string(raw), "\n")
			prev := 0
			for i := range steps {
				s := &steps[i]
				got := sc.run(t, s)
				if *rewrite {
					// Keep everything up to and including "----", replace
					// the output block.
					rewritten.WriteString(strings.Join(lines[prev:s.line+1], "\n"))
					rewritten.WriteString("\n" + got + "\n")
					end := s.line + 1
					for end < len(lines) && strings.TrimSpace(lines[end]) != "" {
						end++
					}
					prev = end
					continue
				}
				if got != s.expect {
					t.Errorf("%s:%d: %s\n--- got\n%s\n--- want\n%s", path, s.line, lines[s.line-1], got, s.expect)
				}
			}
			if *rewrite {
				rewritten.WriteString(strings.Join(lines[prev:], "\n"))
				if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
