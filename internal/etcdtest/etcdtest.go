package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"

	"github.com/txncoord/txncoord/internal/freeport"
)

// Timing of the members. A 25 ms heartbeat and a 250 ms election timeout
// (randomized by Raft up to twice that) keep elections short while leaving
// room for a loaded 2-core machine under -race: a starved member misses a
// few heartbeats without forcing an election. A single member elects itself
// after its first election timeout, so it gets a shorter one.
const (
	tickMs           = 25
	electionMs       = 250
	singleElectionMs = 50
)

// Cluster is a set of embedded etcd members started for one test.
type Cluster struct {
	t       testing.TB
	token   string
	initial string // the initial-cluster string every member is started with

	mu      sync.Mutex
	members []*member
	clients []*clientv3.Client
}

type member struct {
	name      string
	dir       string
	peerURL   url.URL
	listenURL url.URL // etcd's own client listener
	clientURL url.URL // the proxy in front of it, which clients dial
	proxy     *proxy
	etcd      *embed.Etcd // nil while the member is down
	started   bool        // started at least once (a restart joins as "existing")
}

// Start starts n members, waits until they serve, and stops them when the
// test ends. It fails the test if they cannot start.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	quietGRPC()
	var c *Cluster
	var err error
	// The ports from freeport are released before etcd binds them, so
	// another test may take one in between; a fresh run is then tried.
	for range 3 {
		c, err = tryStart(t, n)
		if err == nil {
			break
		}
		t.Logf("etcdtest: start: %v (retrying on other ports)", err)
	}
	if err != nil {
		t.Fatalf("etcdtest: start %d members: %v", n, err)
	}
	t.Cleanup(c.close)
	return c
}

func tryStart(t testing.TB, n int) (*Cluster, error) {
	base, err := freeport.Run(3 * n)
	if err != nil {
		return nil, err
	}
	root := t.TempDir()
	c := &Cluster{t: t, token: fmt.Sprintf("etcdtest-%d", base)}
	var initial []string
	for i := range n {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			dir:       filepath.Join(root, fmt.Sprintf("m%d", i)),
			peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", base+3*i)},
			listenURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", base+3*i+1)},
			clientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", base+3*i+2)},
		}
		m.proxy = &proxy{addr: m.clientURL.Host, target: m.listenURL.Host}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	c.initial = strings.Join(initial, ",")

	// Every member must be starting before any can elect a leader, so they
	// start together and are waited for together.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range c.members {
		wg.Go(func() { errs[i] = c.startMember(i) })
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			c.close()
			return nil, e
		}
	}
	return c, nil
}

func (c *Cluster) config(m *member) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.ListenClientUrls = []url.URL{m.listenURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.InitialCluster = c.initial
	cfg.InitialClusterToken = c.token
	cfg.ClusterState = embed.ClusterStateFlagNew
	if m.started {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.TickMs = tickMs
	cfg.ElectionMs = electionMs
	if len(c.members) == 1 {
		cfg.TickMs, cfg.ElectionMs = 10, singleElectionMs
	}
	cfg.UnsafeNoFsync = true // test data: durability of etcd itself is not under test
	cfg.EnableGRPCGateway = false
	cfg.ListenMetricsUrls = nil
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger())
	return cfg
}

