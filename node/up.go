package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kversion"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wire"
)

// EmbeddedConfig configures `txncoord up`: every node in one process.
type EmbeddedConfig struct {
	File                   *cluster.File
	DataDir                string
	AdminListen            string // "" = no admin API
	MarkerVersionDiscovery bool
	// MarkerRequestTimeout bounds one WriteTxnMarkers (0: 30 s).
	MarkerRequestTimeout time.Duration
	UnsafeNoSync         bool
	// WALFS, optional, is the process log's file layer (tests: a
	// simulated power loss or a failing disk, wal/waltest); nil is the
	// operating system's.
	WALFS                wal.FS
	RetentionBytes       int64
	ProducerIDExpiration time.Duration // 0: Kafka's one day (LeaderConfig)
	// RetentionCheckInterval: 0 is Kafka's five minutes (LeaderConfig).
	RetentionCheckInterval time.Duration
	// CleanerBackoff: 0 is Kafka's 15 s (LeaderConfig).
	CleanerBackoff time.Duration
	// Listeners, optional, are already-bound listeners by node id (tests
	// bind 127.0.0.1:0 first and write the cluster file from them).
	Listeners map[int32]net.Listener
	Log       zerolog.Logger
	// Limits are every node's listener limits; the nodes share one
	// memory budget (nil Budget: the process's).
	Limits wire.Limits
	// EtcdAddrs, when set, start an embedded etcd under DATA_DIR/etcd on
	// these client and peer addresses (EmbeddedSpec.EmbeddedEtcdAddrs):
	// the one the cluster file's etcd endpoints name.
	EtcdAddrs *[2]string
	// LeaseTTL overrides the cluster file's etcd lease (0: the file's).
	LeaseTTL time.Duration
	// GroupTimeouts are the group coordinator's timeouts (zero: Kafka's
	// defaults); tests shorten the share-group session with them.
	GroupTimeouts groups.Timeouts
}

// Embedded is a running in-process cluster.
type Embedded struct {
	View *cluster.View
	// Coordinator is node 0: the controller and the group coordinator,
	// or with several coordinators one of them (Coordinators), which
	// hold those roles by etcd leases, and the one serving the admin API.
	Coordinator  *Coordinator
	Coordinators []*Coordinator
	Leaders      []*Leader
	Admin        *admin.Server
	Metrics      *prometheus.Registry
	// Faults are the faults injected on demand into every node of the
	// process (the admin API's /v1/faults).
	Faults *faults.Set
	// Requests are every node's per-API series.
	Requests *wire.RequestMetrics
	// Shared is the process's store: one log and one bbolt file every
	// node writes in.
	Shared *storage.Store
	// Controller owns the cluster's topics; it changes the one View every
	// node of the process answers from, so they all show a change at once.
	// nil with several coordinators on etcd: the coordinator holding the
	// controller's lease runs it (on the same View).
	Controller *topics.Controller
	cfg        EmbeddedConfig
	inProcess  *inProcessCoordinator
	// byNode are the in-process clients of every coordinator (several
	// coordinators: the leaders route each id to its owner).
	byNode     map[int32]*inProcessCoordinator
	etcd       *EmbeddedEtcd
	etcdClient *clientv3.Client
	// etcdStore is the coordinators' one txnetcd.Store (nil without
	// etcd): one writer for the partitions of all of them.
	etcdStore *txnetcd.Store
	// served maps a cluster file address to the running server of the
	// leader that listens on it itself (not behind a proxy): the marker
	// sender reaches those leaders in-process. RestartLeader updates it
	// while the sender may be dialing.
	servedMu sync.Mutex
	served   map[string]*wire.Server
	// leadersMu guards Leaders against RestartLeader while a deleted
	// topic's data is dropped; coordsMu guards Coordinators against a
	// killed coordinator's restart.
	leadersMu sync.Mutex
	coordsMu  sync.Mutex
	// backend is node 0's admin backend (nil while a fault kills it).
	backend atomic.Pointer[admin.Backend]
}

// currentBackend is node 0's admin backend, nil while it is killed.
func (e *Embedded) currentBackend() admin.Backend {
	if b := e.backend.Load(); b != nil {
		return *b
	}
	return nil
}

