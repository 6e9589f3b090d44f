package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/txncoord/txncoord/internal/freeport"
)

// Command is how to start a program: the bench binary re-executing itself
// (serve-kfake), or the txncoord binary.
type Command struct {
	Path string
	Args []string
	Env  []string // added to the bench's own environment
	// EtcdMetrics is the /metrics URL of the etcd member the child embeds
	// ("" for none): scraped over the window next to its admin /metrics.
	EtcdMetrics string
}

// Target is one system under test, run as a child process per measured cell
// so that its CPU and peak RSS are its own, apart from the clients'.
type Target struct {
	Name string
	// argv gives the child's command for a fresh data dir. It is called
	// again on a retry, so it may pick new ports each time.
	argv func(dataDir string) (Command, error)
	// BuildErr, when set, means the target could not be prepared (e.g. the
	// txncoord binary does not build); its cells report the error.
	BuildErr error
}

// Target names, as --targets takes them.
const (
	TargetTxncoord       = "txncoord"
	TargetTxncoordNoSync = "txncoord-nosync"
	// TargetTxncoordEtcd3 is `txncoord up --coordinators 3`: three
	// coordinators sharing the transactional ids through the embedded
	// one-member etcd, in the same process as the leaders.
	TargetTxncoordEtcd3 = "txncoord-etcd3"
	TargetKfake         = "kfake"
	TargetKfakeSync     = "kfake-sync"
)

// TxncoordTarget runs `txncoord up` with three 4.2 leaders (durable unless
// noSync, which adds the opt-in --unsafe-no-fsync), the topic created with
// partitions partitions before the ready line.
func TxncoordTarget(bin string, noSync bool, topic string, partitions int) Target {
	name := TargetTxncoord
	var extra []string
	if noSync {
		name = TargetTxncoordNoSync
		extra = []string{"--unsafe-no-fsync"}
	}
	return Target{Name: name, argv: func(dataDir string) (Command, error) {
		c, _, err := upCommand(bin, dataDir, 1, topic, partitions, extra...)
		return c, err
	}}
}

// TxncoordEtcdTarget runs `txncoord up --coordinators coordinators` with
// three 4.2 leaders: the coordinators share the transactional ids through
// the etcd `up` embeds (one member, fsync on, under DATA_DIR/etcd), whose
// own /metrics is scraped too. Named TargetTxncoordEtcd3 for three.
func TxncoordEtcdTarget(bin string, coordinators int, topic string, partitions int) Target {
	name := fmt.Sprintf("txncoord-etcd%d", coordinators)
	return Target{Name: name, argv: func(dataDir string) (Command, error) {
		c, base, err := upCommand(bin, dataDir, coordinators, topic, partitions, "--coordinators", strconv.Itoa(coordinators))
		if err != nil {
			return Command{}, err
		}
		// Node i listens on base+i (coordinators, then the leaders);
		// etcd's client port follows the last leader, its peer port
		// after it. etcd serves /metrics on its client port.
		c.EtcdMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", base+coordinators+upLeaders)
		return c, nil
	}}
}

// upLeaders is how many leaders the txncoord targets start.
const upLeaders = 3

// upCommand is `txncoord up` of coordinators coordinators and upLeaders 4.2
// leaders on fresh ports, plus extra arguments; base is the first node's
// port.
func upCommand(bin, dataDir string, coordinators int, topic string, partitions int, extra ...string) (c Command, base int, err error) {
	// Node i listens on port+i: coordinators, then leaders, then (several
	// coordinators) the embedded etcd's client and peer ports, all
	// consecutive; one more port for the admin API.
	ports := coordinators + upLeaders
	if coordinators > 1 {
		ports += 2
	}
	base, err = freeport.Run(ports)
	if err != nil {
		return Command{}, 0, err
	}
	admin, err := freeport.Run(1)
	if err != nil {
		return Command{}, 0, err
	}
	leaders := strings.TrimSuffix(strings.Repeat("4.2,", upLeaders), ",")
	args := []string{"up", "--data-dir", dataDir,
		"--listen", "127.0.0.1:" + strconv.Itoa(base), "--leaders", leaders,
		"--admin-listen", "127.0.0.1:" + strconv.Itoa(admin),
		"--topics", fmt.Sprintf("%s:%d", topic, partitions)}
	args = append(args, extra...)
	return Command{Path: bin, Args: args, Env: []string{"TXNCOORD_LOG_FORMAT=json", "TXNCOORD_LOG_LEVEL=warn"}}, base, nil
}

