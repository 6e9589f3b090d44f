package bench

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
)

// ScaleReport is a scale run with what it ran on.
type ScaleReport struct {
	Command      string
	Started      time.Time
	Coordinators int
	Layout       string // up or procs
	LoadBefore   string // /proc/loadavg when the run started
	LoadAfter    string // ... when the window closed
	Result       *ScaleResult
}

// opCosts are the server's costs per operation of a window: a committed
// transaction, or a successful offset commit of one member, or (a window
// with both) one of either.
type opCosts struct {
	Op           string  // what one operation is
	PerSec       float64 // operations per second
	CoordMs      float64 // CPU ms per op outside etcd's server and the leaders (coordinators, etcd client, wire, GC...)
	EtcdMs       float64 // CPU ms per op in etcd's server (NaN without a profile)
	LeaderMs     float64 // CPU ms per op in the leaders and their log
	ServerMs     float64 // the process's CPU ms per op, all of it
	ProposalsPer float64 // etcd proposals per op
}

// costs splits the window's server CPU per operation by the profile's
// components.
func (r *ScaleResult) costs() opCosts {
	c := opCosts{Op: "txn + offset commit", EtcdMs: math.NaN(), CoordMs: math.NaN(), LeaderMs: math.NaN()}
	ops := r.Txns + r.Commits
	switch {
	case r.Commits == 0:
		c.Op = "committed txn"
	case r.Txns == 0:
		c.Op = "offset commit"
	}
	if ops == 0 || r.Elapsed <= 0 {
		return c
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(ops) }
	c.PerSec = float64(ops) / r.Elapsed.Seconds()
	c.ServerMs = per(r.ServerCPU)
	c.ProposalsPer = r.EtcdProposals / float64(ops)
	if byRole := r.roleCPU(); byRole != nil {
		// Processes of their own: each role's CPU from /proc; etcd's is
		// its busiest member's (the Raft leader's), as the model needs.
		c.CoordMs, c.LeaderMs, c.EtcdMs = per(byRole["coordinator"]), per(byRole["leader"]), per(byRole["etcd-busiest"])
	} else if r.CPUBy != nil {
		c.EtcdMs = per(r.CPUBy[compEtcdServer])
		c.LeaderMs = per(r.CPUBy[compLeader] + r.CPUBy[compLog])
		c.CoordMs = c.ServerMs - c.EtcdMs - c.LeaderMs
	}
	return c
}

// roleCPU sums the window's CPU of each role's processes, and keeps the
// busiest etcd member's as "etcd-busiest"; nil for `up`'s one process.
func (r *ScaleResult) roleCPU() map[string]time.Duration {
	if len(r.Procs) < 2 {
		return nil
	}
	out := map[string]time.Duration{}
	for _, p := range r.Procs {
		out[p.Role] += p.CPU
		if p.Role == "etcd" {
			out["etcd-busiest"] = max(out["etcd-busiest"], p.CPU)
		}
	}
	return out
}

// machineModel is the separate-machines model of one op kind at a target
// rate: the cores each role needs, from the measured per-op costs.
type machineModel struct {
	Rate            float64 // ops per second asked for
	CoordCores      float64 // summed over the coordinators
	EtcdCores       float64 // on the etcd leader (each member applies every entry; the leader also replicates)
	LeaderCores     float64
	ProposalsPerSec float64
}