// partitionLeaders are the leaders of this process's partitions by node
// id: every leader node's and every coordinator's (each a combined node).
func (e *Embedded) partitionLeaders() map[int32]*leaderstub.Leader {
	e.leadersMu.Lock()
	out := make(map[int32]*leaderstub.Leader, len(e.Leaders)+len(e.Coordinators))
	for _, l := range e.Leaders {
		out[l.Node.NodeID] = l.Leader
	}
	e.leadersMu.Unlock()
	e.coordsMu.Lock()
	defer e.coordsMu.Unlock()
	for _, co := range e.Coordinators {
		if co.Partitions != nil {
			out[co.Node.NodeID] = co.Partitions
		}
	}
	return out
}

// cleanableRatio asks this process's leaders for a partition's cleanable
// ratio (admin API topics).
func (e *Embedded) cleanableRatio(topic string, partition int32) (float64, bool) {
	for _, l := range e.partitionLeaders() {
		if r, ok := l.CleanableRatio(topic, partition); ok {
			return r, true
		}
	}
	return 0, false
}

// dropTopic is the view's OnTopicRemoved hook: every leader drops the
// deleted topic's partitions.
func (e *Embedded) dropTopic(t cluster.Topic) {
	e.leadersMu.Lock()
	defer e.leadersMu.Unlock()
	for _, l := range e.Leaders {
		if err := l.Leader.DropTopic(t.Name); err != nil {
			e.cfg.Log.Error().Err(err).Str("topic", t.Name).Int32("leader", l.Node.NodeID).Msg("drop a deleted topic's data")
		}
	}
}

// serve records (srv non-nil) or forgets leader n's server as the one
// answering n's cluster file address, if it is bound to that address.
func (e *Embedded) serve(n cluster.Node, srv *wire.Server) {
	e.servedMu.Lock()
	defer e.servedMu.Unlock()
	if e.served == nil {
		e.served = map[string]*wire.Server{}
	}
	delete(e.served, n.Addr)
	if srv != nil && srv.Addr().String() == n.Addr {
		e.served[n.Addr] = srv
	}
}

// inProcessLeader is CoordinatorConfig.InProcessLeader.
func (e *Embedded) inProcessLeader(addr string) *wire.Server {
	e.servedMu.Lock()
	defer e.servedMu.Unlock()
	return e.served[addr]
}

// NewMetrics returns a registry with the Go runtime and process collectors
// and the Kafka listeners' (wire.Collector: connections, the request budget).
func NewMetrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), wire.Collector())
	return reg
}