// KfakeTarget runs kfake with brokers brokers in a child: self is the bench
// binary's own command line up to (excluding) the serve-kfake arguments.
// sync adds DataDir + SyncWrites.
func KfakeTarget(self Command, sync bool, brokers int, topic string, partitions int) Target {
	name := TargetKfake
	if sync {
		name = TargetKfakeSync
	}
	return Target{Name: name, argv: func(dataDir string) (Command, error) {
		c := self
		c.Args = append(append([]string(nil), self.Args...), "serve-kfake",
			"--brokers", strconv.Itoa(brokers), "--topic", topic, "--partitions", strconv.Itoa(partitions))
		if sync {
			c.Args = append(c.Args, "--data-dir", dataDir, "--sync")
		}
		return c, nil
	}}
}

// Instance is one running child.
type Instance struct {
	Target    string
	Pid       int
	Bootstrap []string
	AdminURL  string // "" when the target has no admin API
	// EtcdMetricsURL is the embedded etcd's /metrics ("" for none).
	EtcdMetricsURL string

	cmd      *exec.Cmd
	log      *os.File
	exited   chan struct{} // closed after cmd.Wait returned
	waitErr  error
	stopOnce bool
}

// readyTimeout bounds how long a child may take to print its ready line.
const readyTimeout = 60 * time.Second

// Start runs t in dataDir, appending the child's stdout and stderr to
// logPath, and returns once the child printed its ready line. A child that
// exits first (a port taken between probe and bind, say) is retried twice.
func Start(ctx context.Context, t Target, dataDir, logPath string) (*Instance, error) {
	if t.BuildErr != nil {
		return nil, t.BuildErr
	}
	var last error
	for range 3 {
		inst, err := startOnce(ctx, t, dataDir, logPath)
		if err == nil {
			return inst, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func startOnce(ctx context.Context, t Target, dataDir, logPath string) (*Instance, error) {
	c, err := t.argv(dataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "# %s %s\n", c.Path, strings.Join(c.Args, " "))
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	inst := &Instance{Target: t.Name, Pid: cmd.Process.Pid, EtcdMetricsURL: c.EtcdMetrics, cmd: cmd, log: logFile,
		exited: make(chan struct{})}

	// The reader owns stdout until EOF (the child exited); only then may
	// cmd.Wait run, which closes the pipe.
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if !sent && strings.Contains(line, " ready ") {
				ready <- line
				sent = true
			}
		}
		inst.waitErr = cmd.Wait()
		close(inst.exited)
	}()

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case line := <-ready:
		if err := inst.parseReady(line); err != nil {
			inst.Stop()
			return nil, err
		}
		return inst, nil
	case <-inst.exited:
		logFile.Close()
		return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", t.Name, inst.waitErr, logPath)
	case <-timer.C:
		inst.Stop()
		return nil, fmt.Errorf("%s printed no ready line in %s; see %s", t.Name, readyTimeout, logPath)
	case <-ctx.Done():
		inst.Stop()
		return nil, ctx.Err()
	}
}

// parseReady reads "<name> ready bootstrap=a,b admin=http://..." tokens.
func (i *Instance) parseReady(line string) error {
	for _, tok := range strings.Fields(line) {
		key, val, ok := strings.Cut(tok, "=")
		if !ok {
			continue
		}
		switch key {
		case "bootstrap":
			i.Bootstrap = strings.Split(val, ",")
		case "addr": // a leader process: its own listener
			if len(i.Bootstrap) == 0 {
				i.Bootstrap = []string{val}
			}
		case "admin":
			if val != "none" {
				i.AdminURL = val
			}
		}
	}
	if len(i.Bootstrap) == 0 {
		return fmt.Errorf("ready line without bootstrap=: %q", line)
	}
	return nil
}

// CPU is the child's user+system CPU time so far.
func (i *Instance) CPU() (time.Duration, error) { return processCPU(i.Pid) }

// PeakRSS is the child's resident-set high-water mark so far, in bytes.
func (i *Instance) PeakRSS() (int64, error) { return peakRSS(i.Pid) }

// stopGrace is how long a child has to stop after SIGTERM (txncoord promises
// 15 s) before it is killed.
const stopGrace = 20 * time.Second

// Stop sends SIGTERM, waits up to stopGrace, then SIGKILLs. It returns the
// child's exit error, if it did not exit cleanly on the signal.
func (i *Instance) Stop() error {
	if i.stopOnce {
		<-i.exited
		return nil
	}
	i.stopOnce = true
	defer i.log.Close()
	_ = i.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(stopGrace):
		_ = i.cmd.Process.Kill()
		<-i.exited
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", i.Target, stopGrace)
	}
	return i.waitErr
}
