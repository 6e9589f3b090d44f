package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// syntheticCell is a finished cell with n committed transactions whose commit
// latency is commitMs and EndTxn latency half of it.
func syntheticCell(target string, producers, round int, txnPerSec float64, commitMs float64) Cell {
	res := &Result{Producers: producers, Elapsed: time.Second, EndTxn: newLatencyHistogram(), Commit: newLatencyHistogram()}
	res.Committed = int64(txnPerSec)
	res.Records = res.Committed * 2
	for range res.Committed {
		recordLatency(res.Commit, time.Duration(commitMs*float64(time.Millisecond)))
		recordLatency(res.EndTxn, time.Duration(commitMs*float64(time.Millisecond)/2))
	}
	return Cell{Target: target, Producers: producers, Round: round, Result: res,
		ServerCPU: time.Duration(res.Committed) * 50 * time.Microsecond, PeakRSS: 64 << 20}
}

// TestReportRenders builds a report from known cells and checks the medians,
// the ratios, the goals, the markdown and that latency.png is a PNG.
func TestReportRenders(t *testing.T) {
	rep := &Report{Started: time.Unix(0, 0), Workload: DefaultWorkload(), Rounds: 2, Producers: []int{1, 64},
		Targets: []string{TargetTxncoord, TargetKfake, TargetKfakeSync},
		Fsync:   &FsyncProbe{Dir: "/tmp", Syncs: 100, P50: 84 * time.Microsecond, PerSecond: 11000}}
	for round := range 2 {
		// Rounds differ so the median (their mean, for two) is visible.
		bump := float64(round) * 200
		rep.Cells = append(rep.Cells,
			syntheticCell(TargetTxncoord, 1, round, 1000+bump, 0.5),
			syntheticCell(TargetTxncoord, 64, round, 15000+bump, 2),
			syntheticCell(TargetKfake, 1, round, 12000+bump, 0.1),
			syntheticCell(TargetKfake, 64, round, 18000+bump, 3),
			syntheticCell(TargetKfakeSync, 1, round, 600+bump, 1.5),
			syntheticCell(TargetKfakeSync, 64, round, 800+bump, 80))
	}
	rep.Cells[1] = withStore(rep.Cells[1], Metrics{metricGroupCommits: 900, metricFdatasyncs: 900,
		metricLogBytes: 400 * 15000, metricApplyPages: 15000 / 4, metricTransitions: 16 * 900,
		metricMarkersPerWTM + "_sum": 200, metricMarkersPerWTM + "_count": 10})
	rep.Cells[3].HostSteal = 0.314 // kfake@64 of round 1: the host took a third of the CPUs
	rep.Cells = append(rep.Cells, Cell{Target: TargetKfake, Producers: 1, Round: 2, Err: "kfake exited before it was ready"})
	rep.summarize()

	row, ok := rep.Row(TargetTxncoord, 64)
	if !ok || row.TxnPerSec != 15100 || row.Rounds != 2 {
		t.Fatalf("txncoord@64 row = %+v, want median 15100 txn/s over 2 rounds", row)
	}
	if row.Coord == nil || row.Coord.TransitionsPerFsync != 16 {
		t.Fatalf("coordinator figures lost: %+v", row.Coord)
	}

	dir := t.TempDir()
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| txncoord | 64 | 2 | 15100 | 30200 |", // medians
		"| 64 | txncoord/kfake-sync | 16.78 |",  // 15100 / 900
		"| 64 producers: txn/s vs kfake SyncWrites | 15100 txn/s | 900 txn/s | 16.78x | not a goal |",
		"| 64 producers: txn/s >= 0.75x kfake in memory | 15100 txn/s | 18100 txn/s | 0.83x | yes |",
		"| 1 producer: commit p50 <= 2x kfake in memory | 0.500 ms | 0.100 ms | 5.00x | no |",
		// Storage figures of the one round that has them, next to the disk's rate.
		"| txncoord | 64 | 900 | 900 | 11000 | n/a | n/a | 16.0 | 400 | 1024 | 1424 | 20.0 |",
		"medians of 2 round(s) per cell (the goals ask for at least 3)",
		"kfake exited before it was ready", // a failed cell is visible
		// Every round, in the order run, with the host's steal.
		"| 1 | kfake | 64 | 18000 | 3.001 | 3.001 | 50.000 | 31.4 |",
		"| 2 | txncoord | 1 | 1200 | 0.500 | 0.500 | 50.000 | 0.0 |",
		"| 3 | kfake | 1 | failed |",
		// Each round's own ratio, then their median.
		"| 64 | txncoord/kfake | 0.83 0.84 | 0.83 | 1.00 1.00 | 1.00 |",
		"![commit latency](latency.png)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	png, err := os.ReadFile(filepath.Join(dir, "latency.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, pngMagic) {
		t.Errorf("latency.png does not start with the PNG signature: % x", png[:min(8, len(png))])
	}
	if _, err := os.Stat(filepath.Join(dir, "cells.json")); err != nil {
		t.Error(err)
	}
	if table := rep.Table(); !strings.Contains(table, "txncoord/kfake") {
		t.Errorf("terminal table lacks ratios:\n%s", table)
	}
}

