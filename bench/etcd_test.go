package bench

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScaleOutDataDriven replays testdata/scaleout.txt: the etcd figures
// derived from the embedded member's counters, and the split of a CPU
// profile's stacks by component.
func TestScaleOutDataDriven(t *testing.T) {
	runDataDriven(t, "testdata/scaleout.txt", func(t *testing.T, s scenario) string {
		switch s.command {
		case "etcd-figures":
			elapsed, err := time.ParseDuration(s.arg(t, "elapsed"))
			if err != nil {
				t.Fatal(err)
			}
			committed, err := strconv.ParseInt(s.arg(t, "committed"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			m, err := parseMetrics(strings.NewReader(s.input))
			if err != nil {
				return "error: " + err.Error()
			}
			f := etcdFigures(m, elapsed, committed)
			if f == nil {
				return "no etcd\n"
			}
			var b strings.Builder
			for _, l := range []struct {
				name   string
				v      float64
				format string
			}{
				{"proposals/s", f.ProposalsPerSec, "%.1f"},
				{"proposals/txn", f.ProposalsPerTxn, "%.2f"},
				{"puts/txn", f.PutsPerTxn, "%.2f"},
				{"WAL fsyncs/s", f.WALFsyncsPerSec, "%.1f"},
			} {
				fmt.Fprintf(&b, "%s %s\n", l.name, orNA(l.v, l.format))
			}
			fmt.Fprintf(&b, "WAL fsync mean %s\n", f.WALFsyncMean)
			fmt.Fprintf(&b, "proposals/WAL fsync %s\n", orNA(f.ProposalsPerFsync, "%.1f"))
			fmt.Fprintf(&b, "WAL fsync busy %s\n", orNA(f.DiskBusy, "%.2f"))
			fmt.Fprintf(&b, "backend commits/s %s\n", orNA(f.BackendCommitsPerSec, "%.1f"))
			return b.String()
		case "cpu-split":
			samples, err := parseTraces(strings.NewReader(s.input))
			if err != nil {
				return "error: " + err.Error()
			}
			shares := cpuShares(samples)
			var b strings.Builder
			for _, c := range cpuComponents {
				if v, ok := shares[c]; ok {
					fmt.Fprintf(&b, "%s %.3f\n", c, v)
				}
			}
			return b.String()
		default:
			t.Fatalf("%s: unknown command %q", s.pos, s.command)
			return ""
		}
	})
}

// TestScaleOutReport builds a report of txncoord and txncoord-etcd3 from
// known cells: the ratio and issue 19's goal per producer count, the etcd
// figures and the CPU split are medians over rounds.
func TestScaleOutReport(t *testing.T) {
	rep := &Report{Started: time.Unix(0, 0), Workload: DefaultWorkload(), Rounds: 3, Producers: []int{16, 64},
		Targets: []string{TargetTxncoord, TargetTxncoordEtcd3}}
	for round := range 3 {
		single64 := syntheticCell(TargetTxncoord, 64, round, 4000, 10)
		multi64 := syntheticCell(TargetTxncoordEtcd3, 64, round, []float64{1000, 1600, 9000}[round], 40)
		// Round 3 is an outlier in every figure: no median moves.
		proposals := []float64{1500, 2400, 99999}[round]
		multi64 = withStore(multi64, Metrics{metricFdatasyncs: 500, metricEtcdProposals: proposals,
			metricEtcdPuts: 2 * proposals, metricEtcdWALFsync + "_count": 150, metricEtcdWALFsync + "_sum": 0.3})
		multi64.Etcd = etcdFigures(multi64.Metrics, multi64.Result.Elapsed, multi64.Result.Committed)
		multi64.ServerCPU = time.Duration(multi64.Result.Committed) * time.Millisecond // 1,000 ms per 1k txn
		multi64.CPUByComponent = map[string]time.Duration{
			compEtcdServer: multi64.ServerCPU * 4 / 10, compEtcdClient: multi64.ServerCPU / 10,
			compCoordinator: multi64.ServerCPU / 10, compLeader: multi64.ServerCPU * 4 / 10}
		rep.Cells = append(rep.Cells, single64, multi64,
			syntheticCell(TargetTxncoord, 16, round, 3000, 5), syntheticCell(TargetTxncoordEtcd3, 16, round, 1800, 9))
	}
	rep.summarize()
	md := rep.Markdown()
	for _, want := range []string{
		"| 64 | txncoord-etcd3/txncoord | 0.40 |", // 1600 / 4000
		"| 16 | txncoord-etcd3/txncoord | 0.60 |",
		"| 16 producers: 3 coordinators on etcd >= 0.75x one coordinator | 1800 txn/s (CPU 50.000 ms/1k) | 3000 txn/s (CPU 50.000 ms/1k) | 0.60x | no |",
		"| 64 producers: 3 coordinators on etcd >= 0.75x one coordinator | 1600 txn/s (CPU 1000.000 ms/1k) | 4000 txn/s (CPU 50.000 ms/1k) | 0.40x | no |",
		// Every round's pair: round 3's outlier shows here, not in the median.
		"| 64 producers, round 1 | 1000 txn/s | 4000 txn/s | 0.25x |  |",
		"| 64 producers, round 3 | 9000 txn/s | 4000 txn/s | 2.25x |  |",
		// proposals/s 2400, 1.50 per txn, 3 puts, 150 fsyncs/s of 2 ms (30% busy), 16 per fsync;
		// WAL + log fsyncs per txn = (150 + 500) / 1600.
		"| txncoord-etcd3 | 64 | 2400 | 1.50 | 3.00 | 150 | 2.000 | 16.0 | 30% | n/a | 500 | 0.41 |",
		"| txncoord-etcd3 | 64 | 400.000 | 100.000 | 100.000 | 400.000 | 0.000 | 0.000 | 0.000 | 0.000 | 1000.000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| txncoord | 64 | 0.000 |") || strings.Contains(md, "| txncoord | 16 | n/a |") {
		t.Errorf("rows without a profile or etcd figures are listed:\n%s", md)
	}
}
