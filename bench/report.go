package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a finished plan: the disk probe, every cell, and the medians.
type Report struct {
	Started   time.Time
	Command   string // the command line that ran it, shown with the goals
	Workload  Workload
	Rounds    int
	Paired    bool // Plan.Paired: one server per target and producer count, its rounds as windows
	Producers []int
	Targets   []string
	Fsync     *FsyncProbe
	Cells     []Cell
	Rows      []Row // one per target and producer count, medians over rounds
}

// Latencies are the three percentiles the report shows.
type Latencies struct{ P50, P99, P999 time.Duration }

// Row is the median over the rounds that succeeded.
type Row struct {
	Target        string
	Producers     int
	Rounds        int // rounds that produced a result
	TxnPerSec     float64
	RecordsPerSec float64
	EndTxn        Latencies
	Commit        Latencies
	CPUPer1000    time.Duration
	PeakRSS       int64
	Coord         *CoordFigures
	Etcd          *EtcdFigures
	// CPUPer1000By is server CPU per 1,000 committed transactions by
	// component (median over the rounds that were profiled).
	CPUPer1000By map[string]time.Duration
	Failed       int64    // failed transactions over all rounds
	Errors       []string // distinct cell errors
}

func latencies(r *Result, endTxn bool) Latencies {
	h := r.Commit
	if endTxn {
		h = r.EndTxn
	}
	at := func(q float64) time.Duration { return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond }
	return Latencies{P50: at(50), P99: at(99), P999: at(99.9)}
}

// median of xs (mean of the middle two for an even count); NaN when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r *Report) summarize() {
	r.Rows = nil
	for _, target := range r.Targets {
		for _, n := range r.Producers {
			row := Row{Target: target, Producers: n}
			var txn, recs, cpu, rss []float64
			var figs []CoordFigures
			var etcdFigs []EtcdFigures
			byComponent := map[string][]float64{}
			var lat [6][]float64
			for _, c := range r.Cells {
				if c.Target != target || c.Producers != n {
					continue
				}
				if c.Err != "" && !slices.Contains(row.Errors, c.Err) {
					row.Errors = append(row.Errors, c.Err)
				}
				if c.Result == nil || c.Result.Committed == 0 {
					continue
				}
				row.Rounds++
				row.Failed += c.Result.Failed
				txn = append(txn, c.Result.TxnPerSec())
				recs = append(recs, c.Result.RecordsPerSec())
				cpu = append(cpu, float64(c.CPUPer1000()))
				rss = append(rss, float64(c.PeakRSS))
				e, m := latencies(c.Result, true), latencies(c.Result, false)
				for i, d := range []time.Duration{e.P50, e.P99, e.P999, m.P50, m.P99, m.P999} {
					lat[i] = append(lat[i], float64(d))
				}
				if c.Coord != nil {
					figs = append(figs, *c.Coord)
				}
				if c.Etcd != nil {
					etcdFigs = append(etcdFigs, *c.Etcd)
				}
				if c.CPUByComponent != nil {
					for _, comp := range cpuComponents {
						byComponent[comp] = append(byComponent[comp],
							float64(c.CPUByComponent[comp])*1000/float64(c.Result.Committed))
					}
				}
			}
			if row.Rounds > 0 {
				row.TxnPerSec, row.RecordsPerSec = median(txn), median(recs)
				row.CPUPer1000, row.PeakRSS = time.Duration(median(cpu)), int64(median(rss))
				d := func(i int) time.Duration { return time.Duration(median(lat[i])) }
				row.EndTxn = Latencies{d(0), d(1), d(2)}
				row.Commit = Latencies{d(3), d(4), d(5)}
				row.Coord = medianFigures(figs)
				row.Etcd = medianEtcd(etcdFigs)
				if len(byComponent) > 0 {
					row.CPUPer1000By = map[string]time.Duration{}
					for comp, xs := range byComponent {
						row.CPUPer1000By[comp] = time.Duration(median(xs))
					}
				}
			}
			r.Rows = append(r.Rows, row)
		}
	}
}

// medianKnown is the median of the non-NaN values, NaN if there are none.
func medianKnown(xs []float64) float64 {
	return median(slices.DeleteFunc(slices.Clone(xs), math.IsNaN))
}

