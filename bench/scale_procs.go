package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/freeport"
)

// The procs layout of the scale run: a three-member etcd of separate
// processes (this binary's serve-etcd), three `txncoord coordinator`
// processes and three `txncoord leader` processes, on one cluster file, as
// separate machines would run them; a coordinator is killed by SIGKILL.

// scaleProc is one process of a scale run's server.
type scaleProc struct {
	Name string // coordinator-1, leader-3, etcd-0, up
	Role string // coordinator, leader, etcd, up
	inst *Instance
}

// procsLayout is the procs layout's running processes.
type procsLayout struct {
	etcd, coords, leaders []*Instance
	file                  *cluster.File
	dir                   string
}

// procsEtcdMembers, procsCoordinators and procsLeaders size the layout.
const (
	procsEtcdMembers  = 3
	procsCoordinators = 3
	procsLeaders      = 3
)

// startProcsLayout starts etcd, the coordinators (node 0 first: it raises
// etcd's producer id counter) and the leaders, and waits until the
// coordinators share every __transaction_state partition.
func startProcsLayout(ctx context.Context, self Command, bin, dir, topic string, partitions int) (*procsLayout, error) {
	l := &procsLayout{dir: dir}
	ok := false
	defer func() {
		if !ok {
			l.stop()
		}
	}()
	base, err := freeport.Run(2 * procsEtcdMembers)
	if err != nil {
		return nil, err
	}
	var initial, endpoints []string
	for i := range procsEtcdMembers {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i, base+2*i))
		endpoints = append(endpoints, fmt.Sprintf("http://127.0.0.1:%d", base+2*i+1))
	}
	l.etcd = make([]*Instance, procsEtcdMembers)
	errs := make([]error, procsEtcdMembers)
	var wg sync.WaitGroup
	for i := range procsEtcdMembers {
		wg.Go(func() {
			c := self
			c.Args = append(append([]string(nil), self.Args...), "serve-etcd", "--name", fmt.Sprintf("e%d", i),
				"--data-dir", filepath.Join(dir, fmt.Sprintf("etcd-%d", i)),
				"--peer-url", fmt.Sprintf("http://127.0.0.1:%d", base+2*i), "--client-url", endpoints[i],
				"--initial-cluster", strings.Join(initial, ","), "--token", fmt.Sprintf("bench-%d", base))
			c.EtcdMetrics = endpoints[i] + "/metrics"
			t := Target{Name: fmt.Sprintf("etcd-%d", i), argv: func(string) (Command, error) { return c, nil }}
			l.etcd[i], errs[i] = startFixed(ctx, t, filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}

	nodes, err := freeport.Run(procsCoordinators + procsLeaders)
	if err != nil {
		return nil, err
	}
	f := &cluster.File{ClusterID: "scale", DefaultPartitions: 3, Topics: map[string]int32{topic: int32(partitions)},
		Etcd: &cluster.Etcd{Endpoints: endpoints}}
	for id := range int32(procsCoordinators + procsLeaders) {
		n := cluster.Node{NodeID: id, Addr: "127.0.0.1:" + strconv.Itoa(nodes+int(id)), KafkaVersion: "4.2"}
		if id < procsCoordinators {
			f.Coordinators = append(f.Coordinators, n)
		} else {
			f.Leaders = append(f.Leaders, n)
		}
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	l.file = f
	raw, err := yaml.Marshal(f)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		return nil, err
	}
	start := func(role string, id int32, extra ...string) (*Instance, error) {
		name := fmt.Sprintf("%s-%d", role, id)
		args := append([]string{role, "--cluster", file, "--node-id", strconv.Itoa(int(id)),
			"--data-dir", filepath.Join(dir, name+"-data"),
			// Every client connects from 127.0.0.1 (see scaleMain).
			"--max-connections-per-ip", "-1"}, extra...)
		t := Target{Name: name, argv: func(string) (Command, error) {
			return Command{Path: bin, Args: args, Env: []string{"TXNCOORD_LOG_FORMAT=json", "TXNCOORD_LOG_LEVEL=warn"}}, nil
		}}
		return startFixed(ctx, t, filepath.Join(dir, name+".log"))
	}
	for _, n := range f.Coordinators {
		adminPort, err := freeport.Run(1)
		if err != nil {
			return nil, err
		}
		inst, err := start("coordinator", n.NodeID, "--admin-listen", "127.0.0.1:"+strconv.Itoa(adminPort))
		if err != nil {
			return nil, err
		}
		l.coords = append(l.coords, inst)
	}
	for _, n := range f.Leaders {
		inst, err := start("leader", n.NodeID)
		if err != nil {
			return nil, err
		}
		l.leaders = append(l.leaders, inst)
	}
	if err := l.waitBalanced(ctx, time.Minute); err != nil {
		return nil, err
	}
	ok = true
	return l, nil
}

// startFixed starts t once: its ports are fixed, as the cluster file or
// the other etcd members name them.
func startFixed(ctx context.Context, t Target, logPath string) (*Instance, error) {
	return startOnce(ctx, t, filepath.Dir(logPath), logPath)
}

// waitBalanced waits until every coordinator sees all three live, every
// __transaction_state partition owned, and each serving its share.
func (l *procsLayout) waitBalanced(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	parts := int(cluster.NewView(l.file).TransactionStatePartitions())
	last := "not asked yet"
	for {
		if why := l.unbalanced(ctx, parts); why == "" {
			return nil
		} else {
			last = why
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("coordinators not balanced within %s: %s", within, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (l *procsLayout) unbalanced(ctx context.Context, parts int) string {
	for i, c := range l.coords {
		var list []admin.CoordinatorStatus
		if err := getJSON(ctx, c.AdminURL+"/v1/coordinators", &list); err != nil {
			return err.Error()
		}
		owned := 0
		for _, s := range list {
			owned += len(s.Partitions)
			if !s.Live || len(s.Partitions) < parts/len(l.coords) {
				return fmt.Sprintf("coordinator %d sees node %d live=%v with %d partitions", i, s.NodeID, s.Live, len(s.Partitions))
			}
			if s.Self && s.Serving != len(s.Partitions) {
				return fmt.Sprintf("coordinator %d serves %d of its %d partitions", i, s.Serving, len(s.Partitions))
			}
		}
		if len(list) != len(l.coords) || owned != parts {
			return fmt.Sprintf("coordinator %d sees %d coordinators owning %d of %d partitions", i, len(list), owned, parts)
		}
	}
	return ""
}

func getJSON(ctx context.Context, url string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := httpDo(ctx, http.MethodGet, url, nil, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// bootstrap is the leaders' addresses: the clients never lose them.
func (l *procsLayout) bootstrap() []string {
	var out []string
	for _, n := range l.file.Leaders {
		out = append(out, n.Addr)
	}
	return out
}

func (l *procsLayout) procs() []scaleProc {
	var out []scaleProc
	for i, c := range l.coords {
		out = append(out, scaleProc{Name: fmt.Sprintf("coordinator-%d", i), Role: "coordinator", inst: c})
	}
	for i, c := range l.leaders {
		out = append(out, scaleProc{Name: fmt.Sprintf("leader-%d", l.file.Leaders[i].NodeID), Role: "leader", inst: c})
	}
	for i, c := range l.etcd {
		out = append(out, scaleProc{Name: fmt.Sprintf("etcd-%d", i), Role: "etcd", inst: c})
	}
	return out
}

// server is the layout for RunScale: the first etcd member's /metrics
// (every member commits every proposal), no profile (each process has
// its own CPU from /proc), a coordinator killed by SIGKILL.
func (l *procsLayout) server() *ScaleServer {
	return &ScaleServer{Bootstrap: l.bootstrap(), Procs: l.procs(), EtcdMetricsURL: l.etcd[0].EtcdMetricsURL,
		KillHow: "SIGKILL of the coordinator process",
		Kill:    func(_ context.Context, node int) error { return l.killCoordinator(node) }}
}

// killCoordinator SIGKILLs coordinator node.
func (l *procsLayout) killCoordinator(node int) error {
	if node < 0 || node >= len(l.coords) {
		return fmt.Errorf("no coordinator %d", node)
	}
	return l.coords[node].cmd.Process.Signal(syscall.SIGKILL)
}

// stop stops the leaders, the coordinators, then etcd.
func (l *procsLayout) stop() {
	var wg sync.WaitGroup
	for _, group := range [][]*Instance{l.leaders, l.coords, l.etcd} {
		for _, inst := range group {
			if inst != nil {
				wg.Go(func() { _ = inst.Stop() })
			}
		}
		wg.Wait()
	}
}
