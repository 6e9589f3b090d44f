package bench

import (
	"math"
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	ss := make([]served, 3)
	ss[0].lastBeforeKill.Store(int64(10 * time.Second))
	ss[0].afterKill.Store(int64(21 * time.Second)) // 11 s across the kill
	ss[1].lastBeforeKill.Store(int64(19 * time.Second))
	ss[1].afterKill.Store(int64(22 * time.Second))
	ss[2].lastBeforeKill.Store(int64(1 * time.Second)) // never again: no gap to count
	if got := longestGap(ss); got != 11*time.Second {
		t.Fatalf("longest gap %v, want 11s", got)
	}
}

func TestRateRecovered(t *testing.T) {
	ticks := []int64{100, 100, 100, 20, 0, 95, 40, 92, 91, 99, 100}
	// Kill at tick 2: ticks 3..6 are low or broken runs; 7,8,9 is the
	// first run of three at >= 90.
	if got := rateRecovered(ticks, 2, 100, 0.9, 3); got != 5*time.Second {
		t.Fatalf("recovered after %v, want 5s", got)
	}
	if got := rateRecovered(ticks[:9], 2, 100, 0.9, 3); got != -1 {
		t.Fatalf("recovered after %v with no full run, want -1", got)
	}
}

func TestServedAgain(t *testing.T) {
	kill := time.Unix(100, 0)
	ss := make([]served, 4) // two groups of two members
	ss[0].afterKill.Store(kill.Add(500 * time.Millisecond).UnixNano())
	ss[1].afterKill.Store(kill.Add(7 * time.Second).UnixNano())
	ss[2].afterKill.Store(kill.Add(4 * time.Second).UnixNano())
	// ss[3] never served again.
	worst, left, affected := servedAgain(ss, 1, kill, 2*time.Second)
	if worst != 7*time.Second || left != 1 || affected != 2 {
		t.Fatalf("members: worst %v left %d affected %d, want 7s 1 2", worst, left, affected)
	}
	worst, left, affected = servedAgain(ss, GroupMembers, kill, 2*time.Second)
	// Group 0 is served at its first member's 0.5 s, group 1 at 4 s.
	if worst != 4*time.Second || left != 0 || affected != 1 {
		t.Fatalf("groups: worst %v left %d affected %d, want 4s 0 1", worst, left, affected)
	}
}

func TestScaleCostsAndModel(t *testing.T) {
	r := &ScaleResult{Txns: 1000, Elapsed: 10 * time.Second, ServerCPU: 2 * time.Second, EtcdProposals: 500,
		CPUBy: map[string]time.Duration{compEtcdServer: 500 * time.Millisecond, compLeader: 300 * time.Millisecond,
			compLog: 200 * time.Millisecond}}
	c := r.costs()
	if c.Op != "committed txn" || c.PerSec != 100 || c.ServerMs != 2 || c.EtcdMs != 0.5 || c.LeaderMs != 0.5 ||
		c.CoordMs != 1 || c.ProposalsPer != 0.5 {
		t.Fatalf("costs %+v", c)
	}
	m := modelAt(c, 10000)
	if m.CoordCores != 10 || m.EtcdCores != 5 || m.LeaderCores != 5 || m.ProposalsPerSec != 5000 {
		t.Fatalf("model %+v", m)
	}
	rates := modelRates(c.PerSec, ScaleConfig{IDs: 100, Interval: time.Second})
	if len(rates) != 2 || rates[1] != scaleTargetIDs {
		t.Fatalf("rates %v", rates)
	}
	if got := (&ScaleResult{}).costs(); !math.IsNaN(got.CoordMs) || got.PerSec != 0 {
		t.Fatalf("empty window costs %+v", got)
	}
}

func TestTimelineBounded(t *testing.T) {
	var tl timeline
	start := time.Unix(1000, 0)
	tl.add(0, start)                                  // before the window: not counted
	tl.add(start.UnixNano(), start.Add(-time.Second)) // before the start
	tl.add(start.UnixNano(), start.Add(1500*time.Millisecond))
	tl.add(start.UnixNano(), start.Add(maxTicks*scaleTick)) // past the bound
	if len(tl.ticks) != 2 || tl.ticks[0] != 0 || tl.ticks[1] != 1 {
		t.Fatalf("ticks %v, want [0 1]", tl.ticks)
	}
}
