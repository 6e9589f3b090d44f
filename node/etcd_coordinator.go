package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kversion"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/txnrouter"
	"github.com/txncoord/txncoord/txntimeline"
	"github.com/txncoord/txncoord/wire"
)

// etcdDialTimeout bounds the first connection to etcd; later operations
// are bounded by their own contexts.
const etcdDialTimeout = 5 * time.Second

// DialEtcd returns a client of the cluster file's etcd endpoints. etcd's
// own logging is off: the coordinator logs what a failed call means.
func DialEtcd(v *cluster.View) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   v.Etcd().Endpoints,
		DialTimeout: etcdDialTimeout,
		Logger:      zap.NewNop(),
	})
}

// startEtcdCoordinator starts coordinator self of a cluster whose
// coordinators share the transactional-id space through etcd:
//
//   - an ownership.Member holds a lease and claims its share of the
//     __transaction_state partitions, with a coordinator epoch from etcd
//     that rises at every takeover;
//   - a txnrouter.Router runs a coordinator per owned partition over a
//     fenced txnetcd.PartitionStore (every write conditioned on still
//     owning the partition), with producer ids from etcd blocks and the
//     node's one marker sender; it answers NOT_COORDINATOR for the others
//     and FindCoordinator with each id's owner;
//   - the topic controller and the group coordinator each run on the
//     holder of an etcd lease of their own (controllerHolder,
//     groupHolder), their records in etcd; another node forwards the
//     controller's requests to the holder and, in a process of its own,
//     follows its topics as a leader process does;
//   - the security metadata (ACLs, SCRAM users, quotas, features) is the
//     controller's, in etcd beside the topics under the same lease and
//     fence: the holder serves it, every other node forwards its APIs to
//     the holder, relays SCRAM logins to it and mirrors its ACLs and
//     features; node 0 copies a single coordinator's topics and security
//     metadata from its local store (DATA_DIR/coordinator, or the shared
//     store of `txncoord up`) into etcd once;
//   - every node leads the partitions placed on it by hand, as a KRaft
//     combined node, in its local store (the space "leader-<id>" of
//     `up`'s shared store): their one copy is there.
//
// Nothing of the transactions is kept locally.
func startEtcdCoordinator(cfg CoordinatorConfig, self cluster.Node, profile *kversion.Versions, sec *wire.SecurityConfig, dial wire.DialConfig, log zerolog.Logger) (_ *Coordinator, err error) {
	if cfg.LeaseTTL <= 0 {
		// The cluster file's, so that every coordinator holds its
		// partitions as long; a process's flag overrides it.
		cfg.LeaseTTL = time.Duration(cfg.View.Etcd().LeaseTTLSeconds) * time.Second
	}
	c := &Coordinator{view: cfg.View, Faults: cfg.Faults, lg: log, Node: self, etcdClient: cfg.Etcd}
	cleanup := []func(){}
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()
	if c.etcdClient == nil {
		if c.etcdClient, err = DialEtcd(cfg.View); err != nil {
			return nil, fmt.Errorf("coordinator %d: etcd: %w", self.NodeID, err)
		}
		c.closeEtcd = true
		cleanup = append(cleanup, func() { c.etcdClient.Close() })
	}
	if c.adminToken, _, err = AdminToken(cfg.View.File()); err != nil {
		return nil, err
	}
	layout := txnetcd.Layout{Prefix: cfg.View.Etcd().Prefix}
	parts := cfg.View.TransactionStatePartitions()
	c.Etcd = cfg.EtcdStore
	if c.Etcd == nil {
		c.Etcd = txnetcd.NewStore(c.etcdClient, txnetcd.Options{Layout: layout, Partitions: parts})
		if cfg.Metrics != nil {
			cfg.Metrics.MustRegister(etcdWriterTotals(c.Etcd))
		}
	}

	node0 := self.NodeID == cfg.View.Coordinator().NodeID
	var ownServer atomic.Pointer[wire.Server]
	switch {
	case cfg.Shared == nil:
		// Its data dir keeps the partitions placed on this node, in a
		// store laid out as a single coordinator's (created and
		// locked, so two processes never share one). Node 0's may be
		// a single coordinator's, from before the cluster had several:
		// its topics and security metadata are copied into etcd once.
		if c.ownStore, err = openCoordinatorStore(cfg); err != nil {
			return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
		}
		cleanup = append(cleanup, func() { c.ownStore.Close(); c.ownStore = nil })
		if node0 {
			seedControllerRecords(c.etcdClient, cfg.View, c.ownStore, log)
		}
		// The security metadata is the controller's: this node
		// enforces what etcd holds until it holds the controller's
		// lease or mirrors the holder, and relays the logins of SCRAM
		// users it does not know to the holder.
		if err := showAuthRecords(c.etcdClient, cfg.View); err != nil {
			log.Warn().Err(err).Msg("the security metadata in etcd not read: the listeners enforce none until the controller's holder is heard from")
		}
	}
	if node0 {
		if err := c.adoptSingleCoordinatorIDs(cfg, log); err != nil {
			return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
		}
	}
	// The topic controller runs on the holder of its lease.
	if c.ctl, err = startControllerHolder(c.etcdClient, cfg.View, self, cfg.LeaseTTL, log); err != nil {
		return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
	}
	cleanup = append(cleanup, func() { c.ctl.Close() })
	if cfg.Shared == nil {
		relaySCRAM(sec, c.ctl.forwardAddr(self), dial)
	}
	if cfg.Shared == nil {
		// A process of its own learns topics from the controller (the
		// marker sender needs every partition's leader), as a leader
		// process does, while it does not run the controller itself:
		// one sync before serving, best effort.
		c.follower = topics.NewFollower(topics.FollowerConfig{View: cfg.View, Addr: cfg.View.Coordinator().Addr, Dial: dial, Log: log,
			Target: c.ctl.holderAddr, Serving: func() bool { return c.ctl.Current() != nil }})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.follower.Sync(ctx, nil, nil)
		cancel()
	}
	// Every coordinator is a combined node: it leads the partitions
	// placed on it, in its store, registering their transactions with
	// each id's owner as a leader does.
	partsStore := cfg.Shared
	if partsStore == nil {
		partsStore = c.ownStore
	}
	c.partsClosed = new(atomic.Bool)
	c.partsClient = txnCoordinatorsClient(cfg, self, &ownServer, dial, log, cluster.LeaderClientID)
	cleanup = append(cleanup, func() { c.partsClient.Close() })
	// `up` knows the controller's topics already (its view is the
	// holder's); a process of its own drops the data of deleted topics
	// once its follower hears from the controller.
	if c.Partitions, err = openPartitions(cfg, partsStore, c.partsClient, c.partsClosed, cfg.Shared != nil, log); err != nil {
		return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
	}
	cleanup = append(cleanup, func() { c.Partitions.Close() })
	c.Cleanable = c.Partitions.CleanableRatio
	if cfg.Shared == nil {
		c.follower.Start(c.Partitions.HeldTopics, c.Partitions.DropTopic)
		cleanup = append(cleanup, c.follower.Close)
		// Auto-creation: by the controller this node runs, else asked
		// of the holder.
		follower := c.follower
		cfg.View.SetCreator(func(name string) (cluster.Topic, error) {
			if ctl := c.ctl.Current(); ctl != nil {
				return ctl.AutoCreate(name)
			}
			return follower.AutoCreate(name)
		})
		cfg.View.SetController(c.ctl.holderNode)
	}

	if c.Member, err = ownership.Start(ownership.Config{Client: c.etcdClient, Layout: layout, NodeID: self.NodeID,
		Partitions: parts, LeaseTTL: cfg.LeaseTTL, Log: log}); err != nil {
		return nil, fmt.Errorf("coordinator %d: ownership: %w", self.NodeID, err)
	}
	cleanup = append(cleanup, func() { c.Member.Close() })
	c.Timeline = txntimeline.New(0)
	c.Sender = newMarkerSender(cfg, self, dial, &ownServer, nil, c.Timeline, log)
	cleanup = append(cleanup, c.Sender.Close)
	nodes := map[int32]string{}
	for _, n := range cfg.View.Coordinators() {
		nodes[n.NodeID] = n.Addr
	}
	if c.Router, err = txnrouter.New(txnrouter.Config{
		Member: c.Member, Store: c.Etcd, Partitions: parts, ProducerIDs: coordinator.NewProducerIDPool(c.Etcd, 0), Markers: c.Sender,
		// A leader never holds a marker of a Prepare that etcd has not
		// committed: no leader appends to an etcd partition's log
		// (newMarkerSender's txnLog is nil).
		Coordinator: coordinator.Config{NodeID: self.NodeID, KafkaVersion: self.KafkaVersion, View: cfg.View, Timeline: c.Timeline},
		Nodes:       nodes, Log: log, Metrics: cfg.Metrics,
	}); err != nil {
		return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
	}
	cleanup = append(cleanup, func() { c.Router.Close() })

	// The group coordinator runs on the holder of its lease, reaching
	// each transactional id's coordinator through the routed clients.
	c.txnClients = txnCoordinatorsClient(cfg, self, &ownServer, dial, log, groupsClientID)
	if cfg.Shares == nil { // a process of its own: the leaders are others'
		cfg.Shares = remoteShares{view: cfg.View, dial: dial}
	}
	if c.groups, err = startGroupHolder(c.etcdClient, cfg.View, self, cfg.LeaseTTL, groups.Config{NodeID: self.NodeID, View: cfg.View, Metrics: cfg.Metrics,
		TxnCoordinator: groupsTxnFunc(c.txnClients), Timeouts: cfg.GroupTimeouts, Log: log, Shares: cfg.Shares}, log); err != nil {
		return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
	}
	cleanup = append(cleanup, func() { c.groups.Close() })
	if cfg.Shared == nil { // a process of its own: its view follows its own member
		cfg.View.SetGroupCoordinatorOf(c.groups.ownerNode(cfg.View))
		cfg.View.SetLiveCoordinators(c.liveCoordinators)
	}

	// The controller's requests and the security metadata's go to the
	// holder of its lease (in `up`, cfg.Forward finds it).
	ctlForward, synced := cfg.Forward, func(context.Context) {}
	if ctlForward == nil {
		ctlForward = topics.DialForwardTo(c.ctl.forwardAddr(self), dial)
	}
	if c.follower != nil {
		synced = func(ctx context.Context) { c.follower.Refresh(ctx) }
	}
	c.ctlForward = ctlForward
	c.Server, err = listen(cfg.View, self, profile, cfg.Listener, sec, cfg.Limits, cfg.Faults, requestMetrics(cfg.Requests, cfg.Metrics), log, func(reg *wire.Registry) {
		c.Router.Register(reg)
		groups.RegisterPartitionSwitch(reg, self.KafkaVersion, c.groups.partitions, c.groups.Of)
		topics.RegisterSwitch(reg, c.ctl.Current, ctlForward, synced)
		cfg.View.AuthMeta().RegisterSwitch(reg, authmeta.ForwardFunc(ctlForward), synced)
		c.Partitions.RegisterBeside(reg)
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator %d: %w", self.NodeID, err)
	}
	ownServer.Store(c.Server)
	log.Info().Int32("partitions", parts).Strs("etcd", cfg.View.Etcd().Endpoints).Str("prefix", layout.Prefix).
		Msg("coordinator on etcd: claiming its share of __transaction_state")
	return c, nil
}

// adoptSingleCoordinatorIDs: node 0's data dir may be a single
// coordinator's (a cluster moving to etcd). Producer ids below its
// high-water mark may have been handed out, so etcd's counter is raised
// above it before any coordinator hands one out: `up` starts node 0 first;
// separate processes must, and a counter found already between 1 and the
// mark (ids handed out from etcd first) is logged as an error. Its
// transactions and groups are not moved into etcd: their number is logged
// so the operator knows what the etcd mode does not serve.
func (c *Coordinator) adoptSingleCoordinatorIDs(cfg CoordinatorConfig, log zerolog.Logger) error {
	st, space := cfg.Shared, "coordinator" // up's shared store: the single coordinator's space
	if st == nil {
		st, space = c.ownStore, "" // DATA_DIR/coordinator/txnlog.db: its top level
	}
	if st == nil {
		return nil
	}
	tl, err := txnlog.OpenBoltIn(st, space)
	if err != nil {
		return err
	}
	state, err := tl.Load()
	tl.Close()
	if err != nil {
		return err
	}
	if hw := state.ProducerIDHighWater; hw > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
		found, err := c.Etcd.EnsureProducerIDsFrom(ctx, hw)
		cancel()
		if err != nil {
			return fmt.Errorf("producer ids above the single coordinator's high-water mark %d: %w", hw, err)
		}
		if found > 0 && found < hw {
			log.Error().Int64("high_water", hw).Int64("etcd_next", found).
				Msg("etcd handed out producer ids below this data dir's single-coordinator high-water mark before node 0 raised it: some may have been handed out twice (start node 0 first when a single coordinator's data dir moves to etcd)")
		} else if found < hw {
			log.Info().Int64("high_water", hw).Msg("producer ids from etcd continue above the single coordinator's high-water mark of this data dir")
		}
	}
	open := 0
	for _, m := range state.Txns {
		if m.State == txnlog.Ongoing || m.State == txnlog.PrepareCommit || m.State == txnlog.PrepareAbort {
			open++
		}
	}
	if open > 0 {
		log.Warn().Int("transactions", len(state.Txns)).Int("unfinished", open).
			Msg("this data dir holds a single coordinator's transactions, which the etcd mode does not serve (no migration): finish them with the single coordinator first")
	}
	return nil
}

// liveCoordinators is the View's SetLiveCoordinators hook: the members
// holding a lease as this node sees them, while its own view is valid
// (this node then counts itself), otherwise unknown.
func (c *Coordinator) liveCoordinators() (map[int32]bool, bool) {
	if c.Member.Err() != nil {
		return nil, false
	}
	live := map[int32]bool{c.Node.NodeID: true}
	for _, id := range c.Member.Members() {
		live[id] = true
	}
	return live, true
}
