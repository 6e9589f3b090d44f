package eos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/txncoord/txncoord/integration/checker"
)

// Value formats. An input value is InputValue(i); each stage appends
// "|" and the id of the transaction that produced the record, so a record
// of the final output names its whole lineage:
// v0000042|s1.m2.i0/17|s2.m0.i1/4.
const sep = "|"

// InputValue is the i-th input value.
func InputValue(i int) string { return fmt.Sprintf("v%07d", i) }

// Transform is what a stage produces for a consumed value in transaction id.
func Transform(value, txnID string) string { return value + sep + txnID }

// parseInput returns i for InputValue(i).
func parseInput(v string) (int, bool) {
	if len(v) != 8 || v[0] != 'v' {
		return 0, false
	}
	n, err := strconv.Atoi(v[1:])
	return n, err == nil
}

// Anomaly is a kind of chain violation.
type Anomaly string

const (
	// Duplicate: an input value appears more than once in the final
	// output (read_committed).
	Duplicate Anomaly = "duplicate"
	// Loss: an input value never appears in the final output.
	Loss Anomaly = "loss"
	// AbortedVisible: a visible record (middle or output) was produced,
	// or derives from a record produced, by a transaction that aborted
	// or was never asked to commit.
	AbortedVisible Anomaly = "aborted-visible"
	// BrokenLineage: a final output record derives from a middle record
	// that is not visible in the middle topic (stage 2 read something
	// read_committed does not show), or a value is malformed.
	BrokenLineage Anomaly = "broken-lineage"
	// Misread: a transaction says it consumed value V at partition P
	// offset O, but the log has something else there.
	Misread Anomaly = "misread"
	// OffsetMismatch: a group's committed offset for a partition would not
	// resume correctly: it is below the end of the last visible record
	// (a restart would process records again), above the log end, or
	// missing.
	OffsetMismatch Anomaly = "offset-mismatch"
	// StageAnomaly: the per-stage transactional producer check
	// (integration/checker) found something: the kinds are in
	// Report.Stages.
	StageAnomaly Anomaly = "stage-producer"
)

// Anomalies lists every kind in report order.
var Anomalies = []Anomaly{Duplicate, Loss, AbortedVisible, BrokenLineage, Misread, OffsetMismatch, StageAnomaly}

// Offsets are a group's committed offsets and its input topic's ends.
type Offsets struct {
	Group     string
	Committed map[int32]int64 // missing: no commit
	End       map[int32]int64 // high watermark of the stage's input partitions
}

// Input is everything the checker compares.
type Input struct {
	// Values is N: the input is InputValue(0..N-1).
	Values int
	// Topics are the input, the middle topics and the output topic
	// (see Config.Topics).
	Topics []string
	// InputAt is the input log: per partition, offset → value (the
	// input is written without transactions, so this is also its
	// visible content).
	InputAt map[int32]map[int64]string
	// Middle (every middle topic) and Output are the final
	// read_committed reads.
	Middle, Output checker.Reads
	History        *History
	// Offsets per stage (index 0: stage 1's group).
	Offsets []Offsets
}

// StageTotals describe one stage.
type StageTotals struct {
	Members, Restarts                           int
	Attempts, Committed, Aborted, Unknown, Open int
	Assignments, Rebalances                     int
	// OffsetsAtEnd counts partitions whose committed offset equals the log
	// end exactly (the rest, if no anomaly, sit below trailing control
	// records).
	OffsetsAtEnd, Partitions int
	Producer                 *checker.Report
}

// Report is the checker's verdict.
type Report struct {
	Values     int
	OutputRead int           // data records in the final output
	Distinct   int           // distinct input values in the final output
	Stages     []StageTotals // index 0: stage 1
	Counts     map[Anomaly]int
	Examples   map[Anomaly][]string
	// Notes are facts worth printing that are not anomalies (faults
	// injected by the run), filled in by the workload.
	Notes []string
}

// Anomalies is the total count; zero means exactly once.
func (r *Report) Anomalies() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

