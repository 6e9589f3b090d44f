package eos

import (
	"strings"
	"testing"

	"github.com/txncoord/txncoord/integration/checker"
)

// run is a tiny chain built by hand: 4 input values on 2 partitions
// (v0, v2 on p0; v1, v3 on p1), one stage-1 and one stage-2 member, each
// committing one transaction per partition. Tests break one thing each.
type run struct {
	in Input
	s1 *Member
	s2 *Member
}

func newRun() *run {
	r := &run{}
	r.in = Input{
		Values:  4,
		Topics:  []string{"in", "mid", "out"},
		Offsets: make([]Offsets, 2),
		InputAt: map[int32]map[int64]string{0: {0: InputValue(0), 1: InputValue(2)}, 1: {0: InputValue(1), 1: InputValue(3)}},
		Middle:  checker.Reads{},
		Output:  checker.Reads{},
	}
	r.s1 = &Member{Name: "s1.m0.i0", Stage: 1, Gens: map[int32]bool{1: true}, Assignments: 1}
	r.s2 = &Member{Name: "s2.m0.i0", Stage: 2, Gens: map[int32]bool{1: true}, Assignments: 1}
	r.in.History = &History{Members: []*Member{r.s1, r.s2}}
	for p := int32(0); p < 2; p++ {
		// stage 1: one transaction per partition, offsets 0..1, then
		// the commit marker at 2 in the middle topic.
		id1 := "s1.m0.i0/" + string('0'+rune(p))
		a1 := &Attempt{ID: id1, Member: r.s1.Name, Stage: 1, Outcome: checker.Committed}
		id2 := "s2.m0.i0/" + string('0'+rune(p))
		a2 := &Attempt{ID: id2, Member: r.s2.Name, Stage: 2, Outcome: checker.Committed}
		for o := int64(0); o < 2; o++ {
			v := r.in.InputAt[p][o]
			mid := Transform(v, id1)
			out := Transform(mid, id2)
			a1.In = append(a1.In, Consumed{P: p, O: o, V: v})
			a1.Out = append(a1.Out, Produced{P: p, V: mid})
			a2.In = append(a2.In, Consumed{P: p, O: o, V: mid})
			a2.Out = append(a2.Out, Produced{P: p, V: out})
			mp := checker.Partition{Topic: "mid", Partition: p}
			op := checker.Partition{Topic: "out", Partition: p}
			r.in.Middle[mp] = append(r.in.Middle[mp], checker.Record{Offset: o, Value: mid})
			r.in.Output[op] = append(r.in.Output[op], checker.Record{Offset: o, Value: out})
		}
		r.s1.Attempts = append(r.s1.Attempts, a1)
		r.s2.Attempts = append(r.s2.Attempts, a2)
	}
	r.in.Offsets[0] = Offsets{Group: "g1", Committed: map[int32]int64{0: 2, 1: 2}, End: map[int32]int64{0: 2, 1: 2}}
	r.in.Offsets[1] = Offsets{Group: "g2", Committed: map[int32]int64{0: 2, 1: 3}, End: map[int32]int64{0: 3, 1: 3}}
	return r
}

func (r *run) check(t *testing.T) *Report {
	t.Helper()
	rep, err := Check(r.in)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Table())
	return rep
}

// want asserts exactly these anomaly counts (every other kind zero).
func want(t *testing.T, rep *Report, counts map[Anomaly]int) {
	t.Helper()
	for _, k := range Anomalies {
		if rep.Counts[k] != counts[k] {
			t.Errorf("%s: got %d, want %d (%s)", k, rep.Counts[k], counts[k], rep.Summary())
		}
	}
}

func TestCheckClean(t *testing.T) {
	rep := newRun().check(t)
	want(t, rep, nil)
	if rep.Distinct != 4 || rep.OutputRead != 4 || rep.Stages[0].OffsetsAtEnd != 2 || rep.Stages[1].OffsetsAtEnd != 1 {
		t.Errorf("totals: %+v", rep)
	}
}