// StartEmbedded starts the leaders, then the coordinator (which resends
// the markers of recovered Prepare* transactions to those leaders), then
// the admin API. On error everything already started is stopped.
func StartEmbedded(cfg EmbeddedConfig) (_ *Embedded, err error) {
	if cfg.UnsafeNoSync {
		cfg.Log.Warn().Msg("UNSAFE: --unsafe-no-fsync is on: acknowledged transactions and records are NOT durable; use only for throwaway test clusters")
	}
	e := &Embedded{View: cluster.NewView(cfg.File), Metrics: NewMetrics(), cfg: cfg}
	e.Requests = wire.NewRequestMetrics(e.Metrics)
	defer func() {
		if err != nil {
			e.Stop(context.Background())
		}
	}()
	inView := func(id int32) bool { _, ok := e.View.Node(id); return ok }
	e.Faults = faults.New(inView, inView, e.Metrics, cfg.Log)
	e.Faults.SetLifecycle(e.killLifecycle())
	if e.Shared, err = openSharedStore(cfg.DataDir, cfg.UnsafeNoSync, cfg.WALFS, e.Metrics, cfg.Log); err != nil {
		return nil, err
	}
	// The controller first: the view holds every topic before a leader
	// recovers. A leader's recovered topic the controller does not know
	// (a data dir of the release before it) is adopted; one it deleted
	// (a crash before the leader's drop was durable) is dropped.
	// With several coordinators on etcd the controller's records are in
	// etcd (the holder of its lease opens it): the view shows them now.
	e.byNode = map[int32]*inProcessCoordinator{}
	for _, n := range e.View.Coordinators() {
		e.byNode[n.NodeID] = newInProcessCoordinator(e.View, e.Shared)
	}
	e.inProcess = e.byNode[e.View.Coordinator().NodeID]
	if err := e.startEtcd(); err != nil {
		return nil, err
	}
	if e.etcdClient != nil {
		if err := e.openLeasedController(); err != nil {
			return nil, err
		}
	} else {
		if e.Controller, err = topics.Open(topics.Config{View: e.View, Store: e.Shared, Log: cfg.Log}); err != nil {
			return nil, err
		}
		e.View.SetCreator(func(name string) (cluster.Topic, error) { return e.Controller.Adopt(name, -1) })
	}
	e.View.OnTopicRemoved(e.dropTopic)
	for _, l := range cfg.File.Leaders {
		ln, err := StartLeader(e.leaderConfig(l.NodeID, "", cfg.Listeners[l.NodeID], cfg.Log))
		if err != nil {
			return nil, err
		}
		e.leadersMu.Lock()
		e.Leaders = append(e.Leaders, ln)
		e.leadersMu.Unlock()
		e.serve(ln.Node, ln.Server)
		for name := range ln.Leader.HeldTopics() {
			if _, ok := e.View.Known(name); !ok {
				if err := ln.Leader.DropTopic(name); err != nil {
					return nil, err
				}
			}
		}
	}
	if e.Controller != nil {
		e.View.SetCreator(e.Controller.AutoCreate)
	} else {
		e.View.SetCreator(e.autoCreate)
	}
	for _, n := range e.View.Coordinators() {
		co, err := StartCoordinator(e.coordinatorConfig(n.NodeID, cfg.Listeners[n.NodeID]))
		if err != nil {
			return nil, err
		}
		e.Coordinators = append(e.Coordinators, co)
		e.byNode[n.NodeID].bind(co.Server)
		if n.NodeID == e.View.Coordinator().NodeID {
			e.Coordinator = co
		}
	}
	// Markers for __consumer_offsets go to the group coordinator's node,
	// in-process like a leader's: with several coordinators, whichever
	// holds it.
	for _, co := range e.Coordinators {
		e.serve(co.Node, co.Server)
	}
	e.followGroupHolder()
	e.followController()
	for _, co := range e.Coordinators {
		co.peers = e.coordinatorByID
		co.Cleanable = e.cleanableRatio
	}
	backend := e.Coordinator.AdminBackend()
	e.backend.Store(&backend)
	e.Metrics.MustRegister(admin.LagCollectorOf(e.currentBackend))
	if cfg.AdminListen != "" {
		token, open, err := AdminToken(cfg.File)
		if err != nil {
			return nil, err
		}
		e.Admin, err = admin.Start(cfg.AdminListen, backend, e.Metrics, admin.Auth{Token: token, Open: open}, cfg.Log)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
		err = e.Coordinator.PublishAdminURL(ctx, e.Admin.URL())
		cancel()
		if err != nil {
			cfg.Log.Warn().Err(err).Msg("admin API URL not published in etcd: other coordinators cannot forward aborts to this one")
		}
	}
	return e, nil
}

// coordinatorConfig is how the embedded cluster runs coordinator id: in
// the shared store, reaching the leaders in-process.
func (e *Embedded) coordinatorConfig(id int32, ln net.Listener) CoordinatorConfig {
	cfg := e.cfg
	return CoordinatorConfig{
		View: e.View, DataDir: cfg.DataDir, Shared: e.Shared, MarkerVersionDiscovery: cfg.MarkerVersionDiscovery,
		MarkerRequestTimeout: cfg.MarkerRequestTimeout, UnsafeNoSync: cfg.UnsafeNoSync, Listener: ln, Log: cfg.Log, Metrics: e.coordinatorMetrics(id),
		InProcessLeader: e.inProcessLeader, Limits: cfg.Limits, Faults: e.Faults, Requests: e.Requests, Controller: e.Controller,
		NodeID: id, Etcd: e.etcdClient, EtcdStore: e.etcdStore, LeaseTTL: cfg.LeaseTTL, Forward: e.forwardFrom(id), TxnCoordinators: e.txnClients(),
		Shares: embeddedShares{e}, GroupTimeouts: cfg.GroupTimeouts,
		Partitions: PartitionSettings{RetentionBytes: cfg.RetentionBytes, ProducerIDExpiration: cfg.ProducerIDExpiration,
			RetentionCheckInterval: cfg.RetentionCheckInterval, CleanerBackoff: cfg.CleanerBackoff,
			Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"node": fmt.Sprint(id)}, e.Metrics)},
	}
}

