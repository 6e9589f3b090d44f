package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnlog"
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
	UnsafeNoSync           bool
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
	// GroupTimeouts are the group coordinator's timeouts (zero values:
	// its defaults).
	GroupTimeouts groups.Timeouts
	// Controller, when set, is the topic controller already open in
	// Shared (`txncoord up` opens it before the leaders, which adopt
	// their topics through it); nil opens it here, in the coordinator's
	// store. The caller closes a controller it passed.
	Controller *topics.Controller
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

	ownController bool
	ownStore      *storage.Store // the process's store (no Shared): closed last
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
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "coordinator"), 0o755); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(cfg.DataDir, "coordinator", "txnlog.db")
	st, err := storage.Open(path, storage.Options{NoSync: cfg.UnsafeNoSync, Log: cfg.Log, Kinds: RecordCodecs})
	if err != nil {
		return nil, nil, fmt.Errorf("txnlog: %w", err)
	}
	if cfg.UnsafeNoSync {
		cfg.Log.Warn().Str("path", path).Msg("txnlog: fsync disabled (UnsafeNoSync): acknowledged transactions can be lost on a crash")
	}
	store, err := txnlog.OpenBoltIn(st, "")
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return store, st, nil
}

// StartCoordinator opens the transaction log, recovers, and starts the
// listener. Start order matters: the sender exists before recovery so the
// markers of every Prepare* transaction can be queued, and it starts only
// once the coordinator can receive its completions.
func StartCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	self := cfg.View.Coordinator()
	profile, err := negotiation.Profile(self.KafkaVersion)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With().Str("node", "coordinator").Logger()
	sec, dial, err := securityOf(cfg.View)
	if err != nil {
		return nil, err
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
		cfg.Metrics.MustRegister(storeCollector{store})
		if cfg.Shared == nil { // a process of its own: its log's failure
			watchStoreFailure(cfg.Metrics, store)
		}
	}
	// ownServer is this node's server once it listens: the markers of
	// __consumer_offsets, whose leader is this node (its group
	// coordinator), go to it in-process, in `txncoord up` and in a
	// coordinator process of its own alike, never over a TCP connection
	// to itself. The group coordinator appends to this store's log, so it
	// may take them before the Prepare is durable, as an in-process
	// leader does.
	var ownServer atomic.Pointer[wire.Server]
	isOwn := func(addr string) bool { return addr == self.Addr }
	sender := markersender.New(markersender.Config{
		CoordinatorVersion: self.KafkaVersion,
		Router:             cfg.View,
		Leaders:            cfg.View.Leaders(),
		Discovery:          cfg.MarkerVersionDiscovery,
		Log:                log,
		Metrics:            cfg.Metrics,
		// The leaders of `txncoord up` append to the coordinator's log:
		// they may get markers before the Prepare is durable.
		InProcess: func(addr string) bool {
			return isOwn(addr) || (cfg.Shared != nil && cfg.InProcessLeader != nil && cfg.InProcessLeader(addr) != nil)
		},
		Dial: func(ctx context.Context, addr string) (negotiation.Transport, error) {
			if isOwn(addr) {
				srv := ownServer.Load()
				if srv == nil {
					// Not listening yet (recovery resends markers before
					// the listener starts): the sender retries.
					return nil, errCoordinatorNotStarted
				}
				return srv.Local(clusterPrincipal(cfg.View)).WithClientID(markerClientID).AtCallerVersion().Inline(), nil
			}
			if cfg.InProcessLeader != nil {
				if srv := cfg.InProcessLeader(addr); srv != nil {
					return srv.Local(clusterPrincipal(cfg.View)).WithClientID(markerClientID).AtCallerVersion().Inline(), nil
				}
			}
			cl, err := wire.DialWith(ctx, addr, markerClientID, dial)
			if err != nil {
				return nil, err
			}
			return cl, nil
		},
	})
	coord, err := coordinator.Open(coordinator.Config{
		NodeID:       self.NodeID,
		KafkaVersion: self.KafkaVersion,
		View:         cfg.View,
		Store:        store,
		Markers:      sender,
		EarlyMarkers: cfg.Shared != nil && cfg.InProcessLeader != nil,
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
	grp, err := groups.Open(groups.Config{NodeID: self.NodeID, View: cfg.View, Store: groupStore,
		TxnCoordinator: func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
			cl := txnClient.Load()
			if cl == nil {
				return nil, errCoordinatorNotStarted
			}
			return cl.Do(ctx, req)
		},
		Timeouts: cfg.GroupTimeouts, Log: log, Metrics: cfg.Metrics})
	if err != nil {
		sender.Close()
		coord.Close()
		closeStores()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	srv, err := listen(cfg.View, self, profile, cfg.Listener, sec, cfg.Limits, log, func(reg *wire.Registry) {
		coord.Register(reg)
		grp.Register(reg)
		ctl.Register(reg)
	})
	if err != nil {
		sender.Close()
		grp.Close()
		coord.Close()
		closeStores()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	txnClient.Store(srv.Local(clusterPrincipal(cfg.View)).WithClientID(groupsClientID).Inline())
	ownServer.Store(srv)
	return &Coordinator{Groups: grp, Node: self, Coordinator: coord, Sender: sender, Store: store, Server: srv,
		Controller: ctl, ownController: ownController, ownStore: own}, nil
}

// Stop stops accepting, finishes in-flight requests until ctx is done, then
// stops the sender and closes the log. Markers still pending are resent
// from the log's Prepare* records at the next start.
func (c *Coordinator) Stop(ctx context.Context) error {
	err := c.Server.Shutdown(ctx)
	c.Sender.Close()
	err = errors.Join(err, c.Groups.Close(), c.Coordinator.Close(), c.Store.Close())
	if c.ownController {
		err = errors.Join(err, c.Controller.Close())
	}
	if c.ownStore != nil {
		err = errors.Join(err, c.ownStore.Close())
	}
	return err
}
