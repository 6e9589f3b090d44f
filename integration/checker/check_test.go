package checker_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/integration/checker"
)

// TestScenarios replays testdata/*.txt. Commands of one scenario:
//
//	txn ID OUTCOME [producer=P] topic/N:value ...   a transaction and its writes, in order
//	read topic/N offset:value ...                   the final read of a partition
//
// The output is the report's summary line, then its examples.
func TestScenarios(t *testing.T) {
	runScenarios(t, func(t *testing.T, input []string) string {
		h, reads, err := parseHistory(input)
		if err != nil {
			return "error: " + err.Error()
		}
		r, err := checker.Check(h, reads)
		if err != nil {
			return "error: " + err.Error()
		}
		var b strings.Builder
		b.WriteString(r.Summary())
		for _, k := range checker.Anomalies {
			for _, ex := range r.Examples[k] {
				fmt.Fprintf(&b, "\n%s: %s", k, ex)
			}
		}
		return b.String()
	})
}

func parseHistory(input []string) (checker.History, checker.Reads, error) {
	var h checker.History
	reads := checker.Reads{}
	for _, line := range input {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "txn":
			if len(f) < 3 {
				return h, nil, fmt.Errorf("txn needs an id and an outcome: %q", line)
			}
			outcome, err := checker.ParseOutcome(f[2])
			if err != nil {
				return h, nil, err
			}
			txn := checker.Txn{ID: f[1], Producer: "p", Outcome: outcome}
			for _, tok := range f[3:] {
				if p, ok := strings.CutPrefix(tok, "producer="); ok {
					txn.Producer = p
					continue
				}
				part, value, ok := strings.Cut(tok, ":")
				if !ok {
					return h, nil, fmt.Errorf("write %q is not topic/N:value", tok)
				}
				p, err := checker.ParsePartition(part)
				if err != nil {
					return h, nil, err
				}
				txn.Writes = append(txn.Writes, checker.Write{Value: value, Partition: p})
			}
			h.Txns = append(h.Txns, txn)
		case "read":
			if len(f) < 2 {
				return h, nil, fmt.Errorf("read needs a partition: %q", line)
			}
			p, err := checker.ParsePartition(f[1])
			if err != nil {
				return h, nil, err
			}
			reads[p] = []checker.Record{}
			for _, tok := range f[2:] {
				off, value, ok := strings.Cut(tok, ":")
				o, err := strconv.ParseInt(off, 10, 64)
				if !ok || err != nil {
					return h, nil, fmt.Errorf("record %q is not offset:value", tok)
				}
				reads[p] = append(reads[p], checker.Record{Offset: o, Value: value})
			}
		default:
			return h, nil, fmt.Errorf("unknown command %q", f[0])
		}
	}
	return h, reads, nil
}

// TestEachAnomalyDetected builds one history per anomaly kind and checks
// that exactly that kind is counted, so a checker that silently stops
// detecting one kind fails here.
func TestEachAnomalyDetected(t *testing.T) {
	p0 := checker.Partition{Topic: "t", Partition: 0}
	p1 := checker.Partition{Topic: "t", Partition: 1}
	w := func(p checker.Partition, v string) checker.Write { return checker.Write{Value: v, Partition: p} }
	committed := checker.Txn{ID: "c", Producer: "a", Outcome: checker.Committed, Writes: []checker.Write{w(p0, "c1"), w(p1, "c2")}}
	cleanReads := checker.Reads{p0: {{Offset: 0, Value: "c1"}}, p1: {{Offset: 0, Value: "c2"}}}

	for _, tc := range []struct {
		kind  checker.Anomaly
		txns  []checker.Txn
		reads checker.Reads
		want  int
	}{
		{checker.AbortedRead, []checker.Txn{committed, {ID: "x", Producer: "b", Outcome: checker.Aborted, Writes: []checker.Write{w(p0, "x1")}}},
			checker.Reads{p0: {{0, "c1"}, {1, "x1"}}, p1: {{0, "c2"}}}, 1},
		{checker.LostWrite, []checker.Txn{committed, {ID: "l", Producer: "b", Outcome: checker.Committed, Writes: []checker.Write{w(p0, "l1"), w(p0, "l2")}}},
			cleanReads, 2},
		{checker.Duplicate, []checker.Txn{committed},
			checker.Reads{p0: {{0, "c1"}, {1, "c1"}}, p1: {{0, "c2"}}}, 1},
		{checker.PrecommittedRead, []checker.Txn{committed, {ID: "o", Producer: "b", Outcome: checker.Open, Writes: []checker.Write{w(p1, "o1")}}},
			checker.Reads{p0: {{0, "c1"}}, p1: {{0, "c2"}, {1, "o1"}}}, 1},
		{checker.Unexpected, []checker.Txn{committed},
			checker.Reads{p0: {{0, "c1"}, {1, "ghost"}}, p1: {{0, "c2"}}}, 1},
		{checker.Reordered, []checker.Txn{{ID: "r", Producer: "a", Outcome: checker.Committed, Writes: []checker.Write{w(p0, "r1"), w(p0, "r2")}}},
			checker.Reads{p0: {{0, "r2"}, {1, "r1"}}}, 1},
		{checker.InconsistentOffset, []checker.Txn{committed},
			checker.Reads{p0: {{5, "c1"}}, p1: {{3, "c2"}, {3, "c3"}}}, 1},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			r, err := checker.Check(checker.History{Txns: tc.txns}, tc.reads)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Counts[tc.kind]; got != tc.want {
				t.Fatalf("%s = %d, want %d\n%s", tc.kind, got, tc.want, r.Table())
			}
			// The constructed history has exactly that anomaly, except
			// where one extra kind is inherent (an unexpected value is
			// also at an inconsistent offset in the last case).
			if tc.kind != checker.InconsistentOffset && r.Anomalies() != tc.want {
				t.Fatalf("anomalies = %d, want only %d %s\n%s", r.Anomalies(), tc.want, tc.kind, r.Table())
			}
			if len(r.Examples[tc.kind]) == 0 {
				t.Fatalf("no example for %s", tc.kind)
			}
		})
	}
}