// leaderConfig is how the embedded cluster runs leader id: in the shared
// file, reaching the coordinator in-process.
func (e *Embedded) leaderConfig(id int32, kafkaVersion string, ln net.Listener, log zerolog.Logger) LeaderConfig {
	return LeaderConfig{
		View: e.View, NodeID: id, KafkaVersion: kafkaVersion, DataDir: e.cfg.DataDir, Shared: e.Shared,
		RetentionBytes: e.cfg.RetentionBytes, ProducerIDExpiration: e.cfg.ProducerIDExpiration,
		RetentionCheckInterval: e.cfg.RetentionCheckInterval, CleanerBackoff: e.cfg.CleanerBackoff, UnsafeNoSync: e.cfg.UnsafeNoSync, Listener: ln, Log: log,
		Metrics:     prometheus.WrapRegistererWith(prometheus.Labels{"node": fmt.Sprint(id)}, e.Metrics),
		Coordinator: e.leaderCoordinatorClient(), Limits: e.cfg.Limits, Faults: e.Faults, Requests: e.Requests, Forward: e.forwardFrom(-1),
	}
}

// RestartLeader stops leader id and starts it again, in the same store,
// as kafkaVersion ("" keeps the cluster file's): a rolling upgrade or
// downgrade while the coordinator keeps running. listen binds its listener
// once the old one is closed (nil: the cluster file's address).
func (e *Embedded) RestartLeader(ctx context.Context, id int32, kafkaVersion string, listen func() (net.Listener, error), log zerolog.Logger) error {
	for i, l := range e.Leaders {
		if l.Node.NodeID != id {
			continue
		}
		e.serve(l.Node, nil)
		if err := l.Stop(ctx); err != nil {
			log.Warn().Err(err).Int32("leader", id).Msg("stop before restart")
		}
		var ln net.Listener
		if listen != nil {
			var err error
			if ln, err = listen(); err != nil {
				return fmt.Errorf("restart leader %d: %w", id, err)
			}
		}
		nl, err := StartLeader(e.leaderConfig(id, kafkaVersion, ln, log))
		if err != nil {
			return fmt.Errorf("restart leader %d: %w", id, err)
		}
		e.leadersMu.Lock()
		e.Leaders[i] = nl
		e.leadersMu.Unlock()
		e.serve(nl.Node, nl.Server)
		return nil
	}
	return fmt.Errorf("no leader %d", id)
}

// Bootstrap is the address clients bootstrap from (the coordinator's).
func (e *Embedded) Bootstrap() string { return e.controller().Server.Addr().String() }

// controller is node 0's running coordinator (a restart replaces it).
func (e *Embedded) controller() *Coordinator {
	e.coordsMu.Lock()
	defer e.coordsMu.Unlock()
	return e.Coordinator
}