func TestCheckDuplicate(t *testing.T) {
	r := newRun()
	// A second stage-2 member processed p0 again and committed.
	dup := &Member{Name: "s2.m1.i0", Stage: 2, Gens: map[int32]bool{2: true}}
	a := &Attempt{ID: "s2.m1.i0/0", Member: dup.Name, Stage: 2, Outcome: checker.Committed}
	op := checker.Partition{Topic: "out", Partition: 0}
	for o, rec := range r.in.Middle[checker.Partition{Topic: "mid", Partition: 0}] {
		out := Transform(rec.Value, a.ID)
		a.In = append(a.In, Consumed{P: 0, O: int64(o), V: rec.Value})
		a.Out = append(a.Out, Produced{P: 0, V: out})
		r.in.Output[op] = append(r.in.Output[op], checker.Record{Offset: int64(3 + o), Value: out})
	}
	dup.Attempts = []*Attempt{a}
	r.in.History.Members = append(r.in.History.Members, dup)
	rep := r.check(t)
	want(t, rep, map[Anomaly]int{Duplicate: 2})
	if rep.Stages[1].Rebalances != 1 {
		t.Errorf("rebalances: %d, want 1 (generations 1 and 2)", rep.Stages[1].Rebalances)
	}
}

func TestCheckLoss(t *testing.T) {
	r := newRun()
	// The leader lost a committed output record: a loss in the chain
	// and a lost write of stage 2's producer.
	op := checker.Partition{Topic: "out", Partition: 1}
	r.in.Output[op] = r.in.Output[op][:1]
	rep := r.check(t)
	want(t, rep, map[Anomaly]int{Loss: 1, StageAnomaly: 2}) // lost-write and torn-txn
	if !strings.Contains(strings.Join(rep.Examples[Loss], " "), InputValue(3)) {
		t.Errorf("loss examples %v do not name %s", rep.Examples[Loss], InputValue(3))
	}
}

func TestCheckAbortedVisible(t *testing.T) {
	r := newRun()
	// Stage 2's transaction on p1 aborted, yet its records are visible.
	r.s2.Attempts[1].Outcome = checker.Aborted
	want(t, r.check(t), map[Anomaly]int{AbortedVisible: 2, StageAnomaly: 2})

	// A stage-1 transaction never asked to commit (its member was
	// killed): its middle records are visible and stage 2 used them.
	r = newRun()
	r.s1.Attempts[0].Outcome = checker.Open
	want(t, r.check(t), map[Anomaly]int{AbortedVisible: 4, StageAnomaly: 2})
}

func TestCheckUnknownEitherWay(t *testing.T) {
	r := newRun()
	r.s1.Attempts[0].Outcome = checker.Unknown // resolved committed
	want(t, r.check(t), nil)
}

func TestCheckBrokenLineage(t *testing.T) {
	r := newRun()
	// Stage 2 read a middle record read_committed does not show.
	mp := checker.Partition{Topic: "mid", Partition: 0}
	r.in.Middle[mp] = r.in.Middle[mp][1:]
	rep := r.check(t)
	// The hidden record is also a lost write of stage 1 and a misread of
	// stage 2 (nothing visible at that offset).
	want(t, rep, map[Anomaly]int{BrokenLineage: 1, Misread: 1, StageAnomaly: 2, OffsetMismatch: 0})
}

func TestCheckMisread(t *testing.T) {
	r := newRun()
	r.s1.Attempts[1].In[0].V = InputValue(3) // says it read v3 where v1 is
	want(t, r.check(t), map[Anomaly]int{Misread: 1})
}

func TestCheckOffsets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stage     int
		committed map[int32]int64
	}{
		{"behind the visible output", 1, map[int32]int64{0: 1, 1: 2}},
		{"past the log end", 2, map[int32]int64{0: 4, 1: 3}},
		{"missing", 2, map[int32]int64{0: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun()
			r.in.Offsets[tc.stage-1].Committed = tc.committed
			want(t, r.check(t), map[Anomaly]int{OffsetMismatch: 1})
		})
	}
}

