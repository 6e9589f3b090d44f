package checker

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Table renders the report for people (make soak prints it): totals, then
// every anomaly kind with its count, then the examples of the kinds found.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, n int) { fmt.Fprintf(w, "%s\t%d\t\n", name, n) }
	fmt.Fprintf(w, "%s\t%s\t\n", "", "count")
	row("transactions", r.Txns)
	row("  committed", r.TxnsCommitted)
	row("  aborted", r.TxnsAborted)
	row("  unknown", r.TxnsUnknown)
	row("    resolved committed", r.UnknownVisible)
	row("    resolved aborted", r.UnknownInvisible)
	row("  never ended", r.TxnsOpen)
	row("values written", r.Values)
	row("  committed", r.ValuesCommitted)
	row("  aborted", r.ValuesAborted)
	row("  unknown", r.ValuesUnknown)
	row("  never ended", r.ValuesOpen)
	row("values read", r.ValuesRead)
	row("partitions read", r.Partitions)
	row("anomalies", r.Anomalies())
	for _, k := range Anomalies {
		row("  "+string(k), r.Counts[k])
	}
	w.Flush()
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
	return fmt.Sprintf("txns=%d (committed=%d aborted=%d unknown=%d open=%d) values=%d read=%d anomalies: %s",
		r.Txns, r.TxnsCommitted, r.TxnsAborted, r.TxnsUnknown, r.TxnsOpen, r.Values, r.ValuesRead, strings.Join(found, " "))
}