// Stop stops the admin API, the coordinators, then the leaders, then
// the embedded etcd.
func (e *Embedded) Stop(ctx context.Context) error {
	var errs []error
	if e.Admin != nil {
		errs = append(errs, e.Admin.Shutdown(ctx))
	}
	// A paused node or held markers would keep the nodes from stopping.
	e.Faults.Close()
	for _, co := range e.Coordinators {
		errs = append(errs, co.Stop(ctx))
	}
	for _, l := range e.Leaders {
		errs = append(errs, l.Stop(ctx))
	}
	if e.Controller != nil {
		errs = append(errs, e.Controller.Close())
	}
	if e.Shared != nil {
		errs = append(errs, e.Shared.Close())
	}
	if e.etcdClient != nil {
		// The in-process client's Close reports its own cancellation.
		if err := e.etcdClient.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	if e.etcd != nil {
		e.etcd.Close()
	}
	return errors.Join(errs...)
}

// securityOf returns the listener security and the inter-node dial settings
// of the cluster file (nil and zero when it has no security section).
func securityOf(v *cluster.View) (*wire.SecurityConfig, wire.DialConfig, error) {
	sec, err := v.File().Security.Server()
	if err != nil {
		return nil, wire.DialConfig{}, fmt.Errorf("security: %w", err)
	}
	if sec != nil {
		// The controller's ACLs and SCRAM credentials, in force on every
		// listener of the process as soon as a change is durable.
		sec.Authorizer = v.AuthMeta().Authorizer(sec.Authorizer, sec.SuperUsers)
		if sec.SASL != nil {
			sec.SASL.Credentials = v.AuthMeta().Credentials(sec.SASL.Credentials)
		}
	}
	dial, err := v.File().Security.Dial()
	if err != nil {
		return nil, wire.DialConfig{}, fmt.Errorf("security: %w", err)
	}
	return sec, dial, nil
}

// relaySCRAM makes a node whose process is not the controller's
// authenticate the controller's SCRAM users (created with
// AlterUserScramCredentials, kept by the controller) by relaying their
// exchange to it, at the address controller names at each login (node
// 0, or the holder of the controller's lease); the credentials file's
// users stay local.
func relaySCRAM(sec *wire.SecurityConfig, controller func() (string, error), dial wire.DialConfig) {
	if sec != nil && sec.SASL != nil {
		sec.SASL.Relay = wire.DialSASLRelayTo(controller, dial)
	}
}

// AdminToken is the admin API's bearer token ("" when none is configured)
// and the paths left open without it.
func AdminToken(f *cluster.File) (token string, open []string, err error) {
	if f.Security == nil {
		return "", nil, nil
	}
	token, err = f.Security.AdminToken()
	if f.Security.OpenMetrics {
		open = []string{"/metrics", "/healthz", "/readyz"}
	}
	return token, open, err
}

// listen starts a node's Kafka listener: the handlers every node serves
// (Metadata, FindCoordinator; ApiVersions is built into wire) plus the
// role's own, advertised within the node's version profile.
func listen(v *cluster.View, self cluster.Node, profile *kversion.Versions, ln net.Listener,
	sec *wire.SecurityConfig, limits wire.Limits, injected *faults.Set, requests *wire.RequestMetrics, log zerolog.Logger, registerRole func(*wire.Registry)) (*wire.Server, error) {
	reg := wire.NewRegistry()
	v.RegisterMetadata(reg)
	registerRole(reg)
	if _, _, ok := reg.Range(10); !ok { // with several coordinators the role answers the owner
		v.RegisterFindCoordinator(reg)
	}
	// DESCRIBE on the group or transactional id, whoever answers.
	reg.Wrap(10, cluster.GuardFindCoordinator)
	topics.RegisterNotController(reg)   // a leader: clients go to the controller
	if _, _, ok := reg.Range(32); !ok { // every node describes configs, as in Kafka
		topics.RegisterDescribeConfigs(reg, v, self)
	}
	if _, _, ok := reg.Range(29); !ok && v.AuthMeta().Attached() { // the controller's process
		v.AuthMeta().Register(reg)
	}
	v.RegisterDescribeCluster(reg)
	v.RegisterDescribeTopicPartitions(reg)
	v.RegisterListConfigResources(reg)
	cluster.RegisterNoLogDirs(reg) // a node without partitions: no log dirs
	cluster.RegisterNotServed(reg, leaderstub.APIs)
	cluster.RegisterNotServed(reg, coordinator.APIs)
	groups.RegisterNotCoordinator(reg, v.GroupCoordinator().KafkaVersion)
	return wire.Start(wire.Config{
		Addr:      self.Addr,
		Listener:  ln,
		Registry:  reg,
		Security:  sec,
		Profile:   profile,
		Features:  func() wire.Features { return v.Features(self.KafkaVersion) },
		ClusterID: v.ClusterID(),
		NodeID:    self.NodeID,
		Log:       log,
		Limits:    limits,
		Faults:    injected.Node(self.NodeID),
		Requests:  requests.Node(self.NodeID),
		// The controller's node unwraps the requests other nodes
		// forward with their clients' principals: node 0, or any
		// coordinator on etcd (the holder of the controller's lease).
		Envelope: isCoordinator(v, self) && (len(v.Etcd().Endpoints) > 0 || v.AuthMeta().Attached() && self.NodeID == v.Coordinator().NodeID),
	})
}

// isCoordinator reports whether self is one of v's coordinators.
func isCoordinator(v *cluster.View, self cluster.Node) bool {
	for _, n := range v.Coordinators() {
		if n.NodeID == self.NodeID {
			return true
		}
	}
	return false
}

// requestMetrics is a node's per-API series: the process's shared ones,
// or new ones in its registry (none without a registry).
func requestMetrics(shared *wire.RequestMetrics, reg prometheus.Registerer) *wire.RequestMetrics {
	if shared != nil || reg == nil {
		return shared
	}
	return wire.NewRequestMetrics(reg)
}