func (r *Report) add(kind Anomaly, format string, args ...any) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < checker.MaxExamples {
		r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

// Check judges a run. It fails only when the input is unusable (a
// workload bug), never for a cluster anomaly.
func Check(in Input) (*Report, error) {
	stages := len(in.Topics) - 1
	r := &Report{Values: in.Values, Counts: map[Anomaly]int{}, Examples: map[Anomaly][]string{}, Stages: make([]StageTotals, max(stages, 0))}
	for _, k := range Anomalies {
		r.Counts[k] = 0
	}
	if in.History == nil {
		return nil, fmt.Errorf("eos: no history")
	}
	if stages < 2 || len(in.Offsets) != stages {
		return nil, fmt.Errorf("eos: %d topics and %d groups' offsets: want at least three topics and one group per stage", len(in.Topics), len(in.Offsets))
	}
	// byTopic are the final reads of each topic but the input.
	byTopic := map[string]checker.Reads{}
	for _, reads := range []checker.Reads{in.Middle, in.Output} {
		for p, recs := range reads {
			if byTopic[p.Topic] == nil {
				byTopic[p.Topic] = checker.Reads{}
			}
			byTopic[p.Topic][p] = recs
		}
	}
	attempts := map[string]*Attempt{}
	for stage := 1; stage <= stages; stage++ {
		st := &r.Stages[stage-1]
		gens := map[int32]bool{}
		slots := map[string]bool{}
		for _, m := range in.History.Members {
			if m.Stage != stage {
				continue
			}
			st.Members++
			slots[slotOf(m.Name)] = true
			st.Assignments += m.Assignments
			for g := range m.Gens {
				gens[g] = true
			}
		}
		st.Restarts = st.Members - len(slots)
		if len(gens) > 0 {
			st.Rebalances = len(gens) - 1
		} else {
			st.Rebalances = max(st.Assignments-st.Members, 0)
		}
		var h checker.History
		for _, a := range in.History.Attempts(stage) {
			if attempts[a.ID] != nil {
				return nil, fmt.Errorf("eos: transaction id %s used twice", a.ID)
			}
			attempts[a.ID] = a
			st.Attempts++
			switch a.Outcome {
			case checker.Committed:
				st.Committed++
			case checker.Aborted:
				st.Aborted++
			case checker.Unknown:
				st.Unknown++
			default:
				st.Open++
			}
			txn := checker.Txn{ID: a.ID, Producer: a.Member, Outcome: a.Outcome}
			for _, o := range a.Out {
				txn.Writes = append(txn.Writes, checker.Write{Value: o.V, Partition: checker.Partition{Topic: in.Topics[stage], Partition: o.P}})
			}
			h.Txns = append(h.Txns, txn)
		}
		reads := byTopic[in.Topics[stage]]
		if reads == nil {
			reads = checker.Reads{}
		}
		rep, err := checker.Check(h, reads)
		if err != nil {
			return nil, err
		}
		st.Producer = rep
		if n := rep.Anomalies(); n > 0 {
			r.Counts[StageAnomaly] += n
			for _, k := range checker.Anomalies {
				for _, ex := range rep.Examples[k] {
					if len(r.Examples[StageAnomaly]) < checker.MaxExamples {
						r.Examples[StageAnomaly] = append(r.Examples[StageAnomaly], fmt.Sprintf("stage %d %s: %s", stage, k, ex))
					}
				}
			}
		}
	}

	// What each stage read must be what its input log holds there.
	logAt := []map[int32]map[int64]string{in.InputAt}
	for _, topic := range in.Topics[1:stages] {
		at := map[int32]map[int64]string{}
		for p, recs := range byTopic[topic] {
			m := map[int64]string{}
			for _, rec := range recs {
				m[rec.Offset] = rec.Value
			}
			at[p.Partition] = m
		}
		logAt = append(logAt, at)
	}
	for stage := 1; stage <= stages; stage++ {
		for _, a := range in.History.Attempts(stage) {
			checkConsumed(r, a, in.Topics[stage-1], logAt[stage-1])
		}
	}

	// Visible records of the middle topics: none from an aborted
	// attempt, each derived from a visible record of the topic before
	// (the input's are all visible).
	visible := map[string]bool{}
	for i, topic := range in.Topics[1:stages] {
		for _, p := range sortedPartitions(byTopic[topic]) {
			for _, rec := range byTopic[topic][p] {
				visible[rec.Value] = true
				checkLineage(r, attempts, visible, i+1, p, rec)
			}
		}
	}

	// The final output: every input value exactly once, each from
	// committed attempts of every stage and visible middle records.
	seen := map[int][]string{}
	for _, p := range sortedPartitions(in.Output) {
		for _, rec := range in.Output[p] {
			r.OutputRead++
			if n, ok := checkLineage(r, attempts, visible, stages, p, rec); ok && n < in.Values {
				seen[n] = append(seen[n], fmt.Sprintf("%s@%d", p, rec.Offset))
			} else if ok {
				r.add(BrokenLineage, "%s@%d: output value %q is not of an input value", p, rec.Offset, rec.Value)
			}
		}
	}
	r.Distinct = len(seen)
	for i := 0; i < in.Values; i++ {
		switch at := seen[i]; {
		case len(at) == 0:
			r.add(Loss, "%s never in the output", InputValue(i))
		case len(at) > 1:
			r.add(Duplicate, "%s %d times: %s", InputValue(i), len(at), strings.Join(at, ", "))
		}
	}

	// Offsets: a restart of either group must resume right after what
	// it already turned into visible output.
	lastInput := map[int32]int64{}
	for p, m := range in.InputAt {
		for o := range m {
			lastInput[p] = max(lastInput[p], o+1)
		}
	}
	checkOffsets(r, &r.Stages[0], in.Offsets[0], in.Topics[0], lastInput)
	for stage := 2; stage <= stages; stage++ {
		lastMiddle := map[int32]int64{}
		for p, recs := range byTopic[in.Topics[stage-1]] {
			if len(recs) > 0 {
				lastMiddle[p.Partition] = recs[len(recs)-1].Offset + 1
			}
		}
		checkOffsets(r, &r.Stages[stage-1], in.Offsets[stage-1], in.Topics[stage-1], lastMiddle)
	}
	return r, nil
}

// checkLineage checks a visible record stage wrote: its value must be an
// input value and one transaction id per stage up to stage, each of an
// attempt that was not aborted, and (after stage 1) it must derive from a
// value visible in the topic stage read. It returns the input value's
// number when the value has that shape.
func checkLineage(r *Report, attempts map[string]*Attempt, visible map[string]bool, stage int, p checker.Partition, rec checker.Record) (int, bool) {
	parts := strings.Split(rec.Value, sep)
	n, ok := parseInput(parts[0])
	if len(parts) != stage+1 || !ok || n < 0 {
		r.add(BrokenLineage, "%s@%d: stage %d value %q is not input%s", p, rec.Offset, stage, rec.Value, strings.Repeat(sep+"txn", stage))
		return 0, false
	}
	for _, id := range parts[1:] {
		checkVisible(r, attempts, id, p, rec)
	}
	if from := strings.Join(parts[:stage], sep); stage > 1 && !visible[from] {
		r.add(BrokenLineage, "%s@%d: %q derives from %q, which read_committed does not show", p, rec.Offset, rec.Value, from)
	}
	return n, true
}

// slotOf is a member name without its incarnation: s1.m2.i3 → s1.m2.
func slotOf(member string) string {
	if i := strings.LastIndex(member, ".i"); i > 0 {
		return member[:i]
	}
	return member
}

func checkVisible(r *Report, attempts map[string]*Attempt, id string, p checker.Partition, rec checker.Record) {
	a := attempts[id]
	if a == nil {
		r.add(BrokenLineage, "%s@%d: %q names transaction %s, which no member ran", p, rec.Offset, rec.Value, id)
		return
	}
	if a.Outcome == checker.Aborted || a.Outcome == checker.Open {
		r.add(AbortedVisible, "%s@%d: %q is from stage %d transaction %s (%s)", p, rec.Offset, rec.Value, a.Stage, id, a.Outcome)
	}
}

func checkConsumed(r *Report, a *Attempt, topic string, at map[int32]map[int64]string) {
	for _, c := range a.In {
		if got, ok := at[c.P][c.O]; !ok || got != c.V {
			if !ok {
				got = "(no visible record)"
			}
			r.add(Misread, "txn %s consumed %q at %s/%d@%d, the log has %s", a.ID, c.V, topic, c.P, c.O, got)
		}
	}
}

func checkOffsets(r *Report, st *StageTotals, o Offsets, topic string, lastVisible map[int32]int64) {
	parts := make([]int32, 0, len(o.End))
	for p := range o.End {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		st.Partitions++
		end, last := o.End[p], lastVisible[p]
		c, ok := o.Committed[p]
		switch {
		case !ok && last > 0:
			r.add(OffsetMismatch, "group %s has no offset for %s/%d (log end %d, last visible record ends at %d)", o.Group, topic, p, end, last)
		case !ok:
		case c < last:
			r.add(OffsetMismatch, "group %s at %s/%d is %d, below the last visible record's end %d: a restart reprocesses", o.Group, topic, p, c, last)
		case c > end:
			r.add(OffsetMismatch, "group %s at %s/%d is %d, past the log end %d", o.Group, topic, p, c, end)
		case c == end:
			st.OffsetsAtEnd++
		}
	}
}

func sortedPartitions(reads checker.Reads) []checker.Partition {
	out := make([]checker.Partition, 0, len(reads))
	for p := range reads {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
