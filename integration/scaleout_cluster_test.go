package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/internal/etcdtest"
)

// The multi-process cluster of issue 19's fault suite (scaleout_*_test.go):
// three etcd members in the test process (internal/etcdtest, so a test can
// kill and restart them), three coordinators (nodes 0..2, each with its own
// admin API) and three 4.2 leaders (nodes 3..5), each a `txncoord` child
// process, so SIGKILL, SIGSTOP and SIGTERM hit a real process.
//
// Clients bootstrap from the leaders, which the tests never stop: any node
// answers Metadata with the whole cluster and a leader forwards
// FindCoordinator to the coordinators.
//
// Logs: every process writes its log (JSON, info for coordinators) to
// <dir>/<name>.log, where dir is keptDir's (kept after the test under
// $TXNCOORD_KEEP_DIRS when set). A failed test prints the tail of each log.

// scaleConfig configures a scaleCluster.
type scaleConfig struct {
	Topics map[string]int32
	// LeaseTTL is --etcd-lease-ttl (0: the product's default, 5 s).
	LeaseTTL time.Duration
	// ProxyLeader, when set, puts one faultproxy per coordinator in front
	// of that leader: coordinator N's cluster file names the leader at
	// its own proxy's address (Proxies[N]), so a fault there hits only
	// N's markers. The leaders' file has every real address.
	ProxyLeader int32
	// LogLevel of the coordinators (default info).
	LogLevel string
	// MarkerRequestTimeout is --marker-request-timeout (0: the
	// product's default, 30 s).
	MarkerRequestTimeout time.Duration
}

// scaleCluster is the running cluster.
type scaleCluster struct {
	t     testing.TB
	bin   string
	dir   string
	cfg   scaleConfig
	Etcd  *etcdtest.Cluster
	file  *cluster.File
	parts int32

	leaderFile string
	coordFiles map[int32]string // cluster file of each coordinator
	adminAddr  map[int32]string // fixed across restarts

	Coords  map[int32]*proc
	Leaders map[int32]*proc
	Proxies map[int32]*faultproxy.Proxy // by coordinator (ProxyLeader)
}

const (
	scaleCoordinators = 3
	scaleLeaders      = 3
)

