package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/wire"
)

// groupCoordinatorPoll is how often a leader process asks the coordinators
// which of them coordinates the groups of each __consumer_offsets
// partition (a partition moves in about the lease TTL, 5 s by default).
const groupCoordinatorPoll = 2 * time.Second

// LeaderConfig configures one leader node.
type LeaderConfig struct {
	View   *cluster.View
	NodeID int32
	// KafkaVersion overrides the cluster file's kafka_version for this
	// node (a rolling upgrade or downgrade); empty keeps the file's.
	KafkaVersion   string
	DataDir        string
	RetentionBytes int64
	// ProducerIDExpiration: how long a producer with no open transaction
	// is kept on a partition after its last write (0: Kafka's one day).
	ProducerIDExpiration time.Duration
	// RetentionCheckInterval: how often retention is applied to idle
	// partitions too (0: Kafka's log.retention.check.interval.ms, five
	// minutes).
	RetentionCheckInterval time.Duration
	// CleanerBackoff: how often the log cleaner looks at the partitions
	// of compacted topics (0: Kafka's log.cleaner.backoff.ms, 15 s).
	CleanerBackoff time.Duration
	UnsafeNoSync   bool
	// Shared, when set, holds the leader's data as its space
	// "leader-<id>" (`txncoord up`); the caller closes it.
	Shared   *storage.Store
	Listener net.Listener // optional: a listener already bound
	Log      zerolog.Logger
	Metrics  prometheus.Registerer
	// Coordinator, optional, is how the leader reaches the coordinator
	// (`txncoord up`: in-process); nil dials the cluster file's
	// coordinator over TCP.
	Coordinator coordclient.Client
	// Limits are the listener's limits (wire.Limits).
	Limits wire.Limits
	// Faults, optional, are the process's faults injected on demand
	// (the admin API's /v1/faults): this node's listener asks them about
	// every request while one is set.
	Faults *faults.Set
	// Requests, optional, are the process's per-API series (`txncoord
	// up` shares one between its nodes); nil makes them in Metrics.
	Requests *wire.RequestMetrics
	// Forward, optional, is how the leader forwards the controller's
	// requests (CreateTopics, ...) to the coordinator node (`txncoord
	// up`: in-process); nil forwards over TCP.
	Forward topics.ForwardFunc
}

// Leader is a running leader node.
type Leader struct {
	Node    cluster.Node
	Leader  *leaderstub.Leader
	Server  *wire.Server
	coordCl coordclient.Client
	// follower keeps a leader of its own process in step with the topic
	// controller (nil in `txncoord up`, whose nodes share one view).
	follower *topics.Follower
}

