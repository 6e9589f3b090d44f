package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// scaleMain is `txncoord-bench scale`: one `txncoord up --coordinators C`
// child, many transactional ids and consumer groups on it, a steady window,
// then (unless --after-kill 0) one coordinator killed through /v1/faults.
func scaleMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := ScaleConfig{Topic: "scale", GroupTopic: "scale-groups", Prefix: "scale"}
	fs.IntVar(&cfg.IDs, "ids", 1000, "transactional ids (one kgo client each)")
	fs.IntVar(&cfg.Groups, "groups", 100, "consumer groups of 2 members (one kgo client each)")
	fs.DurationVar(&cfg.Interval, "interval", time.Second, "each id's transaction and each member's offset commit, once per interval")
	fs.DurationVar(&cfg.Ramp, "ramp", 2*time.Minute, "longest wait for every client to be served once before the window")
	fs.DurationVar(&cfg.Window, "window", 30*time.Second, "steady-state window")
	fs.DurationVar(&cfg.AfterKill, "after-kill", 30*time.Second, "watch this long after killing --kill-node (0: no kill)")
	fs.IntVar(&cfg.KillNode, "kill-node", 1, "node killed through /v1/faults (0..coordinators-1 are the coordinators)")
	fs.IntVar(&cfg.StartRate, "start-rate", 300, "clients started per second in the ramp (InitProducerId and JoinGroup storms otherwise time out)")
	fs.IntVar(&cfg.ValueBytes, "value-bytes", 100, "record value size")
	coordinators := fs.Int("coordinators", 3, "up --coordinators")
	partitions := fs.Int("partitions", 6, "partitions of the producers' topic (over 3 leaders)")
	bin := fs.String("txncoord-bin", "", "txncoord binary (default: go build ./cmd/txncoord into the run folder)")
	out := fs.String("out", "results", "results folder; the run writes <out>/scale-<timestamp>/")
	cpuProfile := fs.Bool("cpu-profile", true, "profile the window through the admin API and split the server's CPU by component")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.IDs < 0 || cfg.Groups < 0 || cfg.IDs+cfg.Groups == 0 || cfg.Interval <= 0 || cfg.Window <= 0 || *coordinators < 2 {
		fmt.Fprintln(stderr, "scale: need --ids or --groups, a positive --interval and --window, --coordinators >= 2")
		return 2
	}
	runDir := filepath.Join(*out, "scale-"+time.Now().Format("20060102-150405"))
	workDir := filepath.Join(runDir, "work")
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	path, err := txncoordBinary(ctx, *bin, workDir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	profileDir := ""
	if *cpuProfile {
		profileDir = runDir
	}
	rep := &ScaleReport{Command: commandLine("txncoord-bench scale", args), Started: time.Now(),
		Coordinators: *coordinators, LoadBefore: loadAvg()}
	target := TxncoordEtcdTarget(path, *coordinators, cfg.Topic, *partitions)
	upArgv := target.argv
	target.argv = func(dataDir string) (Command, error) {
		// Every client of the run connects from 127.0.0.1: Kafka's
		// per-address limit (1,000 by default) would refuse most of them.
		c, err := upArgv(dataDir)
		c.Args = append(c.Args, "--max-connections-per-ip", "-1")
		return c, err
	}
	inst, err := Start(ctx, target,
		filepath.Join(workDir, "data"), filepath.Join(runDir, "txncoord.log"))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "scale: txncoord pid %d ready; %d ids, %d groups\n", inst.Pid, cfg.IDs, cfg.Groups)
	res, runErr := RunScale(ctx, inst, cfg, profileDir, func() { rep.LoadAfter = loadAvg() })
	if err := inst.Stop(); err != nil {
		fmt.Fprintln(stderr, "stop:", err)
	}
	if res == nil {
		fmt.Fprintln(stderr, runErr)
		return 1
	}
	rep.Result = res
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if err := os.WriteFile(filepath.Join(runDir, "report.md"), []byte(md), 0o644); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwritten: %s\n", filepath.Join(runDir, "report.md"))
	if runErr != nil {
		fmt.Fprintln(stderr, runErr)
		return 1
	}
	return 0
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