// startScaleCluster starts etcd, the coordinators (node 0, the controller,
// first) and the leaders, and waits until the coordinators share every
// __transaction_state partition.
func startScaleCluster(t *testing.T, cfg scaleConfig) *scaleCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	start := time.Now()
	sc := &scaleCluster{t: t, bin: txncoordBinary(t), dir: keptDir(t), cfg: cfg, Etcd: etcdtest.Start(t, 3),
		coordFiles: map[int32]string{}, adminAddr: map[int32]string{},
		Coords: map[int32]*proc{}, Leaders: map[int32]*proc{}, Proxies: map[int32]*faultproxy.Proxy{}}
	f := &cluster.File{
		ClusterID:         "scaleout",
		DefaultPartitions: 3,
		Topics:            cfg.Topics,
		Etcd:              &cluster.Etcd{Endpoints: sc.Etcd.Endpoints()},
		// Tests' classic groups rebalance at once.
		GroupInitialRebalanceDelayMs: new(int32(0)),
	}
	for id := range int32(scaleCoordinators + scaleLeaders) {
		n := cluster.Node{NodeID: id, Addr: freeAddr(t), KafkaVersion: "4.2"}
		if id < scaleCoordinators {
			f.Coordinators = append(f.Coordinators, n)
			sc.adminAddr[id] = freeAddr(t)
		} else {
			f.Leaders = append(f.Leaders, n)
		}
	}
	sc.file = f
	sc.parts = cluster.NewView(f).TransactionStatePartitions()
	sc.leaderFile = sc.writeFile("cluster.yaml", f)
	for id := range int32(scaleCoordinators) {
		sc.coordFiles[id] = sc.leaderFile
		if cfg.ProxyLeader == 0 {
			continue
		}
		own := *f
		own.Leaders = slices.Clone(f.Leaders)
		for i, l := range own.Leaders {
			if l.NodeID != cfg.ProxyLeader {
				continue
			}
			p, err := faultproxy.Start(faultproxy.Config{Target: l.Addr, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			sc.Proxies[id] = p
			own.Leaders[i].Addr = p.Addr()
		}
		sc.coordFiles[id] = sc.writeFile(fmt.Sprintf("cluster-coordinator-%d.yaml", id), &own)
	}
	t.Cleanup(func() {
		if t.Failed() {
			sc.dumpLogs()
		}
	})
	for id := range int32(scaleCoordinators) {
		sc.StartCoordinator(id)
	}
	for _, l := range f.Leaders {
		sc.Leaders[l.NodeID] = startProc(t, fmt.Sprintf("leader-%d", l.NodeID), sc.dir, sc.bin, "leader",
			"--cluster", sc.leaderFile, "--node-id", fmt.Sprint(l.NodeID),
			"--data-dir", filepath.Join(sc.dir, fmt.Sprintf("leader-%d-data", l.NodeID)))
	}
	sc.waitBalanced(testCtx(t, time.Minute), 0, 1, 2)
	t.Logf("scale-out cluster up in %v: etcd %v, coordinators %v, leaders %v, %d __transaction_state partitions, lease TTL %v, logs in %s",
		time.Since(start).Round(time.Millisecond), sc.Etcd.Endpoints(), f.Coordinators, f.Leaders, sc.parts, sc.leaseTTL(), sc.dir)
	return sc
}

func (sc *scaleCluster) writeFile(name string, f *cluster.File) string {
	pc := &procCluster{t: sc.t, dir: sc.dir}
	return pc.writeFile(name, f)
}

func (sc *scaleCluster) leaseTTL() time.Duration {
	if sc.cfg.LeaseTTL > 0 {
		return sc.cfg.LeaseTTL
	}
	return 5 * time.Second
}

// StartCoordinator starts (or restarts, on its data dir and admin address)
// coordinator id.
func (sc *scaleCluster) StartCoordinator(id int32) {
	sc.t.Helper()
	level := sc.cfg.LogLevel
	if level == "" {
		level = "info"
	}
	args := []string{"coordinator", "--log-level", level, "--cluster", sc.coordFiles[id], "--node-id", fmt.Sprint(id),
		"--data-dir", filepath.Join(sc.dir, fmt.Sprintf("coordinator-%d-data", id)), "--admin-listen", sc.adminAddr[id]}
	if sc.cfg.LeaseTTL > 0 {
		args = append(args, "--etcd-lease-ttl", sc.cfg.LeaseTTL.String())
	}
	if sc.cfg.MarkerRequestTimeout > 0 {
		args = append(args, "--marker-request-timeout", sc.cfg.MarkerRequestTimeout.String())
	}
	sc.Coords[id] = startProc(sc.t, fmt.Sprintf("coordinator-%d", id), sc.dir, sc.bin, args...)
}

// KillCoordinator SIGKILLs coordinator id and, once it has exited, returns
// when the signal was sent.
func (sc *scaleCluster) KillCoordinator(id int32) time.Time {
	at := time.Now()
	sc.Coords[id].kill()
	return at
}

// signal sends sig to coordinator id (SIGSTOP, SIGCONT).
func (sc *scaleCluster) signal(id int32, sig syscall.Signal) {
	sc.t.Helper()
	if err := sc.Coords[id].cmd.Process.Signal(sig); err != nil {
		sc.t.Fatalf("coordinator %d: %v: %v", id, sig, err)
	}
}

// Bootstrap is the leaders' addresses.
func (sc *scaleCluster) Bootstrap() []string {
	var out []string
	for _, l := range sc.file.Leaders {
		out = append(out, l.Addr)
	}
	return out
}

// target is the cluster as crash_test.go's workload helpers see it: they
// need only the bootstrap address (the first leader's) and, for kadm, the
// seeds (every node).
func (sc *scaleCluster) target() *procCluster {
	pc := &procCluster{t: sc.t, coordAt: sc.file.Leaders[0].Addr}
	for _, n := range cluster.NewView(sc.file).Brokers() {
		pc.seeds = append(pc.seeds, n.Addr)
	}
	return pc
}

// coordinators is GET /v1/coordinators of node id, in one attempt with a
// short timeout (a stopped node must not hold the caller up).
func (sc *scaleCluster) coordinators(ctx context.Context, id int32) ([]admin.CoordinatorStatus, error) {
	var out []admin.CoordinatorStatus
	err := sc.getJSON(ctx, id, "/v1/coordinators", &out)
	return out, err
}

// getJSON is one GET of node id's admin API without retries.
func (sc *scaleCluster) getJSON(ctx context.Context, id int32, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	raw, status, err := sc.get(ctx, id, path)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET %s of coordinator %d: HTTP %d: %s", path, id, status, raw)
	}
	return json.Unmarshal([]byte(raw), out)
}

// get is one GET of node id's admin API: its body and status.
func (sc *scaleCluster) get(ctx context.Context, id int32, path string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+sc.adminAddr[id]+path, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return string(b), resp.StatusCode, err
}

// owners is who owns what, as one node's admin API reports it.
type owners struct {
	live   []int32
	owner  map[int32]admin.PartitionOwnership // partition → {partition, epoch}, and ownerOf
	nodeOf map[int32]int32                    // partition → node
	byNode map[int32][]int32                  // node → partitions
}

