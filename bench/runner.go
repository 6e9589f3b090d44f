package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Plan is a whole benchmark: every target at every producer count, Rounds
// times, alternating targets within a round and rotating their order from
// round to round so that machine drift falls on all of them alike.
type Plan struct {
	Targets   []Target
	Producers []int // producer counts, e.g. 1, 16, 64
	Rounds    int
	Workload  Workload // Producers is overridden per cell
	WorkDir   string   // data dirs and child logs; the fsync probe runs here
	// FsyncProbe is how long to measure the disk's fdatasync rate first;
	// 0 skips it.
	FsyncProbe time.Duration
	KeepData   bool // keep each cell's data dir (default: removed after the cell)
	// ProfileDir, when set, gets a CPU profile of each window of a target
	// with an admin API (<cell>.pprof), and the cell's CPU is split by
	// component from it (profile.go). Needs a --duration window.
	ProfileDir string
	// Paired starts each target once per producer count and runs its
	// rounds as windows on that one server, the targets' windows
	// alternating while the others idle: each round's cells then share
	// the machine's state of a few seconds, not of a cell's start-up
	// apart. A target's windows reuse its transactional ids.
	Paired   bool
	Progress Progress
}

// Progress is told what the runner is doing; see NewProgress.
type Progress interface {
	CellStart(label string, index, total int, txns *atomic.Int64)
	CellDone(c Cell)
	Close()
}

// Cell is one target at one producer count in one round.
type Cell struct {
	Target    string
	Producers int
	Round     int
	Result    *Result
	ServerCPU time.Duration // child CPU (user+system) during the window only
	// HostSteal is the share of the machine's CPU time during the window
	// that the hypervisor gave to others (hostCPU; 0 where there is none
	// or /proc/stat has none): what makes one round slower than its
	// neighbours without any change of the target.
	HostSteal float64
	// HostIdle is the share of the machine's CPU time during the window in
	// which a CPU had nothing to run (idle or iowait): a target that leaves
	// the machine idle at a fixed number of producers is bound by waiting.
	HostIdle float64
	PeakRSS  int64         // child VmHWM at the end of the window, bytes
	Coord    *CoordFigures // txncoord only, from /metrics over the window
	Etcd     *EtcdFigures  // a target embedding etcd only, from its /metrics
	Metrics  Metrics       // raw txncoord_ (and etcd_) metric deltas over the window
	// CPUByComponent is ServerCPU split by the window's CPU profile
	// (Plan.ProfileDir); ProfileErr says why a cell has none.
	CPUByComponent map[string]time.Duration
	ProfileErr     string
	Err            string
}

// CPUPer1000 is server CPU per 1,000 committed transactions.
func (c Cell) CPUPer1000() time.Duration {
	if c.Result == nil || c.Result.Committed == 0 {
		return 0
	}
	return time.Duration(float64(c.ServerCPU) * 1000 / float64(c.Result.Committed))
}

// RunPlan runs the plan and returns every cell plus the medians.
func RunPlan(ctx context.Context, p Plan) (*Report, error) {
	if p.Rounds < 1 || len(p.Targets) == 0 || len(p.Producers) == 0 {
		return nil, fmt.Errorf("plan needs rounds, targets and producer counts")
	}
	if err := p.Workload.validate(); err != nil {
		return nil, err
	}
	if p.Progress == nil {
		p.Progress = NewProgress(io.Discard, false)
	}
	defer p.Progress.Close()
	if err := os.MkdirAll(p.WorkDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Workload: p.Workload, Rounds: p.Rounds, Producers: p.Producers, Paired: p.Paired}
	for _, t := range p.Targets {
		rep.Targets = append(rep.Targets, t.Name)
	}
	if p.FsyncProbe > 0 {
		probe, err := MeasureFsync(p.WorkDir, p.FsyncProbe)
		if err != nil {
			return nil, fmt.Errorf("fsync probe: %w", err)
		}
		rep.Fsync = &probe
	}

	total := p.Rounds * len(p.Producers) * len(p.Targets)
	index := 0
	run := func(cell func(index int) Cell) bool {
		index++
		c := cell(index)
		rep.Cells = append(rep.Cells, c)
		p.Progress.CellDone(c)
		return ctx.Err() == nil
	}
	if p.Paired {
		for _, n := range p.Producers {
			if !p.runPaired(ctx, rep, n, run, total) {
				break
			}
		}
	} else {
	rounds:
		for round := range p.Rounds {
			for _, n := range p.Producers {
				for k := range p.Targets {
					t := p.Targets[(k+round)%len(p.Targets)]
					if !run(func(index int) Cell { return p.runCell(ctx, t, n, round, index, total) }) {
						break rounds
					}
				}
			}
		}
	}
	rep.summarize()
	return rep, ctx.Err()
}

