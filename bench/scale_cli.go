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

	"github.com/txncoord/txncoord/cluster"
)

// scaleMain is `txncoord-bench scale`: one `txncoord up --coordinators C`
// child (--layout up), or a three-member etcd, three coordinators and three
// leaders as processes of their own (--layout procs); many transactional ids
// and consumer groups on it, a steady window, then (unless --after-kill 0)
// one coordinator killed: through /v1/faults in `up`, by SIGKILL as a
// process.
func scaleMain(ctx context.Context, args []string, self Command, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := ScaleConfig{Topic: "scale", GroupTopic: "scale-groups", Prefix: "scale"}
	fs.IntVar(&cfg.IDs, "ids", 1000, "transactional ids (--driver kgo: one kgo client each)")
	fs.StringVar(&cfg.Driver, "driver", DriverKgo, "how the ids are driven: kgo (one kgo transactional client per id) or "+
		"raw (--raw-clients kgo clients sending every id's InitProducerId, Produce v12+ and EndTxn v5 themselves, "+
		"FindCoordinator batched)")
	fs.IntVar(&cfg.RawClients, "raw-clients", int(cluster.DefaultTransactionStatePartitions),
		"kgo clients the raw driver spreads the ids over, by __transaction_state partition (as many as partitions: "+
			"a connection's ids share a coordinator), plus one for FindCoordinator")
	cfg.TxnStatePartitions = cluster.DefaultTransactionStatePartitions
	layout := fs.String("layout", "up", "up (one `txncoord up --coordinators C` process, embedded etcd, kill through "+
		"/v1/faults) or procs (a three-member etcd, 3 `txncoord coordinator` and 3 `txncoord leader` processes, "+
		"kill by SIGKILL)")
	fs.IntVar(&cfg.Groups, "groups", 100, "consumer groups of 2 members (one kgo client each)")
	fs.DurationVar(&cfg.Interval, "interval", time.Second, "each id's transaction and each member's offset commit, once per interval")
	fs.DurationVar(&cfg.Ramp, "ramp", 2*time.Minute, "longest wait for every client to be served once before the window")
	fs.DurationVar(&cfg.Window, "window", 30*time.Second, "steady-state window")
	fs.DurationVar(&cfg.AfterKill, "after-kill", 30*time.Second, "watch this long after killing --kill-node (0: no kill)")
	fs.IntVar(&cfg.KillNode, "kill-node", 1, "coordinator killed (0..coordinators-1)")
	fs.IntVar(&cfg.StartRate, "start-rate", 300, "clients started per second in the ramp (InitProducerId and JoinGroup storms otherwise time out)")
	fs.IntVar(&cfg.ValueBytes, "value-bytes", 100, "record value size")
	coordinators := fs.Int("coordinators", 3, "up --coordinators")
	partitions := fs.Int("partitions", 6, "partitions of the producers' topic (over 3 leaders)")
	bin := fs.String("txncoord-bin", "", "txncoord binary (default: go build ./cmd/txncoord into the run folder)")
	out := fs.String("out", "results", "results folder; the run writes <out>/scale-<timestamp>/")
	cpuProfile := fs.Bool("cpu-profile", true, "profile the window: the server through the admin API (its CPU split by component; --layout up), and "+
		"the clients (this process) into clients-window.pprof")
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
	if (cfg.Driver != DriverKgo && cfg.Driver != DriverRaw) || (*layout != "up" && *layout != "procs") {
		fmt.Fprintln(stderr, "scale: --driver is kgo or raw, --layout up or procs")
		return 2
	}
	if *layout == "procs" && *coordinators != procsCoordinators {
		fmt.Fprintf(stderr, "scale: --layout procs runs %d coordinators\n", procsCoordinators)
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
	var srv *ScaleServer
	var stop func()
	if *layout == "procs" {
		l, err := startProcsLayout(ctx, self, path, workDir, cfg.Topic, *partitions)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		srv, stop = l.server(), l.stop
		fmt.Fprintf(stderr, "scale: %d processes ready; %d ids, %d groups\n", len(srv.Procs), cfg.IDs, cfg.Groups)
	} else {
		inst, err := startUp(ctx, path, *coordinators, cfg.Topic, *partitions, workDir, runDir)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		srv, stop = upServer(inst), func() {
			if err := inst.Stop(); err != nil {
				fmt.Fprintln(stderr, "stop:", err)
			}
		}
		fmt.Fprintf(stderr, "scale: txncoord pid %d ready; %d ids, %d groups\n", inst.Pid, cfg.IDs, cfg.Groups)
	}
	rep.Layout = *layout
	res, runErr := RunScale(ctx, srv, cfg, profileDir, func() { rep.LoadAfter = loadAvg() })
	stop()
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

// startUp starts `txncoord up --coordinators coordinators`.
func startUp(ctx context.Context, bin string, coordinators int, topic string, partitions int, workDir, runDir string) (*Instance, error) {
	target := TxncoordEtcdTarget(bin, coordinators, topic, partitions)
	upArgv := target.argv
	target.argv = func(dataDir string) (Command, error) {
		// Every client of the run connects from 127.0.0.1: Kafka's
		// per-address limit (1,000 by default) would refuse most of them.
		c, err := upArgv(dataDir)
		c.Args = append(c.Args, "--max-connections-per-ip", "-1")
		return c, err
	}
	return Start(ctx, target, filepath.Join(workDir, "data"), filepath.Join(runDir, "txncoord.log"))
}

// upServer is `up`'s one process, its coordinators killed through the
// fault API (and restarted before the clients close).
func upServer(inst *Instance) *ScaleServer {
	return &ScaleServer{Bootstrap: inst.Bootstrap, Procs: []scaleProc{{Name: "up", Role: "up", inst: inst}},
		AdminURL: inst.AdminURL, EtcdMetricsURL: inst.EtcdMetricsURL, KillHow: "kill fault (/v1/faults)",
		Kill: func(ctx context.Context, node int) error {
			return postFault(ctx, inst.AdminURL, fmt.Sprintf(`{"kind":"kill","node":%d}`, node))
		},
		Restore: func(ctx context.Context) { deleteFaults(ctx, inst.AdminURL) }}
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
