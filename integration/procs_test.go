package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/internal/freeport"
)

// Separate coordinator and leader processes for the crash suites: the
// txncoord binary is built once per test run (go build into a temporary
// directory, removed by TestMain) and each node runs as
// `txncoord coordinator|leader` from a cluster file, so SIGKILL is a real
// crash: no deferred close, no fsync after the kill.
//
// A leader behind a fault proxy needs two cluster files: the leaders'
// (every leader at its real address, which it binds) and the coordinator's
// (the proxied leaders at the proxy's address), so the coordinator's
// markers, and clients that bootstrap at the coordinator, go through the
// proxy while the leader still binds its own port.

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	workload.RemoveSaramaWorker()
	os.Exit(code)
}

// txncoordBinary builds ./cmd/txncoord once and returns its path.
func txncoordBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "txncoord-bin-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "txncoord")
		cmd := exec.Command("go", "build", "-o", binary.path, "./cmd/txncoord")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build ./cmd/txncoord: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// freeAddr returns a loopback address whose port was free a moment ago,
// for a child process to bind: from freeport, below the ephemeral range,
// where the tests' own outgoing connections cannot have taken it since.
func freeAddr(t testing.TB) string {
	t.Helper()
	p, err := freeport.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// proc is one running txncoord process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
	ready string        // its ready line
	log   string        // path of its stderr
}

// startProc starts bin with args and waits for its ready line on stdout.
func startProc(t testing.TB, name, logDir, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	// Tests' classic groups rebalance at once (the default is Kafka's 3 s);
	// a test that wants the delay passes the flag, which wins.
	cmd.Env = append(os.Environ(), "TXNCOORD_LOG_LEVEL="+childLogLevel("warn"), "TXNCOORD_LOG_FORMAT=json",
		"TXNCOORD_GROUP_INITIAL_REBALANCE_DELAY_MS=0")
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	ready := make(chan string, 1)
	// The reader ends when the process closes stdout (it exits).
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "txncoord ready ") {
				select {
				case ready <- sc.Text():
				default:
				}
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case p.ready = <-ready:
	case <-p.done:
		t.Fatalf("%s exited before ready: %s\n%s", name, cmd.ProcessState, tail(logPath))
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no ready line in 60 s\n%s", name, tail(logPath))
	}
	return p
}

