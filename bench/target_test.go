package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flagValue is the value following name in args ("" when absent).
func flagValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestTxncoordTargetsCommand checks the `txncoord up` command lines: one
// coordinator and three leaders on four consecutive ports, no etcd; three
// coordinators with the embedded etcd's metrics on the port after the last
// leader's (its client port), which `up` puts there.
func TestTxncoordTargetsCommand(t *testing.T) {
	for _, c := range []struct {
		target       Target
		coordinators int
	}{
		{TxncoordTarget("bin/txncoord", false, "bench", 6), 1},
		{TxncoordEtcdTarget("bin/txncoord", 3, "bench", 6), 3},
	} {
		cmd, err := c.target.argv("/data")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := strings.Cut(flagValue(cmd.Args, "--listen"), ":")
		base, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("%s: --listen %q", c.target.Name, flagValue(cmd.Args, "--listen"))
		}
		if got := flagValue(cmd.Args, "--leaders"); got != "4.2,4.2,4.2" {
			t.Errorf("%s: --leaders %q", c.target.Name, got)
		}
		if c.coordinators == 1 {
			if c.target.Name != TargetTxncoord || slices.Contains(cmd.Args, "--coordinators") || cmd.EtcdMetrics != "" {
				t.Errorf("single coordinator: name %s, args %q, etcd metrics %q", c.target.Name, cmd.Args, cmd.EtcdMetrics)
			}
			continue
		}
		if c.target.Name != TargetTxncoordEtcd3 || flagValue(cmd.Args, "--coordinators") != "3" {
			t.Errorf("etcd target: name %s, args %q", c.target.Name, cmd.Args)
		}
		if want := "http://127.0.0.1:" + strconv.Itoa(base+6) + "/metrics"; cmd.EtcdMetrics != want {
			t.Errorf("etcd metrics %q, want %q (3 coordinators + 3 leaders from %d)", cmd.EtcdMetrics, want, base)
		}
	}
}

// TestEtcd3TargetMeasured runs one short cell of txncoord-etcd3 from a
// freshly built binary, profiled: the embedded etcd's counters are scraped
// (its proposals are the coordinators' writes), and the window's CPU is
// split with some of it in the etcd server and some in the etcd client.
func TestEtcd3TargetMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds txncoord and runs it with an embedded etcd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := t.TempDir()
	bin, err := txncoordBinary(ctx, "", work)
	if err != nil {
		t.Fatal(err)
	}
	w := DefaultWorkload()
	w.Duration = 2 * time.Second
	profiles := filepath.Join(work, "profiles")
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	rep, err := RunPlan(ctx, Plan{
		Targets:    []Target{TxncoordEtcdTarget(bin, 3, w.Topic, 6)},
		Producers:  []int{4},
		Rounds:     1,
		Workload:   w,
		WorkDir:    work,
		ProfileDir: profiles,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cells[0]
	if c.Err != "" || c.ProfileErr != "" || c.Result == nil || c.Result.Committed == 0 {
		t.Fatalf("cell: err %q, profile %q, result %+v", c.Err, c.ProfileErr, c.Result)
	}
	e := c.Etcd
	if e == nil || !(e.ProposalsPerTxn > 0) || !(e.PutsPerTxn > 0) || !(e.WALFsyncsPerSec > 0) {
		t.Fatalf("etcd figures %+v: every committed transaction writes to etcd", e)
	}
	// The embedded etcd member always takes a large share; the etcd
	// client's is a few of the profile's 10 ms samples in this short
	// window and can be none (testdata/scaleout.txt checks how client
	// stacks are split).
	if c.CPUByComponent[compEtcdServer] <= 0 {
		t.Errorf("CPU by component %v: no etcd server share", c.CPUByComponent)
	}
	t.Logf("CPU by component: %v", c.CPUByComponent)
	if _, err := os.Stat(filepath.Join(profiles, "txncoord-etcd3-p4-r1.pprof")); err != nil {
		t.Error(err)
	}
	md := rep.Markdown()
	for _, want := range []string{"## etcd (the embedded member's /metrics over the window)", "| txncoord-etcd3 | 4 |",
		"## Server CPU by component"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
