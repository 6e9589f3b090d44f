package integration

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/security"
)

// Options describe an in-process cluster for a test.
type Options struct {
	CoordinatorVersion string   // default "4.2"
	LeaderVersions     []string // default 4.2, 4.2, 4.1
	Topics             map[string]int32
	DefaultPartitions  int32
	// NoDiscovery sends WriteTxnMarkers v2 to every leader (Kafka 4.2.0).
	NoDiscovery bool
	DataDir     string // default t.TempDir()
	Admin       bool   // start the admin API on a free port
	// Proxied puts a faultproxy in front of these leaders: the leader
	// binds 127.0.0.1:0, the proxy targets it, and the cluster file holds
	// the proxy's address, so the coordinator's markers, the leader's
	// peers and clients all go through the proxy.
	Proxied []int32
	// Secure turns on TLS + SASL on every listener and cluster
	// authorization (up --secure's local CA and credentials); Client()
	// then connects as the SCRAM-SHA-512 client user.
	Secure bool
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms;
	// nil is 0 (tests' classic groups rebalance at once).
	GroupInitialRebalanceDelayMs *int32
}

// Cluster is a coordinator and its leaders in the test's process, on
// loopback ports chosen by the kernel.
type Cluster struct {
	*node.Embedded
	Opts Options
	File *cluster.File
	// Proxies are the fault proxies of Options.Proxied, by node id.
	Proxies map[int32]*faultproxy.Proxy
	// realAddrs are the proxied leaders' own listener addresses, kept so
	// that restarts bind the same ones behind the unchanged proxies.
	realAddrs map[int32]string
	// local holds the generated CA and credentials when Secure.
	local *security.Local
	t     testing.TB
}

// StartCluster starts a cluster and stops it when the test ends.
func StartCluster(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.CoordinatorVersion == "" {
		o.CoordinatorVersion = "4.2"
	}
	if o.LeaderVersions == nil {
		o.LeaderVersions = []string{"4.2", "4.2", "4.1"}
	}
	if o.DefaultPartitions == 0 {
		o.DefaultPartitions = 3
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	listeners := map[int32]net.Listener{}
	listen := func(id int32) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		listeners[id] = ln
		return ln.Addr().String()
	}
	f := &cluster.File{
		ClusterID:         cluster.DefaultClusterID,
		Coordinator:       &cluster.Node{NodeID: 0, Addr: listen(0), KafkaVersion: o.CoordinatorVersion},
		DefaultPartitions: o.DefaultPartitions,
		Topics:            o.Topics,
		// Tests' classic groups rebalance at once.
		GroupInitialRebalanceDelayMs: new(int32(0)),
	}
	if o.GroupInitialRebalanceDelayMs != nil {
		f.GroupInitialRebalanceDelayMs = o.GroupInitialRebalanceDelayMs
	}
	c := &Cluster{Opts: o, File: f, Proxies: map[int32]*faultproxy.Proxy{}, realAddrs: map[int32]string{}, t: t}
	for i, v := range o.LeaderVersions {
		id := int32(i + 1)
		addr := listen(id)
		if slices.Contains(o.Proxied, id) {
			addr = c.startProxy(id, addr)
		}
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: addr, KafkaVersion: v})
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("cluster file: %v", err)
	}
	if o.Secure {
		local, err := security.GenerateLocal(filepath.Join(o.DataDir, "security"))
		if err != nil {
			t.Fatalf("security: %v", err)
		}
		c.local, f.Security = local, local.Settings
	}
	c.start(listeners)
	t.Cleanup(c.Stop)
	return c
}

// startProxy starts a fault proxy in front of leader id's real address and
// returns the proxy's address. The proxy outlives restarts of the cluster;
// it closes when the test ends, after the cluster (cleanups run last-in
// first-out and StartCluster registers Stop later).
func (c *Cluster) startProxy(id int32, realAddr string) string {
	c.t.Helper()
	p, err := faultproxy.Start(faultproxy.Config{
		Target: realAddr,
		Log:    zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		c.t.Fatalf("proxy for leader %d: %v", id, err)
	}
	c.t.Cleanup(func() { p.Close() })
	c.Proxies[id] = p
	c.realAddrs[id] = realAddr
	return p.Addr()
}

// Proxy returns the fault proxy in front of leader id.
func (c *Cluster) Proxy(id int32) *faultproxy.Proxy {
	c.t.Helper()
	p, ok := c.Proxies[id]
	if !ok {
		c.t.Fatalf("leader %d is not proxied (Options.Proxied)", id)
	}
	return p
}

// Bootstrap is the coordinator's address, as a seed list.
func (c *Cluster) Bootstrap() []string { return []string{c.File.Coordinator.Addr} }

// rebind listens again on a proxied leader's real address (its cluster
// file address is the proxy's, so the node cannot bind it by itself).
func (c *Cluster) rebind(id int32) net.Listener {
	c.t.Helper()
	addr, ok := c.realAddrs[id]
	if !ok {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.t.Fatalf("rebind leader %d at %s: %v", id, addr, err)
	}
	return ln
}

func (c *Cluster) start(listeners map[int32]net.Listener) {
	c.t.Helper()
	if listeners == nil {
		listeners = map[int32]net.Listener{}
		for id := range c.realAddrs {
			listeners[id] = c.rebind(id)
		}
	}
	adminAddr := ""
	if c.Opts.Admin {
		adminAddr = "127.0.0.1:0"
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{
		File: c.File, DataDir: c.Opts.DataDir, AdminListen: adminAddr,
		MarkerVersionDiscovery: !c.Opts.NoDiscovery, Listeners: listeners,
		Log: zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		for _, ln := range listeners {
			ln.Close()
		}
		c.t.Fatalf("start cluster: %v", err)
	}
	c.Embedded = e
}

// Stop stops every node (idempotent).
func (c *Cluster) Stop() {
	if c.Embedded == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Embedded.Stop(ctx); err != nil {
		c.t.Logf("stop cluster: %v", err)
	}
	c.Embedded = nil
}

// Restart stops every node and starts them again on the same addresses and
// data dir.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.Stop()
	c.start(nil)
}

// Client returns a kgo client bootstrapped at the coordinator, closed when
// the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.File.Coordinator.Addr)}
	if c.local != nil {
		tlsCfg, err := security.ClientTLS(c.local.CAFile, "", "")
		if err != nil {
			c.t.Fatalf("client TLS: %v", err)
		}
		base = append(base, kgo.DialTLSConfig(tlsCfg),
			kgo.SASL(scram.Auth{User: c.local.ClientUser, Pass: c.local.ClientPassword}.AsSha512Mechanism()))
	}
	opts = append(base, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatalf("kgo client: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// RestartLeader stops leader id and starts it again on the same address and
// data dir as kafkaVersion (a rolling upgrade or downgrade); the
// coordinator keeps running.
func (c *Cluster) RestartLeader(id int32, kafkaVersion string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	log := zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.WarnLevel)
	if err := c.Embedded.RestartLeader(ctx, id, kafkaVersion, func() (net.Listener, error) { return c.rebind(id), nil }, log); err != nil {
		c.t.Fatal(err)
	}
}
