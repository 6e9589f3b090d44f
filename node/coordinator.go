package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/txnrouter"
	"github.com/txncoord/txncoord/txntimeline"
	"github.com/txncoord/txncoord/wire"
)

// CoordinatorConfig configures the coordinator node.
type CoordinatorConfig struct {
	View    *cluster.View
	DataDir string
	// MarkerVersionDiscovery negotiates the WriteTxnMarkers version per
	// leader (KIP-1228 as fixed in Kafka 4.2.1); false always sends v2,
	// reproducing Kafka 4.2.0.
	MarkerVersionDiscovery bool
	// MarkerRequestTimeout bounds one WriteTxnMarkers to a leader (0:
	// the sender's default, 30 s, Kafka's request.timeout.ms).
	MarkerRequestTimeout time.Duration
	UnsafeNoSync         bool
	// Shared, when set, holds the transaction log as its space
	// "coordinator" (`txncoord up`); the caller closes it.
	Shared   *storage.Store
	Listener net.Listener // optional: a listener already bound
	// InProcessLeader, when set, returns the running server of a leader in
	// this process that serves addr (its cluster file address) itself, or
	// nil: markers to such a leader are sent in-process (wire.LocalClient)
	// instead of over TCP (`txncoord up`).
	InProcessLeader func(addr string) *wire.Server
	Log             zerolog.Logger
	Metrics         prometheus.Registerer
	// Limits are the listener's limits (wire.Limits).
	Limits wire.Limits
	// Faults, optional, are the process's faults injected on demand
	// (the admin API's /v1/faults): this node's listener asks them about
	// every request while one is set.
	Faults *faults.Set
	// Requests, optional, are the process's per-API series (`txncoord
	// up` shares one between its nodes); nil makes them in Metrics.
	Requests *wire.RequestMetrics
	// GroupTimeouts are the group coordinator's timeouts (zero values:
	// its defaults).
	GroupTimeouts groups.Timeouts
	// Shares, when set, reaches the share partitions at the leaders of
	// this process (`txncoord up`): share-group members' releases and the
	// share-group offset APIs. Nil (a coordinator process of its own):
	// the leaders are asked over the Kafka protocol (remoteShares).
	Shares groups.ShareState
	// Controller, when set, is the topic controller already open in
	// Shared (`txncoord up` opens it before the leaders, which adopt
	// their topics through it); nil opens it here, in the coordinator's
	// store. The caller closes a controller it passed.
	Controller *topics.Controller
	// NodeID is which of the cluster file's coordinators this node is
	// (0..C-1; the single-coordinator form has only 0).
	NodeID int32
	// Etcd, optional, is an etcd client already open (`txncoord up`
	// shares one between its coordinators; the caller closes it); nil
	// dials the cluster file's etcd endpoints when it names some.
	Etcd *clientv3.Client
	// EtcdStore, optional, is the transaction state's store in etcd,
	// shared by the coordinators of one process (`txncoord up`): their
	// partitions' writes then go through one writer, so the writes queued
	// by all of them while an etcd Txn is in flight share the next one
	// (one Raft proposal; each partition's fence still in its If
	// clauses). Nil: a store of this coordinator's own over Etcd.
	EtcdStore *txnetcd.Store
	// LeaseTTL overrides the cluster file's etcd lease_ttl_seconds (0:
	// the file's): how long a dead node keeps its partitions.
	LeaseTTL time.Duration
	// Forward, optional, is how a coordinator other than node 0 (the
	// controller) forwards the controller's requests to it (`txncoord
	// up`: in-process); nil forwards over TCP.
	Forward topics.ForwardFunc
	// TxnCoordinators, optional, is how the group coordinator reaches
	// the transaction coordinator of an id owned by another node
	// (`txncoord up`: in-process); nil dials the coordinators over TCP.
	TxnCoordinators map[int32]coordclient.Client
	// Partitions are the settings of the partitions the node leads as a
	// combined node (those placed on it by hand).
	Partitions PartitionSettings
}

// PartitionSettings are LeaderConfig's settings of the partitions a
// coordinator node leads (zero values: Kafka's defaults, as there).
type PartitionSettings struct {
	RetentionBytes         int64
	ProducerIDExpiration   time.Duration
	RetentionCheckInterval time.Duration
	CleanerBackoff         time.Duration
	// Metrics, optional, receive the partitions' series (nil: the
	// node's Metrics).
	Metrics prometheus.Registerer
}