// Row returns the row for target at n producers.
func (r *Report) Row(target string, n int) (Row, bool) {
	for _, row := range r.Rows {
		if row.Target == target && row.Producers == n {
			return row, row.Rounds > 0
		}
	}
	return Row{}, false
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

func orNA(v float64, format string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

// ratioPairs are the pairs of targets the ratio tables compare, first
// over second.
var ratioPairs = [][2]string{{TargetTxncoord, TargetKfake}, {TargetTxncoord, TargetKfakeSync},
	{TargetTxncoordNoSync, TargetKfake}, {TargetTxncoordEtcd3, TargetTxncoord}, {TargetTxncoordEtcd3, TargetKfake}}

// roundRatiosTable is each pair's ratios within each round, and their
// median: the two cells of a round ran minutes apart at most (seconds,
// Paired), so a round's ratio carries less of the machine's drift than
// the ratio of two medians over every round does.
func (r *Report) roundRatiosTable() table {
	t := table{title: "Ratios within each round", header: []string{"producers", "pair", "txn/s ratio per round",
		"median", "CPU/1k ratio per round", "median"}}
	for _, n := range r.Producers {
		for _, pair := range ratioPairs {
			var txn, cpu []float64
			var txnCol, cpuCol []string
			for round := range r.Rounds {
				a, okA := r.cell(pair[0], n, round)
				b, okB := r.cell(pair[1], n, round)
				if !okA || !okB {
					continue
				}
				x, c := a.Result.TxnPerSec()/b.Result.TxnPerSec(), math.NaN()
				if b.CPUPer1000() > 0 {
					c = float64(a.CPUPer1000()) / float64(b.CPUPer1000())
				}
				txn, cpu = append(txn, x), append(cpu, c)
				txnCol, cpuCol = append(txnCol, orNA(x, "%.2f")), append(cpuCol, orNA(c, "%.2f"))
			}
			if len(txn) == 0 {
				continue
			}
			t.rows = append(t.rows, []string{fmt.Sprint(n), pair[0] + "/" + pair[1], strings.Join(txnCol, " "),
				orNA(medianKnown(txn), "%.2f"), strings.Join(cpuCol, " "), orNA(medianKnown(cpu), "%.2f")})
		}
	}
	return t
}

// roundsTable is every cell in the order it ran, with the host's steal and
// idle time during its window: the medians above hide how far rounds spread.
func (r *Report) roundsTable() table {
	t := table{title: "Every round", header: []string{"round", "target", "producers", "txn/s", "commit p50 ms", "p99",
		"server CPU ms/1k txn", "host steal %", "host idle %"}}
	for _, c := range r.Cells {
		if c.Result == nil {
			t.rows = append(t.rows, []string{fmt.Sprint(c.Round + 1), c.Target, fmt.Sprint(c.Producers), "failed", "", "", "", "", ""})
			continue
		}
		l := latencies(c.Result, false)
		t.rows = append(t.rows, []string{fmt.Sprint(c.Round + 1), c.Target, fmt.Sprint(c.Producers),
			fmt.Sprintf("%.0f", c.Result.TxnPerSec()), ms(l.P50), ms(l.P99), ms(c.CPUPer1000()),
			fmt.Sprintf("%.1f", 100*c.HostSteal), fmt.Sprintf("%.1f", 100*c.HostIdle)})
	}
	t.note = "Host steal: the share of the machine's CPU time (all CPUs) over the cell's window that the hypervisor gave to others; " +
		"host idle: the share in which a CPU had nothing to run (idle + iowait), clients and server together: a target that " +
		"leaves the machine idle at a fixed number of producers is bound by waiting, not by CPU (/proc/stat)."
	return t
}

// tables returns the report's tables as header + rows of cells, shared by the
// terminal and markdown renderings so both always show the same figures.
func (r *Report) tables() []table {
	main := table{title: "Results (medians over rounds)", header: []string{"target", "producers", "rounds",
		"txn/s", "records/s", "EndTxn p50 ms", "p99", "p99.9", "commit p50 ms", "p99", "p99.9",
		"server CPU ms/1k txn", "peak RSS MiB", "failed txns"}}
	for _, row := range r.Rows {
		if row.Rounds == 0 {
			main.rows = append(main.rows, []string{row.Target, fmt.Sprint(row.Producers), "0",
				"failed", "", "", "", "", "", "", "", "", "", ""})
			continue
		}
		main.rows = append(main.rows, []string{row.Target, fmt.Sprint(row.Producers), fmt.Sprint(row.Rounds),
			fmt.Sprintf("%.0f", row.TxnPerSec), fmt.Sprintf("%.0f", row.RecordsPerSec),
			ms(row.EndTxn.P50), ms(row.EndTxn.P99), ms(row.EndTxn.P999),
			ms(row.Commit.P50), ms(row.Commit.P99), ms(row.Commit.P999),
			ms(row.CPUPer1000), fmt.Sprintf("%.1f", float64(row.PeakRSS)/(1<<20)), fmt.Sprint(row.Failed)})
	}
	tables := []table{main}

	ratios := table{title: "Ratios", header: []string{"producers", "pair", "txn/s ratio", "commit p50 ratio",
		"commit p99 ratio", "CPU/1k ratio"}}
	for _, n := range r.Producers {
		for _, pair := range ratioPairs {
			a, okA := r.Row(pair[0], n)
			b, okB := r.Row(pair[1], n)
			if !okA || !okB {
				continue
			}
			ratio := func(x, y float64) string { return orNA(x/y, "%.2f") }
			ratios.rows = append(ratios.rows, []string{fmt.Sprint(n), pair[0] + "/" + pair[1],
				ratio(a.TxnPerSec, b.TxnPerSec), ratio(float64(a.Commit.P50), float64(b.Commit.P50)),
				ratio(float64(a.Commit.P99), float64(b.Commit.P99)), ratio(float64(a.CPUPer1000), float64(b.CPUPer1000))})
		}
	}
	if len(ratios.rows) > 0 {
		tables = append(tables, ratios)
	}
	if t := r.roundRatiosTable(); len(t.rows) > 0 {
		tables = append(tables, t)
	}
	tables = append(tables, r.roundsTable())

	coord := table{title: "txncoord storage (/metrics over the window)",
		header: []string{"target", "producers", "group commits/s", "log fdatasyncs/s", "disk fdatasyncs/s",
			"applier bbolt commits/s", "records/group commit", "transitions/fsync", "log B/txn", "applier B/txn",
			"written B/txn", "markers/WTM request"}}
	for _, row := range r.Rows {
		f := row.Coord
		if f == nil {
			continue
		}
		coord.rows = append(coord.rows, []string{row.Target, fmt.Sprint(row.Producers),
			orNA(f.GroupCommitsPerSec, "%.0f"), orNA(f.FdatasyncsPerSec, "%.0f"), r.diskRate(),
			orNA(f.ApplyCommitsPerSec, "%.1f"), orNA(f.RecordsPerCommit, "%.1f"), orNA(f.TransitionsPerFsync, "%.1f"),
			orNA(f.LogBytesPerTxn, "%.0f"), orNA(f.ApplyBytesPerTxn, "%.0f"), orNA(f.BytesPerTxn, "%.0f"),
			orNA(f.MarkersPerWTMRequest, "%.1f")})
	}
	if len(coord.rows) > 0 {
		coord.note = "A transition's fsync is the log's group commit (" + metricGroupCommits + "). Written bytes per " +
			"committed transaction = (Δ " + metricLogBytes + " + 4096 × Δ " + metricApplyPages + ") / transactions " +
			"committed in the window; the applier's bbolt commits make two fdatasyncs each, not in the log's count."
		tables = append(tables, coord)
	}
	if t := r.etcdTable(); len(t.rows) > 0 {
		tables = append(tables, t)
	}
	if t := r.cpuTable(); len(t.rows) > 0 {
		tables = append(tables, t)
	}
	if goals := r.goals(); len(goals.rows) > 0 {
		tables = append(tables, goals)
	}
	if goals := r.scaleOutGoals(); len(goals.rows) > 0 {
		tables = append(tables, goals)
	}
	return tables
}

// diskRate is the fsync probe's fdatasyncs per second, "n/a" without it.
func (r *Report) diskRate() string {
	if r.Fsync == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", r.Fsync.PerSecond)
}

// Goal thresholds of the commit path, against peers in the same run
// (medians of at least minGoalRounds rounds).
const (
	minGoalRounds          = 3
	goalP50VsKfake1        = 2.0  // 1 producer: commit p50 <= 2x kfake in memory's
	goalTxnVsKfake1        = 0.5  // 1 producer: txn/s >= 0.5x kfake's
	goalTxnVsKfake64       = 0.75 // 64 producers: txn/s >= 0.75x kfake's
	goalP99VsKfake64       = 1.5  // 64 producers: commit p99 <= 1.5x kfake's
	goalNoSyncTxnVsKfake64 = 1.0  // --unsafe-no-fsync, 64 producers: txn/s >= 1.0x kfake's
	goalBytesPerTxn        = 1024 // bytes written per transaction
	goalCPUVsKfake64       = 1.5  // 64 producers: server CPU per 1k txn <= 1.5x kfake's (its own process)
)

// goals reports the commit path's goals against this run's medians.
// They are reported, never enforced: a benchmark does not fail on a timing.
func (r *Report) goals() table {
	t := table{title: "Commit-path goals (txncoord durable unless named; medians over rounds)",
		header: []string{"goal", "txncoord", "reference", "measured", "met"}}
	add := func(goal, txncoord, reference string, measured float64, format string, met bool) {
		verdict := "no"
		switch {
		case math.IsNaN(measured) || math.IsInf(measured, 0):
			verdict = "n/a"
		case met:
			verdict = "yes"
		}
		t.rows = append(t.rows, []string{goal, txncoord, reference, orNA(measured, format), verdict})
	}
	ratio := func(a, b float64) float64 { return a / b }
	msOf := func(d time.Duration) string { return ms(d) + " ms" }
	txnOf := func(row Row) string { return fmt.Sprintf("%.0f txn/s", row.TxnPerSec) }

	tc1, ok1 := r.Row(TargetTxncoord, 1)
	if k, ok := r.Row(TargetKfake, 1); ok && ok1 {
		x := ratio(float64(tc1.Commit.P50), float64(k.Commit.P50))
		add(fmt.Sprintf("1 producer: commit p50 <= %gx kfake in memory", goalP50VsKfake1),
			msOf(tc1.Commit.P50), msOf(k.Commit.P50), x, "%.2fx", x <= goalP50VsKfake1)
		x = ratio(tc1.TxnPerSec, k.TxnPerSec)
		add(fmt.Sprintf("1 producer: txn/s >= %gx kfake in memory", goalTxnVsKfake1),
			txnOf(tc1), txnOf(k), x, "%.2fx", x >= goalTxnVsKfake1)
	}
	tc64, ok64 := r.Row(TargetTxncoord, 64)
	kf64, okK64 := r.Row(TargetKfake, 64)
	if ok64 && okK64 {
		x := ratio(tc64.TxnPerSec, kf64.TxnPerSec)
		add(fmt.Sprintf("64 producers: txn/s >= %gx kfake in memory", goalTxnVsKfake64),
			txnOf(tc64), txnOf(kf64), x, "%.2fx", x >= goalTxnVsKfake64)
		x = ratio(float64(tc64.Commit.P99), float64(kf64.Commit.P99))
		add(fmt.Sprintf("64 producers: commit p99 <= %gx kfake in memory", goalP99VsKfake64),
			msOf(tc64.Commit.P99), msOf(kf64.Commit.P99), x, "%.2fx", x <= goalP99VsKfake64)
	}
	if k, ok := r.Row(TargetKfakeSync, 64); ok && ok64 {
		// Reported, not steered by: kfake's SyncWrites fsyncs every batch.
		for _, g := range []struct {
			goal, a, b string
			x          float64
		}{
			{"64 producers: txn/s vs kfake SyncWrites", txnOf(tc64), txnOf(k), ratio(tc64.TxnPerSec, k.TxnPerSec)},
			{"64 producers: commit p99 vs kfake SyncWrites", msOf(tc64.Commit.P99), msOf(k.Commit.P99),
				ratio(float64(tc64.Commit.P99), float64(k.Commit.P99))},
		} {
			t.rows = append(t.rows, []string{g.goal, g.a, g.b, orNA(g.x, "%.2fx"), "not a goal"})
		}
	}
	if n, ok := r.Row(TargetTxncoordNoSync, 64); ok && okK64 {
		x := ratio(n.TxnPerSec, kf64.TxnPerSec)
		add(fmt.Sprintf("64 producers, --unsafe-no-fsync: txn/s >= %.1fx kfake in memory", goalNoSyncTxnVsKfake64),
			txnOf(n), txnOf(kf64), x, "%.2fx", x >= goalNoSyncTxnVsKfake64)
	}
	for _, n := range r.Producers {
		row, ok := r.Row(TargetTxncoord, n)
		if !ok || row.Coord == nil {
			continue
		}
		f := row.Coord
		add(fmt.Sprintf("%s: bytes written per txn <= 1 KiB", producersLabel(n)),
			fmt.Sprintf("log %s + applier %s", orNA(f.LogBytesPerTxn, "%.0f B"), orNA(f.ApplyBytesPerTxn, "%.0f B")),
			"", f.BytesPerTxn, "%.0f B", f.BytesPerTxn <= goalBytesPerTxn)
	}
	for _, n := range r.Producers {
		row, ok := r.Row(TargetTxncoord, n)
		if !ok || row.Coord == nil {
			continue
		}
		f := row.Coord
		measured := f.FdatasyncsPerCommit
		if math.IsNaN(f.ExtraFdatasyncs) {
			measured = math.NaN()
		}
		add(fmt.Sprintf("%s: fdatasyncs/s <= group commits/s (one per commit)", producersLabel(n)),
			fmt.Sprintf("%s fdatasyncs/s, %s group commits/s", orNA(f.FdatasyncsPerSec, "%.0f"), orNA(f.GroupCommitsPerSec, "%.0f")),
			fmt.Sprintf("disk %s/s; applier %s bbolt commits/s", r.diskRate(), orNA(f.ApplyCommitsPerSec, "%.1f")),
			measured, "%.3f per commit", f.ExtraFdatasyncs <= 0)
	}
	if ok64 && okK64 {
		x := ratio(float64(tc64.CPUPer1000), float64(kf64.CPUPer1000))
		add(fmt.Sprintf("64 producers: server CPU per 1k txn <= %gx kfake in memory", goalCPUVsKfake64),
			msOf(tc64.CPUPer1000), msOf(kf64.CPUPer1000), x, "%.2fx", x <= goalCPUVsKfake64)
	}
	if len(t.rows) > 0 {
		command := "not recorded"
		if r.Command != "" {
			command = "`" + r.Command + "`"
		}
		t.note = fmt.Sprintf("Command: %s; medians of %d round(s) per cell", command, r.Rounds)
		if r.Rounds < minGoalRounds {
			t.note += fmt.Sprintf(" (the goals ask for at least %d)", minGoalRounds)
		}
		t.note += ". Reported, never enforced. The fdatasync goal allows one more per 64 MiB log segment started " +
			"in the window and one in flight at the scrape; a missed goal needs a profile of its cell to show what bounds it " +
			"(`txncoord-bench drive` against a server started by hand, /debug/pprof on its admin API)."
	}
	return t
}

func producersLabel(n int) string {
	if n == 1 {
		return "1 producer"
	}
	return fmt.Sprintf("%d producers", n)
}

type table struct {
	title  string
	header []string
	rows   [][]string
	note   string // printed under the table
}

// Table renders the report for a terminal.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString(r.preamble(false))
	for _, t := range r.tables() {
		fmt.Fprintf(&b, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
		if t.note != "" {
			fmt.Fprintln(&b, t.note)
		}
	}
	b.WriteString(r.problems())
	return b.String()
}

// Markdown renders the report as report.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# txncoord bench — %s\n\n", r.Started.Format(time.RFC3339))
	b.WriteString(r.preamble(true))
	for _, t := range r.tables() {
		fmt.Fprintf(&b, "\n## %s\n\n| %s |\n|%s\n", t.title, strings.Join(t.header, " | "),
			strings.Repeat("---|", len(t.header)))
		for _, row := range t.rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
		if t.note != "" {
			fmt.Fprintf(&b, "\n%s\n", t.note)
		}
	}
	var sources []string
	for _, row := range r.Rows {
		if row.Coord != nil {
			for _, s := range row.Coord.Sources {
				if !slices.Contains(sources, s) {
					sources = append(sources, s)
				}
			}
		}
	}
	if len(sources) > 0 {
		b.WriteString("\nMetric sources: " + strings.Join(sources, "; ") + ".\n")
	}
	b.WriteString(r.problems())
	b.WriteString("\n![commit latency](latency.png)\n")
	return b.String()
}

func (r *Report) preamble(md bool) string {
	w := r.Workload
	bullet := ""
	if md {
		bullet = "- "
	}
	var b strings.Builder
	if r.Command != "" {
		if md {
			fmt.Fprintf(&b, "- command: `%s`\n", r.Command)
		} else {
			fmt.Fprintf(&b, "command: %s\n", r.Command)
		}
	}
	window := w.Duration.String()
	if w.Count > 0 {
		window = fmt.Sprintf("%d transactions", w.Count)
	}
	fmt.Fprintf(&b, "%sworkload: kgo TV2 transactional producers %v, %d record(s) to each of %d partitions per transaction, abort ratio %.2f, window %s, %d round(s), targets %s\n",
		bullet, r.Producers, w.RecordsPerTxn, w.Partitions, w.AbortRatio, window, r.Rounds, strings.Join(r.Targets, ","))
	if r.Paired {
		fmt.Fprintf(&b, "%spaired: each target started once per producer count, its rounds run as windows on that server, alternating with the other targets' (which idle meanwhile); a target's windows reuse its transactional ids\n", bullet)
	}
	fmt.Fprintf(&b, "%smachine: %d CPUs, GOMAXPROCS %d, %s/%s, %s; server CPU and RSS are the target's child process only (clients excluded)\n",
		bullet, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if f := r.Fsync; f != nil {
		fmt.Fprintf(&b, "%sdisk: 4 KiB write+fdatasync in %s: p50 %s, p99 %s, %.0f per second (%d syncs)\n",
			bullet, f.Dir, f.P50.Round(time.Microsecond), f.P99.Round(time.Microsecond), f.PerSecond, f.Syncs)
	}
	return b.String()
}

// problems lists cell errors, so a failed target is visible, not silent.
func (r *Report) problems() string {
	var b strings.Builder
	for _, c := range r.Cells {
		if c.Err != "" {
			fmt.Fprintf(&b, "- round %d %s producers=%d: %s\n", c.Round+1, c.Target, c.Producers, c.Err)
		}
		if c.ProfileErr != "" {
			fmt.Fprintf(&b, "- round %d %s producers=%d: %s\n", c.Round+1, c.Target, c.Producers, c.ProfileErr)
		}
		if c.Result != nil {
			for _, e := range c.Result.Errors {
				fmt.Fprintf(&b, "- round %d %s producers=%d: transaction error: %s\n", c.Round+1, c.Target, c.Producers, e)
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nProblems:\n" + b.String()
}

// cellJSON is the raw per-cell record in cells.json.
type cellJSON struct {
	Target        string             `json:"target"`
	Producers     int                `json:"producers"`
	Round         int                `json:"round"`
	Committed     int64              `json:"committed"`
	Aborted       int64              `json:"aborted"`
	Failed        int64              `json:"failed"`
	Records       int64              `json:"records"`
	ElapsedSec    float64            `json:"elapsed_s"`
	CommitP50Us   int64              `json:"commit_p50_us"`
	CommitP99Us   int64              `json:"commit_p99_us"`
	ServerCPUSec  float64            `json:"server_cpu_s"`
	PeakRSSBytes  int64              `json:"peak_rss_bytes"`
	HostSteal     float64            `json:"host_steal"` // share of the machine's CPU time, 0..1
	HostIdle      float64            `json:"host_idle"`  // idle + iowait share of the machine's CPU time, 0..1
	MetricsDeltas map[string]float64 `json:"metrics_deltas,omitempty"`
	// CPUByComponentSec is server_cpu_s split by the window's CPU profile.
	CPUByComponentSec map[string]float64 `json:"cpu_by_component_s,omitempty"`
	Err               string             `json:"error,omitempty"`
}

// Write puts report.md, latency.png and cells.json into dir (created).
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	if err := r.WritePlot(filepath.Join(dir, "latency.png")); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	var cells []cellJSON
	for _, c := range r.Cells {
		j := cellJSON{Target: c.Target, Producers: c.Producers, Round: c.Round + 1, ServerCPUSec: c.ServerCPU.Seconds(),
			PeakRSSBytes: c.PeakRSS, HostSteal: c.HostSteal, HostIdle: c.HostIdle, MetricsDeltas: c.Metrics, Err: c.Err}
		if c.CPUByComponent != nil {
			j.CPUByComponentSec = map[string]float64{}
			for comp, d := range c.CPUByComponent {
				j.CPUByComponentSec[comp] = d.Seconds()
			}
		}
		if res := c.Result; res != nil {
			j.Committed, j.Aborted, j.Failed, j.Records, j.ElapsedSec = res.Committed, res.Aborted, res.Failed, res.Records, res.Elapsed.Seconds()
			j.CommitP50Us, j.CommitP99Us = res.Commit.ValueAtQuantile(50), res.Commit.ValueAtQuantile(99)
		}
		cells = append(cells, j)
	}
	raw, err := json.MarshalIndent(cells, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cells.json"), raw, 0o644)
}
