package eos

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Table renders the report: the chain's totals, each stage's, the
// anomalies, then the examples of those found.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\tchain\t")
	for i := range r.Stages {
		fmt.Fprintf(w, "stage %d\t", i+1)
	}
	fmt.Fprintf(w, "\n")
	row := func(name string, chain string, f func(*StageTotals) int) {
		fmt.Fprintf(w, "%s\t%s\t", name, chain)
		for i := range r.Stages {
			fmt.Fprintf(w, "%d\t", f(&r.Stages[i]))
		}
		fmt.Fprintf(w, "\n")
	}
	chainRow := func(name string, n int) {
		fmt.Fprintf(w, "%s\t%d\t%s\n", name, n, strings.Repeat("\t", len(r.Stages)))
	}
	chainRow("values", r.Values)
	chainRow("output records read", r.OutputRead)
	chainRow("distinct values out", r.Distinct)
	chainRow("duplicates", r.Counts[Duplicate])
	chainRow("losses", r.Counts[Loss])
	chainRow("aborted visible", r.Counts[AbortedVisible])
	row("member runs", "", func(s *StageTotals) int { return s.Members })
	row("restarts", "", func(s *StageTotals) int { return s.Restarts })
	row("rebalances", "", func(s *StageTotals) int { return s.Rebalances })
	row("assignments", "", func(s *StageTotals) int { return s.Assignments })
	row("transactions", "", func(s *StageTotals) int { return s.Attempts })
	row("  committed", "", func(s *StageTotals) int { return s.Committed })
	row("  aborted", "", func(s *StageTotals) int { return s.Aborted })
	row("  unknown", "", func(s *StageTotals) int { return s.Unknown })
	row("  never ended", "", func(s *StageTotals) int { return s.Open })
	row("partitions", "", func(s *StageTotals) int { return s.Partitions })
	row("  offset = log end", "", func(s *StageTotals) int { return s.OffsetsAtEnd })
	row("producer anomalies", "", func(s *StageTotals) int {
		if s.Producer == nil {
			return 0
		}
		return s.Producer.Anomalies()
	})
	chainRow("anomalies", r.Anomalies())
	for _, k := range Anomalies {
		chainRow("  "+string(k), r.Counts[k])
	}
	w.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, k := range Anomalies {
		for _, ex := range r.Examples[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, ex)
		}
	}
	return b.String()
}

// Summary is a one-line digest for logs and test failures.
func (r *Report) Summary() string {
	var found []string
	for _, k := range Anomalies {
		if n := r.Counts[k]; n > 0 {
			found = append(found, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(found) == 0 {
		found = []string{"none"}
	}
	perStage := func(f func(*StageTotals) int) string {
		var ns []string
		for i := range r.Stages {
			ns = append(ns, fmt.Sprint(f(&r.Stages[i])))
		}
		return strings.Join(ns, "/")
	}
	return fmt.Sprintf("values=%d out=%d distinct=%d txns=%s (committed %s aborted %s unknown %s) rebalances=%s restarts=%s anomalies: %s",
		r.Values, r.OutputRead, r.Distinct, perStage(func(s *StageTotals) int { return s.Attempts }),
		perStage(func(s *StageTotals) int { return s.Committed }), perStage(func(s *StageTotals) int { return s.Aborted }),
		perStage(func(s *StageTotals) int { return s.Unknown }), perStage(func(s *StageTotals) int { return s.Rebalances }),
		perStage(func(s *StageTotals) int { return s.Restarts }), strings.Join(found, " "))
}
