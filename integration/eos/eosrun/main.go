// Command eosrun runs one exactly-once chain (package eos) against a
// running cluster and prints the checker's table, for clients that are not
// Go modules (integration/interop/eos.sh runs it with KafkaJS members).
// Members are any program that takes eosmember's flags and writes the same
// history: -member-bin node -member-arg eos_kafkajs.js.
//
//	eosrun -bootstrap HOST:PORT -client kafkajs -topics NAME -member-bin node -member-arg FILE.js
//	       [-bounce-at 0.25,0.55 -bounce-cmd 'COMMAND' [-bounce-after-stop]]
//	eosrun freeport N     (prints the first of N consecutive free loopback ports)
//
// A cluster fault is a shell command (-bounce-cmd, run with bash -c, e.g.
// one that SIGKILLs the cluster and starts it again on the same ports)
// that eosrun runs once the given fractions of the input are committed in
// the output, and, with -bounce-after-stop, once more after the members
// stopped, before the final reads; it must return when the cluster is
// serving again. A failed command fails the run.
//
// Exit status: 0 with no anomaly, 1 on anomalies or a failed run, 2 for bad
// flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/txncoord/txncoord/integration/eos"
	"github.com/txncoord/txncoord/internal/freeport"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	if len(os.Args) == 3 && os.Args[1] == "freeport" {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			os.Exit(2)
		}
		base, err := freeport.Run(n)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eosrun:", err)
			os.Exit(1)
		}
		fmt.Println(base)
		return
	}
	var (
		cfg        eos.Config
		bootstrap  string
		topics     string
		memberArgs list
		timeout    time.Duration
		churn      bool
		bounceAt   string
		bounceCmd  string
		afterStop  bool
	)
	flag.StringVar(&bootstrap, "bootstrap", "", "comma-separated seed brokers")
	flag.StringVar(&cfg.Client, "client", "kgo", "client name passed to members")
	flag.IntVar(&cfg.Values, "values", 1000, "input values")
	partitions := flag.Int("partitions", 6, "partitions of each topic (they must exist)")
	flag.StringVar(&topics, "topics", "eos", "topic prefix: PREFIX-in, PREFIX-mid, PREFIX-out")
	flag.IntVar(&cfg.Members, "members", 3, "members per stage")
	flag.StringVar(&cfg.MemberBin, "member-bin", "", "member program")
	flag.Var(&memberArgs, "member-arg", "argument before the member flags (repeatable)")
	flag.StringVar(&cfg.Dir, "dir", "", "histories and member logs (default: a temporary directory, removed on success)")
	flag.Float64Var(&cfg.AbortP, "abort-p", 0.1, "probability of aborting a transaction on purpose")
	flag.IntVar(&cfg.BatchMax, "batch", 20, "records per transaction at most")
	flag.DurationVar(&cfg.Pause, "pause", 150*time.Millisecond, "each member's sleep after a transaction")
	flag.DurationVar(&timeout, "timeout", 5*time.Minute, "bound of the whole run")
	flag.BoolVar(&churn, "churn", true, "members leave, join and are SIGKILLed while the chain runs")
	flag.StringVar(&bounceAt, "bounce-at", "", "comma-separated fractions of the input committed at which -bounce-cmd runs")
	flag.StringVar(&bounceCmd, "bounce-cmd", "", "shell command that bounces the cluster and returns once it serves again")
	flag.BoolVar(&afterStop, "bounce-after-stop", false, "run -bounce-cmd once more after the members stopped, before the final reads")
	flag.Parse()
	if bootstrap == "" || cfg.MemberBin == "" {
		fmt.Fprintln(os.Stderr, "eosrun: -bootstrap and -member-bin are required")
		os.Exit(2)
	}
	cfg.Bootstrap = strings.Split(bootstrap, ",")
	cfg.Partitions = int32(*partitions)
	cfg.Topics = []string{topics + "-in", topics + "-mid", topics + "-out"}
	cfg.MemberArgs = memberArgs
	cfg.Seed = 1
	if churn {
		cfg.Events = []eos.Event{
			{At: 0.15, Kind: eos.LeaveMember, Stage: 1, Slot: 0, Pause: 2 * time.Second},
			{At: 0.35, Kind: eos.KillMember, Stage: 2, Slot: 1},
			{At: 0.55, Kind: eos.AddMember, Stage: 1},
			{At: 0.70, Kind: eos.KillMember, Stage: 1, Slot: 2},
		}
	}
	if bounceCmd != "" {
		n := 0
		for _, f := range strings.Split(bounceAt, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			at, err := strconv.ParseFloat(f, 64)
			if err != nil || at <= 0 || at >= 1 {
				fmt.Fprintf(os.Stderr, "eosrun: -bounce-at %q: want fractions in (0, 1)\n", f)
				os.Exit(2)
			}
			n++
			cfg.Events = append(cfg.Events, eos.Event{At: at, Kind: eos.Func, Name: fmt.Sprintf("cluster bounce %d (-bounce-cmd)", n),
				Do: func(ctx context.Context) error { return runCmd(ctx, bounceCmd) }})
		}
		sort.SliceStable(cfg.Events, func(i, j int) bool { return cfg.Events[i].At < cfg.Events[j].At })
		if afterStop {
			cfg.AfterStop = func(ctx context.Context) error { return runCmd(ctx, bounceCmd) }
		}
	} else if bounceAt != "" || afterStop {
		fmt.Fprintln(os.Stderr, "eosrun: -bounce-at and -bounce-after-stop need -bounce-cmd")
		os.Exit(2)
	}
	keep := cfg.Dir != ""
	if !keep {
		dir, err := os.MkdirTemp("", "eosrun-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "eosrun:", err)
			os.Exit(1)
		}
		cfg.Dir = dir
	}
	cfg.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rep, err := eos.Run(ctx, cfg)
	if rep != nil {
		fmt.Printf("%s chain: %s\n%s", cfg.Client, rep.Summary(), rep.Table())
	}
	if err != nil || rep == nil || rep.Anomalies() != 0 {
		if err != nil {
			fmt.Fprintln(os.Stderr, "eosrun:", err)
		}
		fmt.Fprintf(os.Stderr, "eosrun: FAIL; histories and member logs kept in %s\n", cfg.Dir)
		os.Exit(1)
	}
	if !keep {
		os.RemoveAll(cfg.Dir)
	}
}

// runCmd runs a bounce command with bash, its output on eosrun's stderr.
func runCmd(ctx context.Context, command string) error {
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	return nil
}
