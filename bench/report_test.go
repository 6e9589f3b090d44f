package bench

import (
	"bytes"
	"context"
	"errors"
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
	fig := CoordFigures{FsyncsPerSec: 900, TransitionsPerFsync: 16, MarkersPerWTMRequest: 20, Sources: []string{"fsyncs/s: txncoord_txnlog_fsyncs_total"}}
	rep.Cells[1].Coord = &fig
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
		"| 64 producers: txn/s >= 15x kfake-sync | 16.8x | yes |",
		"| 64 producers: txn/s >= 0.75x kfake | 0.83x | yes |",
		"| 1 producer: commit p50 <= 0.8 ms | 0.500 ms | yes |",
		"| txncoord | 64 | 900 | 11000 | 16.0 | 20.0 |", // coordinator-side, next to the disk's rate
		"kfake exited before it was ready",              // a failed cell is visible
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

// TestPlanWithKfakeChild runs a tiny plan end to end through the child
// process path: kfake re-executed from this test binary, CPU and RSS read
// from /proc, a target that cannot start reported as a failed row.
func TestPlanWithKfakeChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := DefaultWorkload()
	w.Duration = 500 * time.Millisecond
	broken := TxncoordTarget("/nonexistent/txncoord", false, w.Topic, 6)
	broken.BuildErr = errors.New("go build ./cmd/txncoord: failed")
	var progress bytes.Buffer
	work := t.TempDir()
	rep, err := RunPlan(ctx, Plan{
		Targets:    []Target{KfakeTarget(selfCommand(t), false, 3, w.Topic, 6), broken},
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