// kill sends SIGKILL and waits for the exit (idempotent).
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and fails the test unless the process exits with
// status 0 within 15 s: a graceful stop finishes what is in flight.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if !p.cmd.ProcessState.Success() {
			t.Fatalf("%s exited with %s after SIGTERM\n%s", p.name, p.cmd.ProcessState, tail(p.log))
		}
		t.Logf("%s stopped in %v", p.name, time.Since(start).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not stop within 15 s of SIGTERM\n%s", p.name, tail(p.log))
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// procCluster is a coordinator and leaders as separate processes.
type procCluster struct {
	t        testing.TB
	bin, dir string
	leaderCF string // cluster file the leaders run from
	coordCF  string // cluster file the coordinator runs from
	file     *cluster.File
	Coord    *proc
	Leaders  map[int32]*proc
	Proxies  map[int32]*faultproxy.Proxy
	coordAt  string
	seeds    []string // every address a client may bootstrap from
	// upArgs, when set, makes Coord one `txncoord up` process (every
	// node, one shared file) started with these arguments.
	upArgs []string
}

// startUpProcess runs `txncoord up` as one process: the coordinator and
// three 4.2 leaders on consecutive free ports, one data dir.
func startUpProcess(t testing.TB, topics map[string]int32) *procCluster {
	t.Helper()
	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	pc := &procCluster{t: t, bin: txncoordBinary(t), dir: keptDir(t), Leaders: map[int32]*proc{}, Proxies: map[int32]*faultproxy.Proxy{}}
	pc.coordAt = fmt.Sprintf("127.0.0.1:%d", base)
	for i := range 4 {
		pc.seeds = append(pc.seeds, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	var ts []string
	for name, n := range topics {
		ts = append(ts, fmt.Sprintf("%s:%d", name, n))
	}
	pc.upArgs = []string{"up", "--data-dir", filepath.Join(pc.dir, "data"), "--listen", pc.coordAt,
		"--leaders", "4.2,4.2,4.2", "--topics", strings.Join(ts, ","), "--admin-listen="}
	pc.StartCoordinator()
	return pc
}

// startProcCluster writes the cluster files and starts every node.
func startProcCluster(t testing.TB, coordVersion string, leaderVersions []string, topics map[string]int32, proxied ...int32) *procCluster {
	t.Helper()
	pc := &procCluster{t: t, bin: txncoordBinary(t), dir: keptDir(t), Leaders: map[int32]*proc{}, Proxies: map[int32]*faultproxy.Proxy{}}
	f := &cluster.File{
		ClusterID:         cluster.DefaultClusterID,
		Coordinator:       &cluster.Node{NodeID: 0, Addr: freeAddr(t), KafkaVersion: coordVersion},
		DefaultPartitions: 3,
		Topics:            topics,
		// Tests' classic groups rebalance at once.
		GroupInitialRebalanceDelayMs: new(int32(0)),
	}
	for i, v := range leaderVersions {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: int32(i + 1), Addr: freeAddr(t), KafkaVersion: v})
	}
	coordFile := *f
	coordFile.Leaders = append([]cluster.Node(nil), f.Leaders...)
	for i, l := range f.Leaders {
		for _, id := range proxied {
			if id != l.NodeID {
				continue
			}
			p, err := faultproxy.Start(faultproxy.Config{Target: l.Addr, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			pc.Proxies[id] = p
			coordFile.Leaders[i].Addr = p.Addr()
		}
	}
	pc.file = f
	pc.coordAt = f.Coordinator.Addr
	pc.leaderCF = pc.writeFile("cluster-leaders.yaml", f)
	pc.coordCF = pc.writeFile("cluster-coordinator.yaml", &coordFile)
	pc.seeds = []string{f.Coordinator.Addr}
	for _, l := range coordFile.Leaders {
		pc.seeds = append(pc.seeds, l.Addr)
	}
	for _, l := range f.Leaders {
		pc.StartLeader(l.NodeID)
	}
	pc.StartCoordinator()
	return pc
}

func (pc *procCluster) writeFile(name string, f *cluster.File) string {
	pc.t.Helper()
	if err := f.Validate(); err != nil {
		pc.t.Fatalf("cluster file %s: %v", name, err)
	}
	b, err := yaml.Marshal(f)
	if err != nil {
		pc.t.Fatal(err)
	}
	path := filepath.Join(pc.dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		pc.t.Fatal(err)
	}
	return path
}

// StartCoordinator starts (or restarts, on the same data dir) the
// coordinator process.
func (pc *procCluster) StartCoordinator() {
	pc.t.Helper()
	if pc.upArgs != nil {
		pc.Coord = startProc(pc.t, "up", pc.dir, pc.bin, pc.upArgs...)
		return
	}
	pc.Coord = startProc(pc.t, "coordinator", pc.dir, pc.bin, "coordinator",
		"--cluster", pc.coordCF, "--data-dir", filepath.Join(pc.dir, "coordinator-data"), "--admin-listen=")
}

// StartLeader starts (or restarts, on the same data dir) leader id.
func (pc *procCluster) StartLeader(id int32) {
	pc.t.Helper()
	pc.Leaders[id] = startProc(pc.t, fmt.Sprintf("leader-%d", id), pc.dir, pc.bin, "leader",
		"--cluster", pc.leaderCF, "--node-id", fmt.Sprint(id), "--data-dir", filepath.Join(pc.dir, fmt.Sprintf("leader-%d-data", id)))
}

// BounceCoordinator SIGKILLs the coordinator and starts it again.
func (pc *procCluster) BounceCoordinator() {
	pc.t.Helper()
	pc.Coord.kill()
	pc.StartCoordinator()
}

// RestartCoordinator stops the coordinator gracefully (SIGTERM, exit 0
// within 15 s) and starts it again.
func (pc *procCluster) RestartCoordinator() {
	pc.t.Helper()
	pc.Coord.stop(pc.t)
	pc.StartCoordinator()
}

// BounceLeader SIGKILLs leader id and starts it again.
func (pc *procCluster) BounceLeader(id int32) {
	pc.t.Helper()
	pc.Leaders[id].kill()
	pc.StartLeader(id)
}

// Bootstrap is the coordinator's address as a seed list.
func (pc *procCluster) Bootstrap() []string { return []string{pc.coordAt} }

// admin returns a kadm client seeded with every node, so it works while
// one of them is down.
func (pc *procCluster) admin() *kadm.Client {
	pc.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...))
	if err != nil {
		pc.t.Fatal(err)
	}
	pc.t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// endOffsets sums the high watermarks of topics: the progress of a
// workload (errors count as no progress).
func endOffsets(ctx context.Context, adm *kadm.Client, topics ...string) int64 {
	offs, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return -1
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			sum += o.Offset
		}
	})
	return sum
}

// waitProgress polls until the topics' high watermarks sum to at least n.
func waitProgress(ctx context.Context, t testing.TB, adm *kadm.Client, n int64, topics ...string) {
	t.Helper()
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		got := endOffsets(reqCtx, adm, topics...)
		cancel()
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d records in %v: at %d: %v", n, topics, got, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// coordinatorEpochs returns the highest coordinator epoch the leaders hold
// for any producer of topic (DescribeProducers, from the markers they
// accepted).
func coordinatorEpochs(ctx context.Context, t testing.TB, adm *kadm.Client, topic string, partitions int32) int32 {
	t.Helper()
	set := kadm.TopicsSet{topic: {}}
	for p := int32(0); p < partitions; p++ {
		set[topic][p] = struct{}{}
	}
	d, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	best := int32(-1)
	d.EachPartition(func(p kadm.DescribedProducersPartition) {
		for _, dp := range p.ActiveProducers {
			best = max(best, dp.CoordinatorEpoch)
		}
	})
	return best
}