// withStore gives a txncoord cell the figures runCell derives from the
// store's metric deltas d over its window.
func withStore(c Cell, d Metrics) Cell {
	f := coordFigures(d, c.Result.Elapsed, c.Result.Committed)
	c.Coord, c.Metrics = &f, d
	return c
}

// TestGoals derives the commit path's goals from three rounds of
// metric deltas: each figure is the median over rounds (an outlier round
// moves none), and each goal names what it compared.
func TestGoals(t *testing.T) {
	rep := &Report{Started: time.Unix(0, 0), Workload: DefaultWorkload(), Rounds: 3, Producers: []int{1, 64},
		Targets: []string{TargetTxncoord, TargetKfake, TargetKfakeSync, TargetTxncoordNoSync},
		Command: "txncoord-bench --producers 1,64 --rounds 3",
		Fsync:   &FsyncProbe{Dir: "/tmp", Syncs: 100, P50: 150 * time.Microsecond, PerSecond: 6000}}
	const n64 = 8192 // transactions per round at 64 producers
	for round := range 3 {
		tc1 := withStore(syntheticCell(TargetTxncoord, 1, round, 1000, 2), Metrics{
			metricGroupCommits: 3000, metricFdatasyncs: 3000, metricLogBytes: 500 * 1000, metricApplyPages: 1000,
			metricApplyCommits: 10, metricTxnlogFsyncs: 3000, metricTransitions: 6000})
		// Round 2 is the outlier: 2,000 applier bytes per transaction, and
		// two fdatasyncs per group commit.
		pages := []float64{n64 * 200 / 4096, n64 * 300 / 4096, n64 * 2000 / 4096}[round]
		fdatasyncs := []float64{1000, 1001, 2000}[round]
		tc64 := withStore(syntheticCell(TargetTxncoord, 64, round, n64, 10), Metrics{
			metricGroupCommits: 1000, metricFdatasyncs: fdatasyncs, metricLogBytes: 400 * n64, metricApplyPages: pages,
			metricApplyCommits: 20, metricTxnlogFsyncs: 1000, metricTransitions: 40000})
		tc64.ServerCPU = n64 * 120 * time.Microsecond // 120 ms per 1k transactions
		nosync := withStore(syntheticCell(TargetTxncoordNoSync, 64, round, 9000, 5), Metrics{
			metricGroupCommits: 700, metricFdatasyncs: 0, metricLogBytes: 400 * 9000, metricApplyPages: 0})
		rep.Cells = append(rep.Cells, tc1, tc64, nosync,
			syntheticCell(TargetKfake, 1, round, 4000, 0.25),
			syntheticCell(TargetKfake, 64, round, 10000, 8),
			syntheticCell(TargetKfakeSync, 64, round, 500, 100))
	}
	rep.summarize()

	row, _ := rep.Row(TargetTxncoord, 64)
	f := row.Coord
	if f == nil || f.LogBytesPerTxn != 400 || f.ApplyBytesPerTxn != 300 || f.BytesPerTxn != 700 ||
		f.FdatasyncsPerCommit != 1.001 || f.ExtraFdatasyncs != 0 || f.TransitionsPerFsync != 40 {
		t.Fatalf("txncoord@64 storage figures = %+v, want the medians: 400 + 300 = 700 B/txn, 1.001 fdatasyncs per commit, none extra, 40 transitions/fsync", f)
	}

	var got []string
	for _, r := range rep.goals().rows {
		got = append(got, "| "+strings.Join(r, " | ")+" |")
	}
	want := []string{
		"| 1 producer: commit p50 <= 2x kfake in memory | 2.000 ms | 0.250 ms | 8.00x | no |",
		"| 1 producer: txn/s >= 0.5x kfake in memory | 1000 txn/s | 4000 txn/s | 0.25x | no |",
		"| 64 producers: txn/s >= 0.75x kfake in memory | 8192 txn/s | 10000 txn/s | 0.82x | yes |",
		"| 64 producers: commit p99 <= 1.5x kfake in memory | 10.007 ms | 8.003 ms | 1.25x | yes |",
		"| 64 producers: txn/s vs kfake SyncWrites | 8192 txn/s | 500 txn/s | 16.38x | not a goal |",
		"| 64 producers: commit p99 vs kfake SyncWrites | 10.007 ms | 100.031 ms | 0.10x | not a goal |",
		"| 64 producers, --unsafe-no-fsync: txn/s >= 1.0x kfake in memory | 9000 txn/s | 10000 txn/s | 0.90x | no |",
		"| 1 producer: bytes written per txn <= 1 KiB | log 500 B + applier 4096 B |  | 4596 B | no |",
		"| 64 producers: bytes written per txn <= 1 KiB | log 400 B + applier 300 B |  | 700 B | yes |",
		"| 1 producer: fdatasyncs/s <= group commits/s (one per commit) | 3000 fdatasyncs/s, 3000 group commits/s | disk 6000/s; applier 10.0 bbolt commits/s | 1.000 per commit | yes |",
		"| 64 producers: fdatasyncs/s <= group commits/s (one per commit) | 1001 fdatasyncs/s, 1000 group commits/s | disk 6000/s; applier 20.0 bbolt commits/s | 1.001 per commit | yes |",
		"| 64 producers: server CPU per 1k txn <= 1.5x kfake in memory | 120.000 ms | 50.000 ms | 2.40x | no |",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("goals:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	md := rep.Markdown()
	for _, w := range []string{
		"- command: `txncoord-bench --producers 1,64 --rounds 3`",
		"Command: `txncoord-bench --producers 1,64 --rounds 3`; medians of 3 round(s) per cell. Reported, never enforced.",
		// The older txnlog counter is the same group commits: not added in.
		"group commits/s: txncoord_store_group_commits_total;",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
	if strings.Contains(md, "at least 3") {
		t.Errorf("3 rounds reported as too few:\n%s", md)
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine("txncoord-bench", []string{"--producers", "1,16,64", "--out", "my results", "--x=it's", ""})
	want := `txncoord-bench --producers 1,16,64 --out 'my results' '--x=it'\''s' ''`
	if got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}

// TestPlanWithKfakeChild runs a tiny plan end to end through the child
// process path: kfake re-executed from this test binary, CPU and RSS read
// from /proc, a target that cannot start reported as a failed row.
func TestPlanWithKfakeChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	targets, w := kfakeAndUnstartable(t, 500*time.Millisecond)
	var progress bytes.Buffer
	work := t.TempDir()
	rep, err := RunPlan(ctx, Plan{
		Targets:    targets,
		Producers:  []int{2},
		Rounds:     1,
		Workload:   w,
		WorkDir:    work,
		FsyncProbe: 100 * time.Millisecond,
		Progress:   NewProgress(&progress, false),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fsync == nil || rep.Fsync.Syncs == 0 || rep.Fsync.P50 <= 0 {
		t.Errorf("fsync probe measured nothing: %+v", rep.Fsync)
	}
	if len(rep.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(rep.Cells))
	}
	var kf, tc Cell
	for _, c := range rep.Cells {
		if c.Target == TargetKfake {
			kf = c
		} else {
			tc = c
		}
	}
	if kf.Err != "" || kf.Result == nil || kf.Result.Committed == 0 {
		t.Fatalf("kfake cell: err %q result %+v", kf.Err, kf.Result)
	}
	if kf.ServerCPU <= 0 || kf.PeakRSS <= 0 {
		t.Errorf("child measurements missing: cpu %s rss %d", kf.ServerCPU, kf.PeakRSS)
	}
	if tc.Err == "" || tc.Result != nil {
		t.Errorf("txncoord cell with a build error: err %q result %v", tc.Err, tc.Result)
	}
	if !strings.Contains(progress.String(), "round 1 kfake producers=2:") {
		t.Errorf("no progress line for the kfake cell:\n%s", progress.String())
	}
	if entries, _ := filepath.Glob(filepath.Join(work, "kfake-p2-r1")); len(entries) != 0 {
		t.Errorf("cell data dir not removed: %v", entries)
	}
	if md := rep.Markdown(); !strings.Contains(md, "| kfake | 2 | 1 |") {
		t.Errorf("markdown lacks the kfake row:\n%s", md)
	}
}

// kfakeAndUnstartable are the runner tests' targets: kfake re-executed
// from this test binary, and a txncoord whose build failed; w has the
// given window.
func kfakeAndUnstartable(t *testing.T, window time.Duration) ([]Target, Workload) {
	w := DefaultWorkload()
	w.Duration = window
	broken := TxncoordTarget("/nonexistent/txncoord", false, w.Topic, 6)
	broken.BuildErr = errors.New("go build ./cmd/txncoord: failed")
	return []Target{KfakeTarget(selfCommand(t), false, 3, w.Topic, 6), broken}, w
}

// TestPairedPlan: with Paired each target starts once per producer count
// and serves every round's window (one log, no per-round one), the rounds
// still alternate with the other targets', and a target that cannot start
// fails each of its windows visibly.
func TestPairedPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	targets, w := kfakeAndUnstartable(t, 400*time.Millisecond)
	work := t.TempDir()
	rep, err := RunPlan(ctx, Plan{
		Targets:   targets,
		Producers: []int{2},
		Rounds:    2,
		Workload:  w,
		WorkDir:   work,
		Paired:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range rep.Cells {
		order = append(order, fmt.Sprintf("%s/r%d", c.Target, c.Round+1))
		switch c.Target {
		case TargetKfake:
			if c.Err != "" || c.Result == nil || c.Result.Committed == 0 || c.ServerCPU <= 0 {
				t.Errorf("kfake window %d: err %q result %+v cpu %s", c.Round+1, c.Err, c.Result, c.ServerCPU)
			}
		default:
			if c.Err == "" || c.Result != nil {
				t.Errorf("unstartable target's window %d: err %q result %v", c.Round+1, c.Err, c.Result)
			}
		}
	}
	if want := "kfake/r1 txncoord/r1 txncoord/r2 kfake/r2"; strings.Join(order, " ") != want {
		t.Errorf("windows ran %v, want %s (alternating, the order rotated each round)", order, want)
	}
	if _, err := os.Stat(filepath.Join(work, "kfake-p2.log")); err != nil {
		t.Errorf("the paired kfake's one log: %v", err)
	}
	if logs, _ := filepath.Glob(filepath.Join(work, "kfake-p2-r*.log")); len(logs) != 0 {
		t.Errorf("a kfake started per round: %v", logs)
	}
	if md := rep.Markdown(); !strings.Contains(md, "- paired: each target started once per producer count") {
		t.Errorf("markdown does not say the run was paired:\n%s", md)
	}
}