func TestParseMember(t *testing.T) {
	lines := strings.Join([]string{
		`{"ev":"start","member":"s1.m0.i2","stage":1,"client":"kgo","txn_id":"x"}`,
		`{"ev":"assigned","gen":4,"parts":[0,1]}`,
		`{"ev":"txn","id":"s1.m0.i2/0","in":[{"p":0,"o":0,"v":"v0000000"}],"out":[{"p":0,"v":"v0000000|s1.m0.i2/0"}]}`,
		`{"ev":"commit","id":"s1.m0.i2/0"}`,
		`{"ev":"end","id":"s1.m0.i2/0","outcome":"committed"}`,
		`{"ev":"txn","id":"s1.m0.i2/1","in":[],"out":[]}`,
		`{"ev":"end","id":"s1.m0.i2/1","outcome":"aborted"}`,
		`{"ev":"txn","id":"s1.m0.i2/2","in":[],"out":[]}`,
		`{"ev":"commit","id":"s1.m0.i2/2"}`,               // killed before the answer
		`{"ev":"txn","id":"s1.m0.i2/3","in":[],"out":[]}`, // killed while producing
		`{"ev":"end","id":"s1.m0.i2/3","outc`,             // cut by the kill
	}, "\n")
	m, err := ParseMember(strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	got := []checker.Outcome{}
	for _, a := range m.Attempts {
		got = append(got, a.Outcome)
	}
	wantOutcomes := []checker.Outcome{checker.Committed, checker.Aborted, checker.Unknown, checker.Open}
	if len(got) != len(wantOutcomes) {
		t.Fatalf("outcomes %v, want %v", got, wantOutcomes)
	}
	for i := range got {
		if got[i] != wantOutcomes[i] {
			t.Fatalf("outcomes %v, want %v", got, wantOutcomes)
		}
	}
	if m.Name != "s1.m0.i2" || m.Stage != 1 || !m.Gens[4] || m.Stopped {
		t.Errorf("member %+v", m)
	}
	// A bad line that is not the last is an error, not a cut.
	if _, err := ParseMember(strings.NewReader("{bad\n" + lines)); err == nil {
		t.Error("a bad line before the end was accepted")
	}
}

// newRun3 is newRun with a third stage: stage 2's topic "out" becomes a
// middle topic, and a stage-3 member reads it into "out3", one committed
// transaction per partition.
func newRun3() *run {
	r := newRun()
	r.in.Topics = append(r.in.Topics, "out3")
	for p, recs := range r.in.Output {
		r.in.Middle[p] = recs
	}
	r.in.Output = checker.Reads{}
	s3 := &Member{Name: "s3.m0.i0", Stage: 3, Gens: map[int32]bool{1: true}, Assignments: 1}
	for p := int32(0); p < 2; p++ {
		a := &Attempt{ID: "s3.m0.i0/" + string('0'+rune(p)), Member: s3.Name, Stage: 3, Outcome: checker.Committed}
		op := checker.Partition{Topic: "out3", Partition: p}
		for _, rec := range r.in.Middle[checker.Partition{Topic: "out", Partition: p}] {
			v := Transform(rec.Value, a.ID)
			a.In = append(a.In, Consumed{P: p, O: rec.Offset, V: rec.Value})
			a.Out = append(a.Out, Produced{P: p, V: v})
			r.in.Output[op] = append(r.in.Output[op], checker.Record{Offset: rec.Offset, Value: v})
		}
		s3.Attempts = append(s3.Attempts, a)
	}
	r.in.History.Members = append(r.in.History.Members, s3)
	r.in.Offsets = append(r.in.Offsets, Offsets{Group: "g3", Committed: map[int32]int64{0: 3, 1: 3}, End: map[int32]int64{0: 3, 1: 3}})
	return r
}

func TestCheckThreeStagesClean(t *testing.T) {
	rep := newRun3().check(t)
	want(t, rep, nil)
	if len(rep.Stages) != 3 || rep.Distinct != 4 || rep.Stages[2].Committed != 2 || rep.Stages[2].OffsetsAtEnd != 2 {
		t.Errorf("totals: %+v", rep)
	}
}

func TestCheckThreeStagesBrokenLineage(t *testing.T) {
	r := newRun3()
	// Stage 3 read a record of the second middle topic that
	// read_committed does not show: a lost write of stage 2 and a
	// misread of stage 3 too.
	mp := checker.Partition{Topic: "out", Partition: 0}
	r.in.Middle[mp] = r.in.Middle[mp][1:]
	rep := r.check(t)
	want(t, rep, map[Anomaly]int{BrokenLineage: 1, Misread: 1, StageAnomaly: 2})
	if ex := strings.Join(rep.Examples[BrokenLineage], " "); !strings.Contains(ex, "out3") {
		t.Errorf("broken-lineage examples %q do not name the output topic", ex)
	}
}
