package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
)

// Main is the txncoord-bench command: `txncoord-bench [flags]` runs a plan,
// `txncoord-bench serve-kfake [flags]` is the kfake child. self is how to
// re-execute this binary (up to, excluding, its arguments). It returns the
// process exit code: 0 when the plan ran (whatever the figures), 1 when it
// could not run, 2 on bad flags.
func Main(ctx context.Context, args []string, self Command, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve-kfake" {
		return serveKfakeMain(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scale" {
		return scaleMain(ctx, args[1:], self, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve-etcd" {
		return serveEtcdMain(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "drive" {
		return driveMain(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("txncoord-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := DefaultWorkload()
	producers := fs.String("producers", "1,16,64", "producer counts, comma-separated")
	duration := fs.Duration("duration", def.Duration, "measured window per cell")
	count := fs.Int64("count", 0, "transactions per cell instead of a duration (0 = use --duration)")
	rounds := fs.Int("rounds", minGoalRounds, "rounds; targets alternate within a round and rotate between rounds (the goals are medians of at least 3)")
	targets := fs.String("targets", "txncoord,kfake,kfake-sync", "targets: txncoord, txncoord-nosync, "+
		"txncoord-etcd3 (up --coordinators 3: three coordinators sharing the transactional ids through the embedded "+
		"one-member etcd, fsync on; its /metrics is scraped too), kfake, kfake-sync")
	out := fs.String("out", "results", "results folder; each run writes <out>/<timestamp>/")
	records := fs.Int("records", def.RecordsPerTxn, "K: records to each partition per transaction")
	partitions := fs.Int("partitions", def.Partitions, "P: partitions per transaction, on different leaders")
	abortRatio := fs.Float64("abort-ratio", 0, "share of transactions aborted on purpose (0..1)")
	valueBytes := fs.Int("value-bytes", def.ValueBytes, "record value size")
	bin := fs.String("txncoord-bin", "", "txncoord binary (default: go build ./cmd/txncoord into the run folder)")
	workDir := fs.String("work-dir", "", "data dirs and child logs (default: <run folder>/work); the fsync probe runs here")
	fsyncProbe := fs.Duration("fsync-probe", 2*time.Second, "how long to measure this disk's fdatasync rate first (0 skips)")
	keepData := fs.Bool("keep-data", false, "keep each cell's data dir")
	paired := fs.Bool("paired", false, "start each target once per producer count and run its rounds as windows on that "+
		"server, alternating with the other targets' (idle meanwhile; a target's windows reuse its transactional ids): "+
		"a round's cells then run seconds apart on one machine state (see the report's ratios within each round)")
	cpuProfile := fs.Bool("cpu-profile", false, "take a CPU profile of every txncoord window (admin /debug/pprof; "+
		"kept in <run folder>/profiles) and split the server's CPU by component (etcd server and client, coordinators, "+
		"leaders, ...; needs a --duration window and the go tool on PATH)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: txncoord-bench [flags]\n       txncoord-bench serve-kfake [--brokers 3] [--data-dir D --sync]\n"+
			"       txncoord-bench scale [--ids N --groups G --window D --after-kill D ...] (many ids and groups, one coordinator killed; scale --help)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments %q\n", fs.Args())
		return 2
	}
	counts, err := parseInts(*producers)
	if err != nil {
		fmt.Fprintf(stderr, "--producers: %v\n", err)
		return 2
	}
	w := def
	w.Duration, w.Count, w.RecordsPerTxn, w.Partitions, w.AbortRatio, w.ValueBytes =
		*duration, *count, *records, *partitions, *abortRatio, *valueBytes
	if err := w.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	runDir := filepath.Join(*out, time.Now().Format("20060102-150405"))
	if *workDir == "" {
		*workDir = filepath.Join(runDir, "work")
	}
	if err := os.MkdirAll(*workDir, 0o755); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Three leaders each lead P partitions, so producers spread over
	// 3·P partitions and every transaction still spans P leaders.
	topicPartitions := 3 * w.Partitions
	var plan []Target
	var built *string // the txncoord binary is built once for both txncoord targets
	var buildErr error
	for _, name := range strings.Split(*targets, ",") {
		switch name = strings.TrimSpace(name); name {
		case TargetKfake, TargetKfakeSync:
			plan = append(plan, KfakeTarget(self, name == TargetKfakeSync, 3, w.Topic, topicPartitions))
		case TargetTxncoord, TargetTxncoordNoSync, TargetTxncoordEtcd3:
			if built == nil {
				path, err := txncoordBinary(ctx, *bin, *workDir)
				built, buildErr = &path, err
			}
			t := TxncoordTarget(*built, name == TargetTxncoordNoSync, w.Topic, topicPartitions)
			if name == TargetTxncoordEtcd3 {
				t = TxncoordEtcdTarget(*built, 3, w.Topic, topicPartitions)
			}
			t.BuildErr = buildErr
			if err := buildErr; err != nil {
				fmt.Fprintf(stderr, "%s: %v (its cells will report the error)\n", name, err)
			}
			plan = append(plan, t)
		default:
			fmt.Fprintf(stderr, "--targets: unknown target %q\n", name)
			return 2
		}
	}

	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	profileDir := ""
	if *cpuProfile {
		if w.Count > 0 {
			fmt.Fprintln(stderr, "--cpu-profile needs a --duration window, not --count")
			return 2
		}
		profileDir = filepath.Join(runDir, "profiles")
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	rep, err := RunPlan(ctx, Plan{Targets: plan, Producers: counts, Rounds: *rounds, Workload: w,
		WorkDir: *workDir, FsyncProbe: *fsyncProbe, KeepData: *keepData, ProfileDir: profileDir, Paired: *paired,
		Progress: NewProgress(stderr, tty)})
	if rep == nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	rep.Command = commandLine("txncoord-bench", args)
	fmt.Fprint(stdout, rep.Table())
	if werr := rep.Write(runDir); werr != nil {
		fmt.Fprintln(stderr, "writing results:", werr)
		return 1
	}
	fmt.Fprintf(stdout, "\nwritten: %s\n", filepath.Join(runDir, "report.md"))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// txncoordBinary returns bin, or builds ./cmd/txncoord of the module in the
// current directory into dir.
func txncoordBinary(ctx context.Context, bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("not inside the txncoord module: pass --txncoord-bin")
	}
	path, err := filepath.Abs(filepath.Join(dir, "txncoord"))
	if err != nil {
		return "", err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", path, "./cmd/txncoord")
	build.Dir = root
	if outp, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/txncoord: %v\n%s", err, outp)
	}
	return path, nil
}

// commandLine is name and args as a shell would take them back.
func commandLine(name string, args []string) string {
	words := []string{name}
	for _, a := range args {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=+.,:/@%", r))
		}) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func parseInts(s string) ([]int, error) {
	var xs []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		xs = append(xs, n)
	}
	return xs, nil
}

func serveKfakeMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o KfakeOptions
	fs.IntVar(&o.Brokers, "brokers", 3, "brokers")
	fs.StringVar(&o.Topic, "topic", "bench", "topic to create")
	fs.IntVar(&o.Partitions, "partitions", 6, "partitions of the topic")
	fs.StringVar(&o.DataDir, "data-dir", "", "persist to this directory (kfake.DataDir)")
	fs.BoolVar(&o.Sync, "sync", false, "fsync every batch (kfake.SyncWrites; needs --data-dir)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := ServeKfake(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "serve-kfake:", err)
		return 1
	}
	return 0
}

// driveMain runs the workload against an already running cluster (for
// profiling a server started by hand): `txncoord-bench drive --bootstrap
// 127.0.0.1:9092 --producers 64 --duration 20s`. It prints one line of
// figures; the server's CPU and metrics are the caller's to read.
func driveMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	w := DefaultWorkload()
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "seed brokers, comma-separated")
	fs.IntVar(&w.Producers, "producers", 1, "producers")
	fs.DurationVar(&w.Duration, "duration", w.Duration, "measured window")
	fs.StringVar(&w.TxnIDPrefix, "txn-prefix", "drive", "transactional id prefix")
	fs.IntVar(&w.Partitions, "partitions", w.Partitions, "P: partitions per transaction")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	res, err := Run(ctx, strings.Split(*bootstrap, ","), w, Hooks{})
	if res != nil {
		fmt.Fprintf(stdout, "producers=%d %.0f txn/s, commit p50 %.3f ms p99 %.3f ms, EndTxn p50 %.3f ms, failed %d\n",
			w.Producers, res.TxnPerSec(), float64(res.Commit.ValueAtQuantile(50))/1000,
			float64(res.Commit.ValueAtQuantile(99))/1000, float64(res.EndTxn.ValueAtQuantile(50))/1000, res.Failed)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