// TestTornAndUnknown: an unknown-outcome transaction may resolve either way
// but never partly; a partly visible committed one is torn and lost.
func TestTornAndUnknown(t *testing.T) {
	p := func(n int32) checker.Partition { return checker.Partition{Topic: "t", Partition: n} }
	txn := func(id string, o checker.Outcome) checker.Txn {
		return checker.Txn{ID: id, Producer: id, Outcome: o, Writes: []checker.Write{
			{Value: id + "-a", Partition: p(0)}, {Value: id + "-b", Partition: p(1)}}}
	}
	h := checker.History{Txns: []checker.Txn{txn("u-all", checker.Unknown), txn("u-none", checker.Unknown), txn("u-torn", checker.Unknown), txn("c-torn", checker.Committed)}}
	reads := checker.Reads{
		p(0): {{0, "u-all-a"}, {1, "u-torn-a"}, {2, "c-torn-a"}},
		p(1): {{0, "u-all-b"}},
	}
	r, err := checker.Check(h, reads)
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts[checker.TornTxn] != 2 || r.Counts[checker.LostWrite] != 1 || r.Anomalies() != 3 {
		t.Fatalf("want 2 torn + 1 lost:\n%s", r.Table())
	}
	if r.UnknownVisible != 1 || r.UnknownInvisible != 1 || r.TxnsUnknown != 3 {
		t.Fatalf("unknown resolution: visible=%d invisible=%d total=%d", r.UnknownVisible, r.UnknownInvisible, r.TxnsUnknown)
	}
}

// TestCleanHistory: a large clean history with aborts, unknowns resolved
// both ways and interleaved producers reports zero anomalies.
func TestCleanHistory(t *testing.T) {
	var h checker.History
	reads := checker.Reads{}
	offsets := map[checker.Partition]int64{}
	for i := 0; i < 300; i++ {
		producer := fmt.Sprintf("p%d", i%3)
		outcome := []checker.Outcome{checker.Committed, checker.Committed, checker.Aborted, checker.Unknown}[i%4]
		txn := checker.Txn{ID: fmt.Sprintf("%s/%d", producer, i), Producer: producer, Outcome: outcome}
		visible := outcome == checker.Committed || (outcome == checker.Unknown && i%8 == 3)
		for j := 0; j < 5; j++ {
			p := checker.Partition{Topic: "t", Partition: int32((i + j) % 4)}
			v := fmt.Sprintf("%s-%d-%d", producer, i, j)
			txn.Writes = append(txn.Writes, checker.Write{Value: v, Partition: p})
			if visible {
				reads[p] = append(reads[p], checker.Record{Offset: offsets[p], Value: v})
			}
			offsets[p] += 2 // data and, in between, other txns' control records
		}
		h.Txns = append(h.Txns, txn)
	}
	r, err := checker.Check(h, reads)
	if err != nil {
		t.Fatal(err)
	}
	if r.Anomalies() != 0 {
		t.Fatalf("clean history reports anomalies:\n%s", r.Table())
	}
	if r.TxnsAborted == 0 || r.UnknownVisible == 0 || r.UnknownInvisible == 0 || r.ValuesRead == 0 {
		t.Fatalf("history does not exercise aborts and unknowns:\n%s", r.Table())
	}
	if !strings.Contains(r.Table(), "aborted-read") {
		t.Fatalf("table lacks the anomaly rows:\n%s", r.Table())
	}
}

func TestInvalidHistory(t *testing.T) {
	p := checker.Partition{Topic: "t"}
	h := checker.History{Txns: []checker.Txn{
		{ID: "a", Outcome: checker.Committed, Writes: []checker.Write{{Value: "v", Partition: p}}},
		{ID: "b", Outcome: checker.Committed, Writes: []checker.Write{{Value: "v", Partition: p}}},
	}}
	if _, err := checker.Check(h, nil); err == nil {
		t.Fatal("a value written twice must be refused")
	}
}