func modelAt(c opCosts, rate float64) machineModel {
	return machineModel{Rate: rate, CoordCores: rate * c.CoordMs / 1000, EtcdCores: rate * c.EtcdMs / 1000,
		LeaderCores: rate * c.LeaderMs / 1000, ProposalsPerSec: rate * c.ProposalsPer}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func usMs(us int64) string { return fmt.Sprintf("%.1f ms", float64(us)/1000) }

// Markdown is the run's report.
func (s *ScaleReport) Markdown() string {
	r := s.Result
	cfg := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "# txncoord scale run, %s\n\n", s.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "```\n%s\n```\n\n", s.Command)
	target := fmt.Sprintf("`txncoord up --coordinators %d` (embedded one-member etcd, fsync on; 3 Kafka 4.2 leaders; "+
		"one process)", s.Coordinators)
	if s.Layout == "procs" {
		target = "a three-member etcd (each member a process of its own: this binary's serve-etcd, etcd's defaults, " +
			"fsync on), 3 `txncoord coordinator` and 3 `txncoord leader` (Kafka 4.2) processes on one cluster file"
	}
	driver := "one kgo client each"
	if cfg.Driver == DriverRaw {
		driver = fmt.Sprintf("%d kgo clients for all of them, the ids spread over them by __transaction_state partition, "+
			"sending each id's InitProducerId, Produce v12+ and EndTxn v5 themselves, plus one client for FindCoordinator "+
			"(up to 1,000 ids per request)", max(1, cfg.RawClients))
	}
	fmt.Fprintf(&b, "Target: %s. Clients: this process, %d transactional ids (%s; one transaction of one "+
		"%d-byte record to each of 2 partitions on different leaders per %v) and %d groups x %d members (one kgo "+
		"client each, one offset commit per %v for its assigned partition of `%s`). %d cores; load average at the "+
		"start %s, at the window's end %s.\n\n",
		target, cfg.IDs, driver, cfg.ValueBytes, cfg.Interval, cfg.Groups, GroupMembers, cfg.Interval,
		cfg.GroupTopic, runtime.NumCPU(), s.LoadBefore, s.LoadAfter)

	fmt.Fprintf(&b, "## Steady state (%.1f s window)\n\n", r.Elapsed.Seconds())
	fmt.Fprintf(&b, "Ramp: %d/%d ids and %d/%d members served once after %.1f s (bounded at %v).\n\n",
		r.ReadyIDs, cfg.IDs, r.ReadyMembers, cfg.Groups*GroupMembers, r.RampTook.Seconds(), cfg.Ramp)
	asked := float64(cfg.IDs) / cfg.Interval.Seconds()
	askedC := float64(cfg.Groups*GroupMembers) / cfg.Interval.Seconds()
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	row("txn/s committed (asked)", fmt.Sprintf("%.0f (%.0f)", float64(r.Txns)/r.Elapsed.Seconds(), asked))
	row("txn failed in window", fmt.Sprint(r.TxnFailed))
	if r.TxnLatency != nil && r.TxnLatency.TotalCount() > 0 {
		row("txn commit p50 / p99 / max (Begin → EndTransaction)", fmt.Sprintf("%s / %s / %s",
			usMs(r.TxnLatency.ValueAtQuantile(50)), usMs(r.TxnLatency.ValueAtQuantile(99)), usMs(r.TxnLatency.Max())))
	}
	row("offset commits/s (asked)", fmt.Sprintf("%.0f (%.0f)", float64(r.Commits)/r.Elapsed.Seconds(), askedC))
	row("offset commits failed in window", fmt.Sprint(r.CommitFailed))
	if r.OffsetLatency != nil && r.OffsetLatency.TotalCount() > 0 {
		row("offset commit p50 / p99 / max", fmt.Sprintf("%s / %s / %s",
			usMs(r.OffsetLatency.ValueAtQuantile(50)), usMs(r.OffsetLatency.ValueAtQuantile(99)), usMs(r.OffsetLatency.Max())))
	}
	if r.Etcd != nil {
		row("etcd proposals/s", fmt.Sprintf("%.0f", r.Etcd.ProposalsPerSec))
		row("etcd proposals per committed txn (all proposals / txns)", orNA(r.Etcd.ProposalsPerTxn, "%.3f"))
		row("etcd WAL fsyncs/s, mean ms, busy", fmt.Sprintf("%.0f, %s, %s", r.Etcd.WALFsyncsPerSec,
			ms(r.Etcd.WALFsyncMean), orNA(100*r.Etcd.DiskBusy, "%.0f%%")))
	}
	row("server CPU (cores busy)", fmt.Sprintf("%.2f", r.ServerCPU.Seconds()/r.Elapsed.Seconds()))
	row("client CPU, this process (cores busy)", fmt.Sprintf("%.2f", r.DriverCPU.Seconds()/r.Elapsed.Seconds()))
	row("server RSS now / peak (every server process)", fmt.Sprintf("%s / %s", mib(r.ServerRSS), mib(r.ServerPeakRSS)))
	row("client RSS", mib(r.DriverRSS))
	row("client sockets (connections to the cluster)", fmt.Sprint(r.DriverSockets))
	if len(r.Errors) > 0 {
		row("first errors", "`"+strings.Join(r.Errors, "`; `")+"`")
	}

	if len(r.Procs) > 1 {
		fmt.Fprintf(&b, "\n## Server processes (over the window; RSS at its end)\n\n")
		fmt.Fprintf(&b, "| process | cores busy | CPU ms per op | RSS | peak RSS |\n|---|---|---|---|---|\n")
		ops := float64(max(1, r.Txns+r.Commits))
		for _, p := range r.Procs {
			fmt.Fprintf(&b, "| %s | %.2f | %.3f | %s | %s |\n", p.Name, p.CPU.Seconds()/r.Elapsed.Seconds(),
				float64(p.CPU)/float64(time.Millisecond)/ops, mib(p.RSS), mib(p.PeakRSS))
		}
	}

	c := r.costs()
	fmt.Fprintf(&b, "\n## Cost per %s\n\n", c.Op)
	fmt.Fprintf(&b, "| server CPU ms | coordinator side ms | etcd server ms | leaders ms | etcd proposals |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %.3f | %s | %s | %s | %.3f |\n\n", c.ServerMs, orNA(c.CoordMs, "%.3f"), orNA(c.EtcdMs, "%.3f"),
		orNA(c.LeaderMs, "%.3f"), c.ProposalsPer)
	if len(r.Procs) > 1 {
		fmt.Fprintf(&b, "Each role's CPU from /proc (processes of their own): coordinator side = the 3 coordinator "+
			"processes (with their etcd client and Kafka wire), etcd = its busiest member, leaders = the 3 leader processes.\n\n")
	} else if r.CPUBy != nil {
		fmt.Fprintf(&b, "Split of the window's CPU by its profile (ms per op):")
		for _, comp := range cpuComponents {
			fmt.Fprintf(&b, " %s %.3f;", comp, float64(r.CPUBy[comp])/float64(time.Millisecond)/float64(max(1, r.Txns+r.Commits)))
		}
		fmt.Fprintf(&b, " coordinator side = all − etcd server − leaders − log+bbolt.\n\n")
	} else if r.ProfileErr != "" {
		fmt.Fprintf(&b, "No CPU split: %s\n\n", r.ProfileErr)
	}

	if !math.IsNaN(c.CoordMs) && c.PerSec > 0 {
		fmt.Fprintf(&b, "### Model: coordinators, leaders and etcd on separate machines (computed, not measured)\n\n")
		etcdNote := "the etcd leader's CPU is the one-member etcd's here plus replication to two followers (not in " +
			"this figure: a three-member etcd adds the leader's sends and each follower's apply)"
		if len(r.Procs) > 1 {
			etcdNote = "the etcd leader's CPU is the busiest member's of this three-member etcd"
		}
		fmt.Fprintf(&b, "Cores each role needs for a rate of %s, from the per-op costs above: rate × ms per op / 1000. "+
			"Assumes the per-op CPU stays what this run measured (no batching gain or loss at another rate), the "+
			"coordinator side's ids and groups spread evenly over the coordinators (each needs its share), %s, "+
			"and the network adds latency, not CPU. Proposals/s is what etcd's Raft log must commit (each a WAL "+
			"write; fsyncs batch them).\n\n", c.Op, etcdNote)
		fmt.Fprintf(&b, "| rate (%s/s) | coordinator cores (all) | etcd leader cores | leader cores | etcd proposals/s |\n|---|---|---|---|---|\n", c.Op)
		for _, rate := range modelRates(c.PerSec, cfg) {
			m := modelAt(c, rate)
			fmt.Fprintf(&b, "| %.0f | %.2f | %.2f | %.2f | %.0f |\n", m.Rate, m.CoordCores, m.EtcdCores, m.LeaderCores, m.ProposalsPerSec)
		}
		b.WriteString("\n")
	}

	if k := r.Kill; k != nil {
		fmt.Fprintf(&b, "## Coordinator %d killed (%s) %.1f s after the window opened\n\n", k.Node, r.KillHow, k.At.Seconds())
		if s.Layout == "procs" {
			fmt.Fprintf(&b, "The process got SIGKILL: its partitions move when its etcd lease lapses (the cluster file's "+
				"TTL, 5 s by default), which is in these times.\n\n")
		} else {
			fmt.Fprintf(&b, "A kill fault stops the node in the process; its etcd-mode partitions move to the others at once, as at "+
				"a shutdown. A SIGKILLed coordinator process is noticed only when its etcd lease lapses, which adds up to "+
				"the lease TTL to these times.\n\n")
		}
		fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
		left := func(n int) string {
			if n == 0 {
				return ""
			}
			return fmt.Sprintf(" (%d never served again within %v)", n, cfg.AfterKill)
		}
		recovered := func(d time.Duration) string {
			if d < 0 {
				return "never, within the watch"
			}
			return fmt.Sprintf("%.0f s", d.Seconds())
		}
		if cfg.IDs > 0 {
			row("ids with no commit for > 2 intervals after the kill", fmt.Sprint(k.Affected))
			row("kill → every id committed again", fmt.Sprintf("%.1f s%s", k.IDsServed.Seconds(), left(k.IDsLeft)))
			row(fmt.Sprintf("longest time an id went without a commit across the kill (one per %v when served)", cfg.Interval),
				fmt.Sprintf("%.1f s", k.IDGap.Seconds()))
			row("kill → txn rate back at ≥ 90% of the window's for 3 s", recovered(k.RateRecovered))
		}
		if cfg.Groups > 0 {
			row("groups with no commit for > 2 intervals after the kill", fmt.Sprint(k.AffectedGroups))
			row("kill → every group committed offsets again", fmt.Sprintf("%.1f s%s", k.GroupsServed.Seconds(), left(k.GroupsLeft)))
			row("kill → every member committed offsets again", fmt.Sprintf("%.1f s%s", k.MembersServed.Seconds(), left(k.MembersLeft)))
			row("kill → offset commit rate back at ≥ 90% of the window's for 3 s", recovered(k.CommitRateRecovered))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Timeline, per second from the window's start: txns `%v`; offset commits `%v`.\n", r.TxnTimeline, r.CommitTimeline)
	return b.String()
}

// modelRates are the rates the model is shown at: the measured one and
// the target (10,000 ids and 1,000 groups of 2 members per
// interval, as far as this run's op kind has them).
func modelRates(measured float64, cfg ScaleConfig) []float64 {
	per := cfg.Interval.Seconds()
	target := 0.0
	if cfg.IDs > 0 {
		target += scaleTargetIDs / per
	}
	if cfg.Groups > 0 {
		target += scaleTargetGroups * GroupMembers / per
	}
	if target <= measured {
		return []float64{measured}
	}
	return []float64{measured, target}
}

// The scale targets.
const (
	scaleTargetIDs    = 10000
	scaleTargetGroups = 1000
)