// logger is etcd's own log: silent unless ETCDTEST_LOG is set (then
// warnings and errors go to stderr).
func logger() *zap.Logger {
	if os.Getenv("ETCDTEST_LOG") == "" {
		return zap.NewNop()
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	lg, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg
}

var quietOnce sync.Once

// quietGRPC keeps grpc's own logging (reconnect attempts to a killed member)
// out of test output; etcd's client would otherwise print it.
func quietGRPC() {
	quietOnce.Do(func() {
		if os.Getenv("ETCDTEST_LOG") == "" {
			grpclog.SetLoggerV2(grpclog.NewLoggerV2(discard{}, discard{}, discard{}))
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// startMember starts member i and waits until it serves (it has joined a
// quorum) or fails.
func (c *Cluster) startMember(i int) error {
	m := c.members[i]
	e, err := embed.StartEtcd(c.config(m))
	if err != nil {
		return fmt.Errorf("member %s: %w", m.name, err)
	}
	if err := m.proxy.start(); err != nil {
		e.Server.HardStop()
		e.Close()
		return fmt.Errorf("member %s: client proxy: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		m.proxy.cut()
		e.Close()
		return fmt.Errorf("member %s: %w", m.name, err)
	case <-time.After(30 * time.Second):
		m.proxy.cut()
		e.Close()
		return fmt.Errorf("member %s: not ready after 30s", m.name)
	}
	c.mu.Lock()
	m.etcd, m.started = e, true
	c.mu.Unlock()
	return nil
}

// Size is the number of members, running or not.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints are the client URLs of every member, running or not.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL.String())
	}
	return eps
}

// Endpoint is member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.members[i].clientURL.String() }

// Running reports whether member i is up.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].etcd != nil
}

// Client is a client of every member, closed when the test ends. Its dial
// timeout is short, so an operation against a cluster without quorum fails
// with the caller's context rather than hanging on a dial.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(c.ClientConfig())
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl
}

// ClientConfig is the configuration Client uses, for a caller that makes
// and closes its own client (one it cancels or closes to simulate a
// partitioned process).
func (c *Cluster) ClientConfig() clientv3.Config {
	return clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	}
}

// Stop stops member i gracefully: a leader hands its leadership to another
// member first, as a planned restart would.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	e := c.members[i].etcd
	c.members[i].etcd = nil
	c.mu.Unlock()
	if e == nil {
		c.t.Fatalf("etcdtest: stop %s: not running", c.members[i].name)
	}
	e.Close()
	c.members[i].proxy.cut()
}

// Kill stops member i abruptly, as a crash would: Raft stops at once with
// no leadership transfer, then its listeners and connections are closed
// (in-process this is the nearest to SIGKILL; its data stays on disk).
// Its clients' connections are cut first, so they fail over at once.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.mu.Lock()
	e := c.members[i].etcd
	c.members[i].etcd = nil
	c.mu.Unlock()
	if e == nil {
		c.t.Fatalf("etcdtest: kill %s: not running", c.members[i].name)
	}
	c.members[i].proxy.cut()
	e.Server.HardStop()
	e.Close()
}

// Restart starts member i again on its own ports and data. It returns
// when the member has started; with no quorum among the running members
// it returns without waiting for one (the member serves once quorum is
// back).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Running(i) {
		c.t.Fatalf("etcdtest: restart %s: already running", c.members[i].name)
	}
	m := c.members[i]
	e, err := embed.StartEtcd(c.config(m))
	if err != nil {
		c.t.Fatalf("etcdtest: restart %s: %v", m.name, err)
	}
	if err := m.proxy.start(); err != nil {
		e.Server.HardStop()
		e.Close()
		c.t.Fatalf("etcdtest: restart %s: client proxy: %v", m.name, err)
	}
	c.mu.Lock()
	m.etcd = e
	c.mu.Unlock()
}

// WaitReady waits until every running member serves a linearizable read
// (there is a leader and quorum), or fails the test after timeout.
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	cl, err := clientv3.New(c.ClientConfig())
	if err != nil {
		c.t.Fatalf("etcdtest: client: %v", err)
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Get(ctx, "etcdtest-ready")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcdtest: cluster not ready after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) close() {
	c.mu.Lock()
	clients := c.clients
	c.clients = nil
	var running []*embed.Etcd
	for _, m := range c.members {
		m.proxy.cut()
		if m.etcd != nil {
			running = append(running, m.etcd)
			m.etcd = nil
		}
	}
	c.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
	// Hard stops first, so that no member waits for a leadership transfer
	// to peers that are going away too.
	var wg sync.WaitGroup
	for _, e := range running {
		wg.Go(func() {
			e.Server.HardStop()
			e.Close()
		})
	}
	wg.Wait()
}