// runPaired runs every round of producer count n (Plan.Paired): each
// target started once, its windows alternating with the others'; false
// once ctx is done. A target that fails to stop has the error on its last
// window.
func (p Plan) runPaired(ctx context.Context, rep *Report, n int, run func(func(index int) Cell) bool, total int) bool {
	insts := make([]*Instance, len(p.Targets))
	errs := make([]error, len(p.Targets))
	for k, t := range p.Targets {
		name := fmt.Sprintf("%s-p%d", t.Name, n)
		dataDir := filepath.Join(p.WorkDir, name)
		if !p.KeepData {
			defer os.RemoveAll(dataDir)
		}
		insts[k], errs[k] = Start(ctx, t, dataDir, filepath.Join(p.WorkDir, name+".log"))
	}
	defer func() {
		for k, inst := range insts {
			if errs[k] != nil {
				continue
			}
			if err := inst.Stop(); err != nil {
				for i := len(rep.Cells) - 1; i >= 0; i-- {
					if c := &rep.Cells[i]; c.Target == p.Targets[k].Name && c.Producers == n {
						if c.Err == "" {
							c.Err = "stop: " + err.Error()
						}
						break
					}
				}
			}
		}
	}()
	for round := range p.Rounds {
		for k := range p.Targets {
			k := (k + round) % len(p.Targets)
			t := p.Targets[k]
			ok := run(func(index int) Cell {
				if errs[k] != nil {
					return Cell{Target: t.Name, Producers: n, Round: round, Err: errs[k].Error()}
				}
				return p.runWindow(ctx, insts[k], t, n, round, index, total, fmt.Sprintf("%s-p%d", t.Name, n))
			})
			if !ok {
				return false
			}
		}
	}
	return true
}

func (p Plan) runCell(ctx context.Context, t Target, producers, round, index, total int) (cell Cell) {
	name := fmt.Sprintf("%s-p%d-r%d", t.Name, producers, round+1)
	dataDir := filepath.Join(p.WorkDir, name)
	if !p.KeepData {
		defer os.RemoveAll(dataDir)
	}
	inst, err := Start(ctx, t, dataDir, filepath.Join(p.WorkDir, name+".log"))
	if err != nil {
		return Cell{Target: t.Name, Producers: producers, Round: round, Err: err.Error()}
	}
	defer func() {
		if err := inst.Stop(); err != nil && cell.Err == "" {
			cell.Err = "stop: " + err.Error()
		}
	}()
	return p.runWindow(ctx, inst, t, producers, round, index, total, name)
}

// runWindow runs one measured window of the workload against a started
// target; ids names the window's transactional ids.
func (p Plan) runWindow(ctx context.Context, inst *Instance, t Target, producers, round, index, total int, ids string) Cell {
	cell := Cell{Target: t.Name, Producers: producers, Round: round}
	name := fmt.Sprintf("%s-p%d-r%d", t.Name, producers, round+1)
	w := p.Workload
	w.Producers = producers
	w.TxnIDPrefix = fmt.Sprintf("%s-%s", w.TxnIDPrefix, ids)
	var txns atomic.Int64
	p.Progress.CellStart(fmt.Sprintf("round %d/%d %s producers=%d", round+1, p.Rounds, t.Name, producers), index, total, &txns)

	var cpuStart, cpuEnd time.Duration
	var hostStart, hostEnd hostCPU
	var before, after Metrics
	var sampleErr error
	sample := func(cpu *time.Duration, host *hostCPU, m *Metrics) {
		*host, _ = readHostCPU() // none: no steal reported
		c, err := inst.CPU()
		if err != nil {
			sampleErr = err
		}
		*cpu = c
		if inst.AdminURL != "" {
			// A failed scrape leaves the figures n/a; the run goes on.
			*m, _ = scrapeMetrics(ctx, inst.AdminURL+"/metrics")
		}
		if inst.EtcdMetricsURL != "" {
			if etcd, err := scrapeMetrics(ctx, inst.EtcdMetricsURL); err == nil {
				if *m == nil {
					*m = Metrics{}
				}
				keepEtcd(*m, etcd)
			}
		}
	}
	var prof *windowProfile
	if p.ProfileDir != "" && inst.AdminURL != "" {
		prof = &windowProfile{adminURL: inst.AdminURL, path: filepath.Join(p.ProfileDir, name+".pprof"), workload: w}
	}
	res, err := Run(ctx, inst.Bootstrap, w, Hooks{
		WindowStart: func() {
			sample(&cpuStart, &hostStart, &before)
			prof.start(ctx)
		},
		WindowEnd: func() { sample(&cpuEnd, &hostEnd, &after) },
		Progress:  &txns,
	})
	cell.CPUByComponent, cell.ProfileErr = prof.split(ctx, res, cpuEnd-cpuStart)
	cell.Result = res
	if err != nil {
		cell.Err = err.Error()
	} else if sampleErr != nil {
		cell.Err = "cpu: " + sampleErr.Error()
	}
	cell.ServerCPU = cpuEnd - cpuStart
	cell.HostSteal = hostEnd.stealShareSince(hostStart)
	cell.HostIdle = hostEnd.idleShareSince(hostStart)
	if rss, err := inst.PeakRSS(); err == nil {
		cell.PeakRSS = rss
	}
	if after != nil && res != nil {
		d := after.delta(before)
		figures := coordFigures(d, res.Elapsed, res.Committed)
		cell.Coord = &figures
		cell.Etcd = etcdFigures(d, res.Elapsed, res.Committed)
		cell.Metrics = d
	}
	return cell
}