// Coordinator is a running coordinator node.
type Coordinator struct {
	Node        cluster.Node
	Coordinator *coordinator.Coordinator
	Sender      *markersender.Sender
	Store       *txnlog.BoltStore
	Server      *wire.Server
	// Groups is the group coordinator, served on the same listener, its
	// records in the same store as the transaction log.
	Groups *groups.Coordinator
	// Controller owns the cluster's topics (package topics).
	Controller *topics.Controller
	// Faults are the faults injected on demand into this process's
	// nodes (CoordinatorConfig.Faults), served by its admin API.
	Faults *faults.Set
	// Cleanable, when set (`txncoord up`), is a partition's cleanable
	// ratio from this process's leaders, for the admin API's topics.
	Cleanable func(topic string, partition int32) (float64, bool)
	// Timeline records the recent transactions' steps (coordinator and
	// marker sender) for the admin API.
	Timeline *txntimeline.Recorder
	// Partitions leads the partitions placed on this node: every
	// coordinator is a combined node (cluster.View.PartitionNodes).
	Partitions *leaderstub.Leader

	// The etcd mode (several coordinators); nil otherwise.
	// Coordinator and Store are nil in that mode: the Router runs one
	// coordinator per owned __transaction_state partition. Groups and
	// Controller are nil (their lease holders run them: groups, ctl).
	Router *txnrouter.Router
	Member *ownership.Member
	Etcd   *txnetcd.Store

	view          *cluster.View
	lg            zerolog.Logger
	ownController bool
	ownStore      *storage.Store // the process's store (no Shared): closed last
	etcdClient    *clientv3.Client
	// groups runs a group coordinator instance for each
	// __consumer_offsets partition this node owns (etcd mode; Groups is
	// nil then).
	groups *groupHolder
	// ctl holds the topic controller when this node has its lease (etcd
	// mode; Controller is nil then).
	ctl *controllerHolder
	// peers finds the other coordinators of this process (`txncoord
	// up`); adminToken is the cluster's admin API token.
	peers      func(node int32) *Coordinator
	adminToken string
	closeEtcd  bool
	// partsClient reaches each transactional id's owner for Partitions
	// (etcd mode).
	partsClient coordclient.Client
	follower    *topics.Follower
	// ctlForward sends a request to the holder of the controller's lease
	// (nil on a coordinator that always runs it).
	ctlForward topics.ForwardFunc
	txnClients coordclient.Client
	// partsClosed stops the view's hook from dropping a deleted topic's
	// data in Partitions once it is closed.
	partsClosed *atomic.Bool
}

// markerClientID is the client id of the marker sender's requests.
const markerClientID = "txncoord-markers"

// groupsClientID is the client id of the group coordinator's requests to
// the transaction coordinator (TxnOffsetCommit's AddPartitionsToTxn).
const groupsClientID = "txncoord-groups"

// openTxnLog opens the transaction log: the space "coordinator" of the
// shared file, or DATA_DIR/coordinator/txnlog.db (the transaction log at
// its top level, the controller's space beside it), whose store it also
// returns.
func openTxnLog(cfg CoordinatorConfig) (*txnlog.BoltStore, *storage.Store, error) {
	if cfg.Shared != nil {
		store, err := txnlog.OpenBoltIn(cfg.Shared, "coordinator")
		return store, nil, err
	}
	st, err := openCoordinatorStore(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("txnlog: %w", err)
	}
	store, err := txnlog.OpenBoltIn(st, "")
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return store, st, nil
}

// coordinatorNode is the cluster file's coordinator cfg.NodeID.
func coordinatorNode(cfg CoordinatorConfig) (cluster.Node, error) {
	for _, n := range cfg.View.Coordinators() {
		if n.NodeID == cfg.NodeID {
			return n, nil
		}
	}
	return cluster.Node{}, fmt.Errorf("node id %d is not a coordinator in the cluster file (coordinators are 0..%d)", cfg.NodeID, len(cfg.View.Coordinators())-1)
}

// etcdMode reports whether the coordinators share their state through
// etcd: the cluster file names etcd endpoints (required with several
// coordinators), or the caller passed a client.
func etcdMode(cfg CoordinatorConfig) bool {
	return cfg.Etcd != nil || len(cfg.View.Etcd().Endpoints) > 0
}