// StartLeader opens the leader's store and starts its listener.
func StartLeader(cfg LeaderConfig) (*Leader, error) {
	self, ok := cfg.View.File().Leader(cfg.NodeID)
	if !ok {
		return nil, fmt.Errorf("node id %d is not a leader in the cluster file", cfg.NodeID)
	}
	if cfg.KafkaVersion != "" {
		self.KafkaVersion = cfg.KafkaVersion
	}
	profile, err := negotiation.Profile(self.KafkaVersion)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With().Str("node", fmt.Sprintf("leader-%d", cfg.NodeID)).Logger()
	sec, dial, err := securityOf(cfg.View)
	if err != nil {
		return nil, err
	}
	coordCl := cfg.Coordinator
	var follower *topics.Follower
	if coordCl == nil {
		coordCl = dialCoordinators(cfg.View, dial, log)
		// A process of its own learns topics from the controller. One
		// sync before recovery, so recovered partitions find their
		// topics with the controller's counts (best effort: the
		// controller may be down; the follower keeps trying).
		// With several coordinators the controller is whichever holds
		// its lease: the follower tracks Metadata's ControllerID.
		follower = topics.NewFollower(topics.FollowerConfig{View: cfg.View, Addr: cfg.View.Coordinator().Addr, Dial: dial, Log: log,
			Track: len(cfg.View.Coordinators()) > 1})
		relaySCRAM(sec, follower.ControllerAddr, dial)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		follower.Sync(ctx, nil, nil)
		cancel()
	}
	l, err := leaderstub.Open(leaderstub.Config{
		NodeID:                 cfg.NodeID,
		KafkaVersion:           self.KafkaVersion,
		View:                   cfg.View,
		DataDir:                filepath.Join(cfg.DataDir, fmt.Sprintf("leader-%d", cfg.NodeID)),
		Shared:                 cfg.Shared,
		Coordinator:            coordCl,
		RetentionBytes:         cfg.RetentionBytes,
		ProducerIDExpiration:   cfg.ProducerIDExpiration,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		CleanerBackoff:         cfg.CleanerBackoff,
		NoSync:                 cfg.UnsafeNoSync,
		Log:                    log,
		Metrics:                cfg.Metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("leader %d: %w", cfg.NodeID, err)
	}
	if r, ok := coordCl.(*coordclient.Routed); ok && follower != nil {
		// A process of its own has no etcd client: it learns which
		// coordinator owns each __consumer_offsets partition from the
		// coordinators, for its Metadata's leaders of that topic.
		r.FollowGroupCoordinator(groupCoordinatorPoll, cfg.View.OffsetsPartitions())
		cfg.View.SetGroupCoordinatorOf(func(p int32) (cluster.Node, bool) {
			if id, ok := r.GroupCoordinatorOf(p); ok {
				return cfg.View.Node(id)
			}
			return cluster.Node{}, false
		})
	}
	if follower != nil {
		cfg.View.OnTopicRemoved(func(t cluster.Topic) {
			if err := l.DropTopic(t.Name); err != nil {
				log.Error().Err(err).Str("topic", t.Name).Msg("drop a deleted topic's data")
			}
		})
		follower.Start(l.HeldTopics, l.DropTopic)
	}
	// The controller's requests, and the security metadata's, go to the
	// controller (the coordinator node, or the holder of the
	// controller's lease as the follower knows it); a process of its own
	// then syncs, so its own Metadata shows the change.
	forward, synced := cfg.Forward, func(context.Context) {}
	if forward == nil {
		forward = topics.DialForward(cfg.View.Coordinator().Addr, dial)
	}
	ctlForward := forward
	if follower != nil {
		synced = func(ctx context.Context) { follower.Refresh(ctx) }
		if cfg.Forward == nil && len(cfg.View.Coordinators()) > 1 {
			ctlForward = topics.DialForwardTo(follower.ControllerAddr, dial)
			cfg.View.SetController(follower.Controller)
		}
	}
	srv, err := listen(cfg.View, self, profile, cfg.Listener, sec, cfg.Limits, cfg.Faults, requestMetrics(cfg.Requests, cfg.Metrics), log, func(reg *wire.Registry) {
		l.Register(reg)
		if r, ok := coordCl.(*coordclient.Routed); ok {
			// A client may ask any broker for its transaction
			// coordinator: the owner, which only the coordinators know.
			r.RegisterFindCoordinator(reg, cfg.View)
		}
		topics.RegisterForward(reg, ctlForward, synced)
		if follower != nil { // a process of its own: the security metadata is the controller's
			cfg.View.AuthMeta().RegisterForward(reg, authmeta.ForwardFunc(ctlForward), synced)
		} else {
			// `up`: served from the process's State while a node of
			// the process holds the controller (always, with one
			// coordinator), else forwarded to the holder.
			cfg.View.AuthMeta().RegisterSwitch(reg, authmeta.ForwardFunc(ctlForward), synced)
		}
	})
	if err != nil {
		if follower != nil {
			follower.Close()
		}
		l.Close()
		return nil, fmt.Errorf("leader %d: %w", cfg.NodeID, err)
	}
	return &Leader{Node: self, Leader: l, Server: srv, coordCl: coordCl, follower: follower}, nil
}

// Stop stops accepting, finishes in-flight requests until ctx is done, and
// closes the store.
func (l *Leader) Stop(ctx context.Context) error {
	err := l.Server.Shutdown(ctx)
	if l.follower != nil {
		l.follower.Close()
	}
	l.coordCl.Close()
	if cerr := l.Leader.Close(); err == nil {
		err = cerr
	}
	return err
}