func ownershipOf(list []admin.CoordinatorStatus) owners {
	o := owners{owner: map[int32]admin.PartitionOwnership{}, nodeOf: map[int32]int32{}, byNode: map[int32][]int32{}}
	for _, c := range list {
		if c.Live {
			o.live = append(o.live, c.NodeID)
		}
		for _, p := range c.Partitions {
			o.owner[p.Partition] = p
			o.nodeOf[p.Partition] = c.NodeID
			o.byNode[c.NodeID] = append(o.byNode[c.NodeID], p.Partition)
		}
	}
	return o
}

// ownershipAt reads node via's view of the ownership.
func (sc *scaleCluster) ownershipAt(ctx context.Context, via int32) (owners, error) {
	list, err := sc.coordinators(ctx, via)
	if err != nil {
		return owners{}, err
	}
	return ownershipOf(list), nil
}

// waitBalanced waits until exactly the coordinators live are live (in the
// view of each of them), own every partition between them, each at least
// its share (partitions / len(live), rounded down: the balanced rule is
// done moving), and each serves what it owns. It returns the ownership.
func (sc *scaleCluster) waitBalanced(ctx context.Context, live ...int32) owners {
	sc.t.Helper()
	var last string
	for {
		o, why := sc.balanced(ctx, live)
		if why == "" {
			return o
		}
		last = why
		select {
		case <-ctx.Done():
			sc.t.Fatalf("coordinators %v never balanced: %s", live, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// balanced returns the ownership when waitBalanced's condition holds, or
// why not.
func (sc *scaleCluster) balanced(ctx context.Context, live []int32) (owners, string) {
	var o owners
	for _, id := range live {
		list, err := sc.coordinators(ctx, id)
		if err != nil {
			return o, err.Error()
		}
		o = ownershipOf(list)
		if !slices.Equal(o.live, live) {
			return o, fmt.Sprintf("node %d sees live %v", id, o.live)
		}
		if len(o.owner) != int(sc.parts) {
			return o, fmt.Sprintf("node %d sees %d of %d partitions owned", id, len(o.owner), sc.parts)
		}
		for _, c := range list {
			if !slices.Contains(live, c.NodeID) && len(c.Partitions) > 0 {
				return o, fmt.Sprintf("node %d sees node %d own %d partitions", id, c.NodeID, len(c.Partitions))
			}
			if c.Live && len(c.Partitions) < int(sc.parts)/len(live) {
				return o, fmt.Sprintf("node %d sees node %d own %d partitions", id, c.NodeID, len(c.Partitions))
			}
			if c.Self && c.Serving != len(c.Partitions) {
				return o, fmt.Sprintf("node %d serves %d of its %d partitions", id, c.Serving, len(c.Partitions))
			}
		}
	}
	return o, ""
}

// partitionOf is a transactional id's __transaction_state partition.
func (sc *scaleCluster) partitionOf(id string) int32 {
	return cluster.TransactionPartitionFor(id, sc.parts)
}

// anyLive is a coordinator whose process runs (for admin queries).
func (sc *scaleCluster) anyLive() int32 {
	for id := range int32(scaleCoordinators) {
		select {
		case <-sc.Coords[id].done:
		default:
			return id
		}
	}
	sc.t.Fatal("no coordinator runs")
	return -1
}

// dumpLogs prints the tail of every process log (after a failure).
func (sc *scaleCluster) dumpLogs() {
	paths, _ := filepath.Glob(filepath.Join(sc.dir, "*.log"))
	sort.Strings(paths)
	for _, p := range paths {
		sc.t.Logf("--- %s\n%s", p, tail(p))
	}
}

// waitMoved waits until node via sees every partition victim owned in
// before owned by another node at a higher coordinator epoch, and returns
// when it first did.
func (sc *scaleCluster) waitMoved(ctx context.Context, via, victim int32, before owners) time.Time {
	sc.t.Helper()
	lost := before.byNode[victim]
	var why string
	for {
		o, err := sc.ownershipAt(ctx, via)
		why = ""
		if err != nil {
			why = err.Error()
		}
		for _, p := range lost {
			if why != "" {
				break
			}
			now, ok := o.owner[p]
			switch {
			case !ok:
				why = fmt.Sprintf("partition %d has no owner", p)
			case o.nodeOf[p] == victim:
				why = fmt.Sprintf("partition %d still owned by %d", p, victim)
			case now.Epoch <= before.owner[p].Epoch:
				why = fmt.Sprintf("partition %d at epoch %d, was %d", p, now.Epoch, before.owner[p].Epoch)
			}
		}
		if why == "" {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			sc.t.Fatalf("partitions of coordinator %d never moved (view of %d): %s", victim, via, why)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// epochsOf formats partitions with their owner and epoch, for logs.
func epochsOf(o owners, ps []int32) string {
	ps = slices.Clone(ps)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d:%d", p, o.nodeOf[p], o.owner[p].Epoch)
	}
	return b.String()
}