// openCoordinatorStore opens a coordinator process's own store,
// DATA_DIR/coordinator/txnlog.db (with several coordinators, node 0's
// topics live there: the same file, so they stay when a cluster moves to
// etcd).
func openCoordinatorStore(cfg CoordinatorConfig) (*storage.Store, error) {
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "coordinator"), 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.DataDir, "coordinator", "txnlog.db")
	st, err := storage.Open(path, storage.Options{NoSync: cfg.UnsafeNoSync, Log: cfg.Log, Kinds: RecordCodecs, BatchKinds: RecordBatchCodecs})
	if err != nil {
		return nil, err
	}
	if cfg.UnsafeNoSync {
		cfg.Log.Warn().Str("path", path).Msg("txnlog: fsync disabled (UnsafeNoSync): acknowledged transactions can be lost on a crash")
	}
	return st, nil
}

// StartCoordinator opens the transaction log, recovers, and starts the
// listener. Start order matters: the sender exists before recovery so the
// markers of every Prepare* transaction can be queued, and it starts only
// once the coordinator can receive its completions. With etcd configured
// it starts the etcd mode instead (startEtcdCoordinator).
func StartCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	self, err := coordinatorNode(cfg)
	if err != nil {
		return nil, err
	}
	profile, err := negotiation.Profile(self.KafkaVersion)
	if err != nil {
		return nil, err
	}
	name := "coordinator"
	if len(cfg.View.Coordinators()) > 1 {
		name = fmt.Sprintf("coordinator-%d", self.NodeID)
	}
	log := cfg.Log.With().Str("node", name).Logger()
	sec, dial, err := securityOf(cfg.View)
	if err != nil {
		return nil, err
	}
	if etcdMode(cfg) {
		return startEtcdCoordinator(cfg, self, profile, sec, dial, log)
	}
	store, own, err := openTxnLog(cfg)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	ctl, ownController := cfg.Controller, false
	closeStores := func() {
		if ownController {
			ctl.Close()
		}
		store.Close()
		if own != nil {
			own.Close()
		}
	}
	if ctl == nil {
		ctl, err = topics.Open(topics.Config{View: cfg.View, Store: own, Log: log})
		if err != nil {
			store.Close()
			own.Close()
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		ownController = true
		cfg.View.SetCreator(ctl.AutoCreate)
	}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(txnlogTotals(store))
		if cfg.Shared == nil { // a process of its own: its log's failure
			watchStoreFailure(cfg.Metrics, store)
		}
	}
	var ownServer atomic.Pointer[wire.Server]
	timeline := txntimeline.New(0)
	sender := newMarkerSender(cfg, self, dial, &ownServer, store.Log(), timeline, log)
	coord, err := coordinator.Open(coordinator.Config{
		Timeline:     timeline,
		NodeID:       self.NodeID,
		KafkaVersion: self.KafkaVersion,
		View:         cfg.View,
		Store:        store,
		Markers:      sender,
		Log:          log,
		Metrics:      cfg.Metrics,
	})
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	sender.Start(coord)
	// The group coordinator reaches the transaction coordinator through
	// this server's handlers in-process, once the server runs.
	var txnClient atomic.Pointer[wire.LocalClient]
	groupStore := cfg.Shared
	if groupStore == nil {
		groupStore = own
	}
	if cfg.Shares == nil {
		cfg.Shares = remoteShares{view: cfg.View, dial: dial}
	}
	grp, err := openGroups(cfg, self, groupStore, func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		cl := txnClient.Load()
		if cl == nil {
			return nil, errCoordinatorNotStarted
		}
		return cl.Do(ctx, req)
	}, log)
	if err != nil {
		sender.Close()
		coord.Close()
		closeStores()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	var parts *leaderstub.Leader
	partsClosed := new(atomic.Bool)
	partsCoordinator := newInProcessCoordinator(cfg.View, groupStore)
	if parts, err = openPartitions(cfg, groupStore, partsCoordinator.leaderClient(), partsClosed, true, log); err != nil {
		sender.Close()
		grp.Close()
		coord.Close()
		closeStores()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	srv, err := listen(cfg.View, self, profile, cfg.Listener, sec, cfg.Limits, cfg.Faults, requestMetrics(cfg.Requests, cfg.Metrics), log, func(reg *wire.Registry) {
		coord.Register(reg)
		grp.Register(reg)
		ctl.Register(reg)
		parts.RegisterBeside(reg)
	})
	if err != nil {
		parts.Close()
		sender.Close()
		grp.Close()
		coord.Close()
		closeStores()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	// The node's partitions reach its transaction coordinator
	// in-process, as the leaders of `txncoord up` do.
	partsCoordinator.bind(srv)
	// The group coordinator's records go to groupStore's log: the
	// transaction coordinator, on the same log, answers its
	// registrations at append (the pending offsets, appended after, are
	// durable only with them).
	txnClient.Store(srv.Local(clusterPrincipal(cfg.View)).WithClientID(groupsClientID).Inline().FromLog(groupStore))
	ownServer.Store(srv)
	co := &Coordinator{view: cfg.View, Faults: cfg.Faults, Timeline: timeline, Groups: grp, Node: self, Coordinator: coord, Sender: sender, Store: store, Server: srv,
		Controller: ctl, ownController: ownController, ownStore: own, Partitions: parts, partsClosed: partsClosed,
		Cleanable: parts.CleanableRatio}
	return co, nil
}

// openPartitions opens the leader of the partitions a coordinator node
// leads as a combined node, in store (its space "leader-<id>", as a leader
// of `txncoord up`), and drops the data of the topics the controller no longer has (a
// crash before a deletion's drop was durable), as the leaders do at start,
// when the view has the controller's topics (dropUnknown). A topic deleted
// later drops its data through the view's hook, while the leader is open.
func openPartitions(cfg CoordinatorConfig, store *storage.Store, coord coordclient.Client, closed *atomic.Bool, dropUnknown bool, log zerolog.Logger) (*leaderstub.Leader, error) {
	ps := cfg.Partitions
	reg := ps.Metrics
	if reg == nil {
		reg = cfg.Metrics
	}
	// The log dir DescribeLogDirs names: a leader's of `txncoord up`, or
	// the coordinator's own where its store is.
	dir := filepath.Join(cfg.DataDir, fmt.Sprintf("leader-%d", cfg.NodeID))
	if cfg.Shared == nil {
		dir = filepath.Join(cfg.DataDir, "coordinator")
	}
	l, err := leaderstub.Open(leaderstub.Config{
		NodeID: cfg.NodeID, KafkaVersion: cfg.View.Coordinator().KafkaVersion, View: cfg.View, Shared: store, DataDir: dir,
		Coordinator: coord, RetentionBytes: ps.RetentionBytes, ProducerIDExpiration: ps.ProducerIDExpiration,
		RetentionCheckInterval: ps.RetentionCheckInterval, CleanerBackoff: ps.CleanerBackoff, Log: log, Metrics: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("partitions of node %d: %w", cfg.NodeID, err)
	}
	for name := range l.HeldTopics() {
		if _, ok := cfg.View.Known(name); !ok && dropUnknown {
			if err := l.DropTopic(name); err != nil {
				l.Close()
				return nil, err
			}
		}
	}
	cfg.View.OnTopicRemoved(func(t cluster.Topic) {
		if closed.Load() {
			return
		}
		if err := l.DropTopic(t.Name); err != nil {
			log.Error().Err(err).Str("topic", t.Name).Msg("drop a deleted topic's data")
		}
	})
	return l, nil
}

// openGroups opens the group coordinator of node self in store; txn
// sends its requests to the transaction coordinator of an id.
func openGroups(cfg CoordinatorConfig, self cluster.Node, store *storage.Store, txn func(context.Context, kmsg.Request) (kmsg.Response, error), log zerolog.Logger) (*groups.Coordinator, error) {
	return groups.Open(groups.Config{NodeID: self.NodeID, View: cfg.View, Store: store, TxnCoordinator: txn,
		Timeouts: cfg.GroupTimeouts, Log: log, Metrics: cfg.Metrics, Shares: cfg.Shares})
}

// newMarkerSender is the node's marker sender. ownServer is this node's
// server once it listens: the markers of __consumer_offsets, whose leader
// is the group coordinator's node, go to it in-process when that is this
// node, in `txncoord up` and in a coordinator process of its own alike,
// never over a TCP connection to itself; so do those of the leaders of
// this process (cfg.InProcessLeader). txnLog is the transaction log's log
// when it is this process's (nil with etcd): the group coordinator of this
// node and the leaders of `txncoord up` append to it too, so they may get
// a Prepare's markers before it is durable, and answer them at append,
// since the Complete record, appended next, is durable only with them.
// With etcd they wait for durability both ways.
func newMarkerSender(cfg CoordinatorConfig, self cluster.Node, dial wire.DialConfig, ownServer *atomic.Pointer[wire.Server], txnLog durable.Log, timeline *txntimeline.Recorder, log zerolog.Logger) *markersender.Sender {
	isOwn := func(addr string) bool { return addr == self.Addr }
	inProcess := func(addr string) *wire.Server {
		if cfg.InProcessLeader != nil {
			return cfg.InProcessLeader(addr)
		}
		return nil
	}
	local := func(srv *wire.Server) negotiation.Transport {
		return srv.Local(clusterPrincipal(cfg.View)).WithClientID(markerClientID).AtCallerVersion().Inline().FromLog(txnLog)
	}
	return markersender.New(markersender.Config{
		CoordinatorVersion: self.KafkaVersion,
		Router:             cfg.View,
		Leaders:            cfg.View.Leaders(),
		Discovery:          cfg.MarkerVersionDiscovery,
		RequestTimeout:     cfg.MarkerRequestTimeout,
		Log:                log,
		Metrics:            cfg.Metrics,
		Faults:             cfg.Faults,
		Timeline:           timeline,
		LeaderLog: func(addr string) durable.Log {
			if isOwn(addr) || inProcess(addr) != nil {
				return txnLog
			}
			return nil
		},
		Dial: func(ctx context.Context, addr string) (negotiation.Transport, error) {
			if isOwn(addr) {
				srv := ownServer.Load()
				if srv == nil {
					// Not listening yet (recovery resends markers before
					// the listener starts): the sender retries.
					return nil, errCoordinatorNotStarted
				}
				return local(srv), nil
			}
			if srv := inProcess(addr); srv != nil {
				return local(srv), nil
			}
			cl, err := wire.DialWith(ctx, addr, markerClientID, dial)
			if err != nil {
				return nil, err
			}
			return cl, nil
		},
	})
}

// Stop stops accepting, finishes in-flight requests until ctx is done, then
// stops the sender and closes the log. Markers still pending are resent
// from the log's Prepare* records at the next start (in the etcd mode, by
// the partitions' next owners).
func (c *Coordinator) Stop(ctx context.Context) error {
	err := c.Server.Shutdown(ctx)
	if c.follower != nil {
		c.follower.Close()
	}
	if c.Router != nil {
		err = errors.Join(err, c.Router.Close())
	}
	c.Sender.Close()
	if c.Member != nil {
		// Closing revokes the lease: the other coordinators take the
		// partitions at once instead of after the TTL.
		err = errors.Join(err, c.Member.Close())
	}
	if c.Groups != nil {
		err = errors.Join(err, c.Groups.Close())
	}
	if c.groups != nil {
		err = errors.Join(err, c.groups.Close())
	}
	if c.ctl != nil {
		err = errors.Join(err, c.ctl.Close())
	}
	if c.Coordinator != nil {
		err = errors.Join(err, c.Coordinator.Close())
	}
	if c.Partitions != nil {
		c.partsClosed.Store(true)
		err = errors.Join(err, c.Partitions.Close())
	}
	if c.Store != nil {
		err = errors.Join(err, c.Store.Close())
	}
	if c.txnClients != nil {
		c.txnClients.Close()
	}
	if c.partsClient != nil {
		c.partsClient.Close()
	}
	if c.ownController {
		err = errors.Join(err, c.Controller.Close())
	}
	if c.ownStore != nil {
		err = errors.Join(err, c.ownStore.Close())
	}
	if c.closeEtcd {
		err = errors.Join(err, c.etcdClient.Close())
	}
	return err
}

// controller is the topic controller this node administers: its own, the
// one whose lease it holds, or (`txncoord up`) the one another
// coordinator of the process holds; nil otherwise.
func (c *Coordinator) controller() *topics.Controller {
	if c.Controller != nil {
		return c.Controller
	}
	if c.ctl == nil {
		return nil
	}
	if cur := c.ctl.Current(); cur != nil {
		return cur
	}
	if c.peers != nil {
		if id, _, ok := c.ctl.Holder(); ok {
			if p := c.peers(id); p != nil && p.ctl != nil {
				return p.ctl.Current()
			}
		}
	}
	return nil
}
