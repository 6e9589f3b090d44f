package bench

import (
	"fmt"
	"math"
	"runtime"
	"strings"
)

// The tables of the scale-out benchmark goal: several coordinators sharing
// the transactional ids through etcd against one.

// goalEtcd3VsSingle: 3 coordinators on etcd reach at least this share of
// the single coordinator's txn/s at 64 producers, on the same machine.
const goalEtcd3VsSingle = 0.75

// etcdTable is the embedded etcd's work per target that has one.
func (r *Report) etcdTable() table {
	t := table{title: "etcd (the embedded member's /metrics over the window)",
		header: []string{"target", "producers", "proposals/s", "proposals/txn", "puts/txn", "WAL fsyncs/s",
			"WAL fsync mean ms", "proposals/WAL fsync", "WAL fsync busy", "backend commits/s",
			"leaders' log fdatasyncs/s", "fsyncs/txn (WAL + log)"}}
	for _, row := range r.Rows {
		e := row.Etcd
		if e == nil {
			continue
		}
		logSyncs, perTxn := math.NaN(), math.NaN()
		if row.Coord != nil {
			logSyncs = row.Coord.FdatasyncsPerSec
			perTxn = (e.WALFsyncsPerSec + logSyncs) / row.TxnPerSec
		}
		t.rows = append(t.rows, []string{row.Target, fmt.Sprint(row.Producers),
			orNA(e.ProposalsPerSec, "%.0f"), orNA(e.ProposalsPerTxn, "%.2f"), orNA(e.PutsPerTxn, "%.2f"),
			orNA(e.WALFsyncsPerSec, "%.0f"), ms(e.WALFsyncMean), orNA(e.ProposalsPerFsync, "%.1f"),
			orNA(100*e.DiskBusy, "%.0f%%"), orNA(e.BackendCommitsPerSec, "%.1f"),
			orNA(logSyncs, "%.0f"), orNA(perTxn, "%.2f")})
	}
	if len(t.rows) > 0 {
		t.note = "A proposal is one Raft entry: a write Txn of txnetcd (the writes of every __transaction_state partition " +
			"of the process queued while the previous Txn was in flight, grouped, each fenced on its owner key), " +
			"or ownership's lease and epoch writes. WAL fsync busy = " +
			"the fsyncs' summed durations / the window. The leaders' log (" + metricFdatasyncs + ") shares the disk."
	}
	return t
}

// cpuTable is server CPU per 1,000 transactions split by component, for
// the rows that were profiled (--cpu-profile).
func (r *Report) cpuTable() table {
	header := []string{"target", "producers"}
	for _, c := range cpuComponents {
		header = append(header, c)
	}
	header = append(header, "server CPU (/proc)")
	t := table{title: "Server CPU by component (ms per 1k committed txn; --cpu-profile)", header: header}
	for _, row := range r.Rows {
		if row.CPUPer1000By == nil {
			continue
		}
		cells := []string{row.Target, fmt.Sprint(row.Producers)}
		for _, c := range cpuComponents {
			cells = append(cells, ms(row.CPUPer1000By[c]))
		}
		t.rows = append(t.rows, append(cells, ms(row.CPUPer1000)))
	}
	if len(t.rows) > 0 {
		t.note = "Each cell's CPU over the window (/proc) split in proportion to the samples of its CPU profile over the " +
			"same window, then the median over rounds (so the components need not add up to the /proc median exactly). " +
			"A stack is etcd's when any frame serves etcd (its gRPC server, Raft, WAL, apply, bbolt), the etcd client's " +
			"when any frame is the etcd client or its gRPC transport; otherwise the component of the frame nearest the leaf " +
			"among: " + strings.Join(cpuComponents[2:len(cpuComponents)-1], ", ") + " (profile.go); the rest is the Go " +
			"scheduler and runtime."
	}
	return t
}

// cell is target's successful cell at producers producers in round.
func (r *Report) cell(target string, producers, round int) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Target == target && c.Producers == producers && c.Round == round && c.Err == "" && c.Result != nil {
			return c, true
		}
	}
	return Cell{}, false
}

// scaleOutGoals reports the scale-out goal: txncoord-etcd3 at least
// goalEtcd3VsSingle of txncoord's txn/s at each producer count both ran.
func (r *Report) scaleOutGoals() table {
	t := table{title: "Scale-out goal (same run, medians over rounds)",
		header: []string{"goal", "txncoord-etcd3", "txncoord", "measured", "met"}}
	for _, n := range r.Producers {
		multi, okM := r.Row(TargetTxncoordEtcd3, n)
		single, okS := r.Row(TargetTxncoord, n)
		if !okM || !okS {
			continue
		}
		x := multi.TxnPerSec / single.TxnPerSec
		verdict := "no"
		if x >= goalEtcd3VsSingle {
			verdict = "yes"
		}
		t.rows = append(t.rows, []string{
			fmt.Sprintf("%s: 3 coordinators on etcd >= %gx one coordinator", producersLabel(n), goalEtcd3VsSingle),
			fmt.Sprintf("%.0f txn/s (CPU %s ms/1k)", multi.TxnPerSec, ms(multi.CPUPer1000)),
			fmt.Sprintf("%.0f txn/s (CPU %s ms/1k)", single.TxnPerSec, ms(single.CPUPer1000)),
			orNA(x, "%.2fx"), verdict})
		// Each round's pair ran back to back, so its ratio shows how much
		// the machine's load moved the median.
		for round := range r.Rounds {
			m, okM := r.cell(TargetTxncoordEtcd3, n, round)
			s, okS := r.cell(TargetTxncoord, n, round)
			if !okM || !okS {
				continue
			}
			t.rows = append(t.rows, []string{fmt.Sprintf("%s, round %d", producersLabel(n), round+1),
				fmt.Sprintf("%.0f txn/s", m.Result.TxnPerSec()), fmt.Sprintf("%.0f txn/s", s.Result.TxnPerSec()),
				orNA(m.Result.TxnPerSec()/s.Result.TxnPerSec(), "%.2fx"), ""})
		}
	}
	if len(t.rows) > 0 {
		t.note = fmt.Sprintf("Reported, never enforced; medians of %d round(s). Both run on this machine's %d cores with "+
			"the clients; etcd's Raft, WAL and gRPC share the cores and the disk with the coordinators and leaders.",
			r.Rounds, runtime.NumCPU())
	}
	return t
}
