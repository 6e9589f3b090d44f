package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/topicconfig"
	"github.com/txncoord/txncoord/wire"
)

// stopTimeout bounds a graceful stop (the contract allows 15 s in all).
const stopTimeout = 10 * time.Second

func discoveryFlag() cli.Flag {
	return &cli.BoolFlag{
		Name: "marker-version-discovery", Value: true, EnvVars: env("marker-version-discovery"),
		Usage: "negotiate the WriteTxnMarkers version per leader (KIP-1228); false always sends v2, reproducing Kafka 4.2.0's bug",
	}
}

// markerTimeoutFlag is Kafka's request.timeout.ms for the marker sender's
// channel to the leaders.
func markerTimeoutFlag() cli.Flag {
	return &cli.DurationFlag{
		Name: "marker-request-timeout", Value: 30 * time.Second, EnvVars: env("marker-request-timeout"),
		Usage: "how long the marker sender waits for a leader's answer to one WriteTxnMarkers before it reconnects and resends (Kafka's request.timeout.ms)",
	}
}

func noSyncFlag() cli.Flag {
	return &cli.BoolFlag{
		Name: "unsafe-no-fsync", EnvVars: env("unsafe-no-fsync"),
		Usage: "UNSAFE: skip fsync; acknowledged data can be lost on a crash; only for throwaway test clusters",
	}
}

func retentionFlag() cli.Flag {
	return &cli.Int64Flag{Name: "retention-bytes", Value: 1 << 30, EnvVars: env("retention-bytes"), Usage: "per-partition log size kept by leaders"}
}

// limitsFlags are the Kafka listeners' limits (wire.Limits); limits reads
// them.
func limitsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Int64Flag{Name: "max-inflight-request-bytes", Value: wire.DefaultMaxInFlightRequestBytes, EnvVars: env("max-inflight-request-bytes"),
			Usage: "memory for requests in flight, shared by the process's listeners (Kafka's queued.max.request.bytes): frames read and not yet answered plus decompression; a request that does not fit waits, its connection not read"},
		&cli.IntFlag{Name: "max-connections-per-ip", Value: wire.DefaultMaxConnsPerIP, EnvVars: env("max-connections-per-ip"),
			Usage: "connections one IP address may hold to each listener (Kafka's max.connections.per.ip); more are closed at accept; negative: no limit"},
	}
}

func limits(c *cli.Context) (wire.Limits, error) {
	n := c.Int64("max-inflight-request-bytes")
	if n <= 0 {
		return wire.Limits{}, usagef("--max-inflight-request-bytes %d: want a positive number of bytes", n)
	}
	return wire.Limits{Budget: wire.NewBudget(n), MaxConnsPerIP: c.Int("max-connections-per-ip")}, nil
}

// checkServerFlags refuses the values of the node commands' flags that
// would otherwise be replaced silently by a default or rounded (a usage
// error naming the flag, exit 2). Flags a command does not have are
// skipped.
func checkServerFlags(c *cli.Context) error {
	has := func(name string) bool {
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				if n == name {
					return true
				}
			}
		}
		return false
	}
	if has("etcd-lease-ttl") && c.IsSet("etcd-lease-ttl") {
		if d := c.Duration("etcd-lease-ttl"); d < time.Second || d%time.Second != 0 {
			return usagef("--etcd-lease-ttl %s: want whole seconds, at least 1s (etcd leases are granted in seconds)", d)
		}
	}
	if has("retention-bytes") {
		if n := c.Int64("retention-bytes"); n <= 0 {
			return usagef("--retention-bytes %d: want a positive number of bytes (the log size kept per partition)", n)
		}
	}
	if has("producer-id-expiration") {
		if d := c.Duration("producer-id-expiration"); d <= 0 {
			return usagef("--producer-id-expiration %s: want a positive duration, such as 24h", d)
		}
	}
	if has("kafka-version") {
		if v := c.String("kafka-version"); v != "" {
			if err := knownVersions("--kafka-version", v); err != nil {
				return err
			}
		}
	}
	if has("listen") {
		l := c.String("listen")
		if _, port, err := net.SplitHostPort(l); err != nil {
			return usagef("--listen %q: want host:port, such as 127.0.0.1:9092", l)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return usagef("--listen %q: the port must be a number from 0 to 65535", l)
		}
	}
	return nil
}

func producerExpirationFlag() cli.Flag {
	return &cli.DurationFlag{Name: "producer-id-expiration", Value: leaderstub.DefaultProducerIDExpiration, EnvVars: env("producer-id-expiration"),
		Usage: "leaders forget a producer with no open transaction this long after its last write (Kafka's producer.id.expiration.ms), checked every 10 minutes or as often as it lasts if shorter"}
}

func cleanerBackoffFlag() cli.Flag {
	return &cli.DurationFlag{Name: "log-cleaner-backoff", Value: leaderstub.DefaultCleanerBackoff, EnvVars: env("log-cleaner-backoff"),
		Usage: "how often leaders look for partitions of compacted topics to clean (Kafka's log.cleaner.backoff.ms)"}
}

// cleanerDefaults are up's flags of the log cleaner's broker defaults: each
// is Kafka's broker config of the same name and the cluster file's key
// (cluster.File), which a topic that does not set the topic config
// inherits. A flag not given leaves Kafka's default.
var cleanerDefaults = []struct{ flag, kafka, key, topic string }{
	{"log-cleanup-policy", "log.cleanup.policy", "log_cleanup_policy", "cleanup.policy"},
	{"log-cleaner-delete-retention-ms", "log.cleaner.delete.retention.ms", "log_cleaner_delete_retention_ms", "delete.retention.ms"},
	{"log-cleaner-min-compaction-lag-ms", "log.cleaner.min.compaction.lag.ms", "log_cleaner_min_compaction_lag_ms", "min.compaction.lag.ms"},
	{"log-cleaner-max-compaction-lag-ms", "log.cleaner.max.compaction.lag.ms", "log_cleaner_max_compaction_lag_ms", "max.compaction.lag.ms"},
	{"log-cleaner-min-cleanable-ratio", "log.cleaner.min.cleanable.ratio", "log_cleaner_min_cleanable_ratio", "min.cleanable.dirty.ratio"},
}

func cleanerDefaultFlags() []cli.Flag {
	var flags []cli.Flag
	for _, d := range cleanerDefaults {
		def, _ := topicconfig.Broker(d.kafka)
		flags = append(flags, &cli.StringFlag{Name: d.flag, Value: *def.Default, EnvVars: env(d.flag),
			Usage: fmt.Sprintf("the %s of topics that set none (Kafka's %s, %s; the cluster file's %s)", d.topic, d.kafka, def.ValidValues, d.key)})
	}
	return flags
}

// setCleanerDefaults puts the cleaner defaults given as flags in the
// cluster file, each checked as Kafka checks the broker config.
func setCleanerDefaults(c *cli.Context, f *cluster.File) error {
	for _, d := range cleanerDefaults {
		if !c.IsSet(d.flag) {
			continue
		}
		raw := c.String(d.flag)
		def, _ := topicconfig.Broker(d.kafka)
		if err := topicconfig.ValidateValue(def, raw); err != nil {
			return usagef("--%s %q: %v", d.flag, raw, err)
		}
		v := strings.TrimSpace(raw)
		n, _ := strconv.ParseInt(v, 10, 64)
		switch d.kafka {
		case "log.cleanup.policy":
			f.LogCleanupPolicy = &v
		case "log.cleaner.delete.retention.ms":
			f.LogCleanerDeleteRetentionMs = &n
		case "log.cleaner.min.compaction.lag.ms":
			f.LogCleanerMinCompactionLagMs = &n
		case "log.cleaner.max.compaction.lag.ms":
			f.LogCleanerMaxCompactionLagMs = &n
		case "log.cleaner.min.cleanable.ratio":
			r, _ := strconv.ParseFloat(strings.TrimRight(v, "dDfF"), 64)
			f.LogCleanerMinCleanableRatio = &r
		}
	}
	if lo, hi := f.LogCleanerMinCompactionLagMs, f.LogCleanerMaxCompactionLagMs; lo != nil && hi != nil && *lo > *hi {
		return usagef("--log-cleaner-min-compaction-lag-ms %d is above --log-cleaner-max-compaction-lag-ms %d", *lo, *hi)
	}
	return nil
}

func upCommand() *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "run the coordinator and every leader in one process (the embedded default)",
		Description: `Example:
   txncoord up --data-dir ./txncoord-data --listen 127.0.0.1:9092 --leaders 4.2,4.2,4.1 --topics orders:6

The coordinator listens on --listen, leader i (node id i) on port(--listen)+i.
Prints one line "txncoord ready bootstrap=... admin=..." when every listener is up (with several
   coordinators, once every __transaction_state partition is served).`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data-dir", Value: "./txncoord-data", EnvVars: env("data-dir"), Usage: "where the logs live; DATA_DIR/cluster.yaml is written"},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9092", EnvVars: env("listen"), Usage: "coordinator address; leaders take the next ports"},
			&cli.StringFlag{Name: "leaders", Value: "4.2,4.2,4.1", EnvVars: env("leaders"), Usage: "Kafka version of each leader: 3.9, 4.0, 4.1, 4.2, 4.3 or 4.4"},
			&cli.StringFlag{Name: "coordinator-version", Value: "4.2", EnvVars: env("coordinator-version"), Usage: "Kafka version of the coordinator (4.1 sends only WriteTxnMarkers v1)"},
			&cli.IntFlag{Name: "coordinators", Value: 1, EnvVars: env("coordinators"),
				Usage: "coordinator nodes (0..C-1 on port(--listen)+i, leaders after them); more than one share the transactional ids through etcd: an embedded one under DATA_DIR/etcd on the two ports after the last leader's, unless --etcd-endpoints names one"},
			&cli.StringFlag{Name: "etcd-endpoints", EnvVars: env("etcd-endpoints"), Usage: "comma-separated etcd client URLs of an external etcd (the coordinators' shared state)"},
			&cli.IntFlag{Name: "transaction-state-partitions", Value: 50, EnvVars: env("transaction-state-partitions"),
				Usage: "partitions of __transaction_state, the unit the coordinators share (Kafka's transaction.state.log.num.partitions)"},
			leaseTTLFlag(),
			&cli.StringFlag{Name: "topics", EnvVars: env("topics"), Usage: "topics to create, name:partitions,..."},
			&cli.IntFlag{Name: "default-partitions", Value: 3, EnvVars: env("default-partitions"), Usage: "partitions of auto-created topics"},
			&cli.IntFlag{Name: "offsets-partitions", Value: 50, EnvVars: env("offsets-partitions"), Usage: "partitions of __consumer_offsets (Kafka's offsets.topic.num.partitions)"},
			&cli.StringFlag{Name: "admin-listen", Value: "127.0.0.1:9644", EnvVars: env("admin-listen"), Usage: "admin HTTP API address"},
			&cli.IntFlag{Name: "group-initial-rebalance-delay-ms", Value: 3000, EnvVars: env("group-initial-rebalance-delay-ms"),
				Usage: "how long the first rebalance of a new classic group waits for more members (Kafka's group.initial.rebalance.delay.ms; the cluster file's group_initial_rebalance_delay_ms)"},
			&cli.BoolFlag{Name: "auto-create-topics-enable", Value: true, EnvVars: env("auto-create-topics-enable"),
				Usage: "create a topic a client names that does not exist (Kafka's auto.create.topics.enable; the cluster file's auto_create_topics_enable)"},
			&cli.BoolFlag{Name: "secure", EnvVars: env("secure"), Usage: "TLS + SASL on every listener and a token on the admin API, with a local CA and credentials generated under DATA_DIR/security"},
			&cli.BoolFlag{Name: "force-new-cluster", EnvVars: env("force-new-cluster"), Usage: "start over: move the data dir's store and log aside (renamed, not deleted) and start an empty cluster"},
			discoveryFlag(), markerTimeoutFlag(), noSyncFlag(), retentionFlag(), producerExpirationFlag(), cleanerBackoffFlag(),
		}, append(cleanerDefaultFlags(), limitsFlags()...)...),
		Action: runUp,
	}
}

func leaseTTLFlag() cli.Flag {
	return &cli.DurationFlag{Name: "etcd-lease-ttl", EnvVars: env("etcd-lease-ttl"), DefaultText: "the cluster file's etcd.lease_ttl_seconds, else 5s",
		Usage: "with etcd: the lease of a coordinator's __transaction_state partitions, how long a dead coordinator keeps them before another takes over (whole seconds, at least 1s; it overrides the cluster file's etcd.lease_ttl_seconds, and must exceed etcd's election time)"}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func parseTopics(s string) (map[string]int32, error) {
	topics := map[string]int32{}
	if strings.TrimSpace(s) == "" {
		return topics, nil
	}
	for _, item := range strings.Split(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(item), ":")
		n, err := strconv.ParseInt(count, 10, 32)
		if !ok || err != nil || n < 1 {
			return nil, usagef("--topics %q: want name:partitions with partitions >= 1", item)
		}
		if _, dup := topics[name]; dup {
			return nil, usagef("--topics: %s listed twice", name)
		}
		topics[name] = int32(n)
	}
	return topics, nil
}

func runUp(c *cli.Context) error {
	if err := checkServerFlags(c); err != nil {
		return err
	}
	setServerGC()
	sigs := stopSignals()
	defer signal.Stop(sigs)
	topics, err := parseTopics(c.String("topics"))
	if err != nil {
		return err
	}
	var versions []string
	for _, v := range strings.Split(c.String("leaders"), ",") {
		versions = append(versions, strings.TrimSpace(v))
	}
	if err := knownVersions("--leaders", versions...); err != nil {
		return err
	}
	if err := knownVersions("--coordinator-version", c.String("coordinator-version")); err != nil {
		return err
	}
	if n := c.Int("coordinators"); n < 1 || n > 64 {
		return usagef("--coordinators %d: want 1 to 64", n)
	}
	if n := c.Int("transaction-state-partitions"); n < 1 || n > 10000 {
		return usagef("--transaction-state-partitions %d: want 1 to 10000", n)
	}
	spec := node.EmbeddedSpec{
		Coordinators: c.Int("coordinators"), EtcdEndpoints: splitList(c.String("etcd-endpoints")),
		TransactionStatePartitions: int32(c.Int("transaction-state-partitions")),
		Listen:                     c.String("listen"), CoordinatorVersion: c.String("coordinator-version"),
		LeaderVersions: versions, Topics: topics, DefaultPartitions: int32(c.Int("default-partitions")),
		OffsetsPartitions: int32(c.Int("offsets-partitions")),
	}
	file, err := spec.ClusterFile()
	if err != nil {
		return usageError{fmt.Errorf("bad cluster settings: %w", err)}
	}
	if file.Etcd != nil && c.IsSet("etcd-lease-ttl") {
		// Recorded in the data dir's cluster file, which separate
		// coordinator processes read: every coordinator the same lease.
		file.Etcd.LeaseTTLSeconds = int64(c.Duration("etcd-lease-ttl") / time.Second)
	}
	autoCreate := c.Bool("auto-create-topics-enable")
	file.AutoCreateTopicsEnable = &autoCreate
	delay := c.Int("group-initial-rebalance-delay-ms")
	if delay < 0 || delay > math.MaxInt32 {
		return usagef("--group-initial-rebalance-delay-ms %d: want 0 or more", delay)
	}
	if delay != int(cluster.DefaultGroupInitialRebalanceDelay.Milliseconds()) {
		d := int32(delay)
		file.GroupInitialRebalanceDelayMs = &d
	}
	if err := setCleanerDefaults(c, file); err != nil {
		return err
	}
	lim, err := limits(c)
	if err != nil {
		return err
	}
	// Every port first: a port in use found after the data dir was
	// written would leave a half-started cluster's files behind.
	addrs := []string{c.String("admin-listen")}
	for _, n := range file.CoordinatorNodes() {
		addrs = append(addrs, n.Addr)
	}
	for _, n := range file.Leaders {
		addrs = append(addrs, n.Addr)
	}
	if client, peer, ok := spec.EmbeddedEtcdAddrs(); ok {
		addrs = append(addrs, client, peer)
	}
	if err := portsFree(addrs); err != nil {
		return err
	}
	dataDir := c.String("data-dir")
	discarded, err := node.PrepareDataDir(dataDir, c.Bool("force-new-cluster"))
	if err != nil {
		return err
	}
	for _, d := range discarded {
		logger.Warn().Str("moved", d).Msg("--force-new-cluster: the previous store is discarded (moved aside)")
	}
	layout := node.EmbeddedLayout(file)
	if !c.Bool("force-new-cluster") {
		if err := node.CheckLayout(dataDir, layout, node.EmbeddedLayout); errors.Is(err, node.ErrLayoutChanged) {
			return usageError{err}
		} else if err != nil {
			return err
		}
	}
	var local *security.Local
	if c.Bool("secure") {
		if local, err = security.GenerateLocal(filepath.Join(dataDir, "security")); err != nil {
			return fmt.Errorf("--secure: %w", err)
		}
		file.Security = local.Settings
	}
	var etcdAddrs *[2]string
	if client, peer, ok := spec.EmbeddedEtcdAddrs(); ok {
		etcdAddrs = &[2]string{client, peer}
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{
		File: file, DataDir: dataDir, AdminListen: c.String("admin-listen"),
		MarkerVersionDiscovery: c.Bool("marker-version-discovery"), UnsafeNoSync: c.Bool("unsafe-no-fsync"),
		RetentionBytes: c.Int64("retention-bytes"), ProducerIDExpiration: c.Duration("producer-id-expiration"), Log: logger,
		CleanerBackoff: c.Duration("log-cleaner-backoff"),
		Limits:         lim, EtcdAddrs: etcdAddrs, MarkerRequestTimeout: c.Duration("marker-request-timeout"),
	})
	if err != nil {
		return err
	}
	// Written once the store holds the data dir's lock: a second `up`
	// refused on the same dir must not rewrite the running one's file.
	if _, err := node.WriteClusterFile(dataDir, file); err != nil {
		e.Stop(context.Background())
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	if err := node.WriteLayout(dataDir, layout); err != nil {
		e.Stop(context.Background())
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	// With several coordinators, ready means every __transaction_state
	// partition has an owner that serves it (leases granted, state loaded).
	servingCtx, cancel := context.WithTimeout(context.Background(), readyServingTimeout)
	err = e.WaitServing(servingCtx)
	cancel()
	if err != nil {
		e.Stop(context.Background())
		return fmt.Errorf("not ready within %s: %w", readyServingTimeout, err)
	}
	for _, co := range e.Coordinators {
		if co.Router != nil { // several coordinators: one summary line each
			logger.Info().Int32("node_id", co.Node.NodeID).Int("partitions", len(co.Router.Serving())).
				Msg("coordinator serving its __transaction_state partitions")
		}
	}
	adminURL := "none"
	if e.Admin != nil {
		adminURL = e.Admin.URL()
	}
	if local != nil {
		// stdout keeps exactly one line (the ready line): the
		// connection help goes to stderr.
		fmt.Fprintln(c.App.ErrWriter, local.HowToConnect(e.Bootstrap(), adminURL))
	}
	fmt.Fprintf(c.App.Writer, "txncoord ready bootstrap=%s admin=%s\n", e.Bootstrap(), adminURL)
	return waitAndStop(sigs, func(ctx context.Context) error { return e.Stop(ctx) })
}

// readyServingTimeout bounds how long `up` waits, before its ready line,
// for its coordinators to serve every __transaction_state partition: a
// lease round or two at the longest lease TTL, and the state's loading.
const readyServingTimeout = 60 * time.Second

// knownVersions says, as a usage error, which of the Kafka versions a flag
// names txncoord does not know.
func knownVersions(flag string, versions ...string) error {
	for _, v := range versions {
		if _, err := negotiation.Profile(v); err != nil {
			return usagef("%s: unknown Kafka version %q (known: %s)", flag, v, strings.Join(negotiation.ProfileNames(), ", "))
		}
	}
	return nil
}

// stopSignals starts catching SIGINT and SIGTERM. A node command calls it
// before it starts anything, so that a signal that comes right after (or
// before) the ready line stops it gracefully instead of killing it.
func stopSignals() chan os.Signal {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	return sigs
}

// waitAndStop blocks until SIGINT or SIGTERM arrives on sigs, then stops
// gracefully. A second signal exits at once.
func waitAndStop(sigs chan os.Signal, stop func(context.Context) error) error {
	sig := <-sigs
	logger.Info().Str("signal", sig.String()).Msg("stopping")
	go func() {
		<-sigs
		logger.Warn().Msg("second signal: exiting now")
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	logger.Info().Msg("stopped")
	return nil
}

func loadCluster(c *cli.Context) (*cluster.View, error) {
	path := c.String("cluster")
	if path == "" {
		return nil, usagef("--cluster FILE is required")
	}
	f, err := cluster.Load(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageError{err}
		}
		return nil, usageError{err}
	}
	return cluster.NewView(f), nil
}

func coordinatorCommand() *cli.Command {
	return &cli.Command{
		Name:  "coordinator",
		Usage: "run the coordinator node of a cluster file",
		Description: `Example:
   txncoord coordinator --cluster ./cluster.yaml --data-dir ./coord-data --admin-listen 127.0.0.1:9644`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "cluster", EnvVars: env("cluster"), Usage: "cluster file (YAML)"},
			&cli.IntFlag{Name: "node-id", Value: 0, EnvVars: env("node-id"), Usage: "this coordinator's node id in the cluster file (0..C-1)"},
			&cli.StringFlag{Name: "data-dir", Value: "./txncoord-data", EnvVars: env("data-dir")},
			&cli.StringFlag{Name: "admin-listen", Value: "127.0.0.1:9644", EnvVars: env("admin-listen"), Usage: `admin HTTP API address ("" to disable)`},
			discoveryFlag(), markerTimeoutFlag(), noSyncFlag(), leaseTTLFlag(),
			// The partitions the node leads as a combined node (those
			// placed on it by hand), as a leader's.
			retentionFlag(), producerExpirationFlag(), cleanerBackoffFlag(),
		}, limitsFlags()...),
		Action: func(c *cli.Context) error {
			if err := checkServerFlags(c); err != nil {
				return err
			}
			setServerGC()
			sigs := stopSignals()
			defer signal.Stop(sigs)
			view, err := loadCluster(c)
			if err != nil {
				return err
			}
			lim, err := limits(c)
			if err != nil {
				return err
			}
			metrics := node.NewMetrics()
			id := c.Int("node-id")
			if id < 0 || id >= len(view.Coordinators()) {
				return usagef("--node-id %d: the cluster file's coordinators are nodes 0..%d", id, len(view.Coordinators())-1)
			}
			if err := checkNodeLayout(c.String("data-dir"), node.NodeLayout(view.File(), int32(id), "coordinator")); err != nil {
				return err
			}
			// Faults on demand reach this node's listener and its marker
			// sender (holds of the markers to any node).
			injected := faults.New(func(n int32) bool { return n == int32(id) },
				func(n int32) bool { _, ok := view.Node(n); return ok }, metrics, logger)
			defer injected.Close()
			// A kill fault stops the node and its restart reopens it,
			// the process and its admin listener staying up.
			own, err := node.StartOwnCoordinator(node.CoordinatorConfig{
				View: view, DataDir: c.String("data-dir"), MarkerVersionDiscovery: c.Bool("marker-version-discovery"),
				UnsafeNoSync: c.Bool("unsafe-no-fsync"), Log: logger, Metrics: metrics, Limits: lim, Faults: injected,
				NodeID: int32(id), LeaseTTL: c.Duration("etcd-lease-ttl"), MarkerRequestTimeout: c.Duration("marker-request-timeout"),
				Partitions: node.PartitionSettings{RetentionBytes: c.Int64("retention-bytes"),
					ProducerIDExpiration: c.Duration("producer-id-expiration"), CleanerBackoff: c.Duration("log-cleaner-backoff")},
			})
			if err != nil {
				return err
			}
			co := own.Current()
			if err := node.WriteLayout(c.String("data-dir"), node.NodeLayout(view.File(), int32(id), "coordinator")); err != nil {
				own.Stop(context.Background())
				return err
			}
			adminURL := "none"
			adm, err := startProcessAdmin(c, view, own.Stop, func(a string, auth admin.Auth) (*admin.Server, error) {
				metrics.MustRegister(admin.LagCollectorOf(own.Backend))
				return admin.Start(a, own.Backend(), metrics, auth, logger)
			})
			if err != nil {
				return err
			}
			if adm != nil {
				own.ServeAdmin(adm)
				adminURL = adm.URL()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := co.PublishAdminURL(ctx, adminURL); err != nil {
					logger.Warn().Err(err).Msg("admin API URL not published in etcd: other coordinators cannot forward aborts to this one")
				}
				cancel()
			}
			fmt.Fprintf(c.App.Writer, "txncoord ready bootstrap=%s admin=%s\n", co.Server.Addr(), adminURL)
			return waitAndStop(sigs, func(ctx context.Context) error {
				if adm != nil {
					adm.Shutdown(ctx)
				}
				injected.Close()
				return own.Stop(ctx)
			})
		},
	}
}

func leaderCommand() *cli.Command {
	return &cli.Command{
		Name:  "leader",
		Usage: "run one leader node of a cluster file",
		Description: `Example:
   txncoord leader --cluster ./cluster.yaml --node-id 1 --data-dir ./leader1-data`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "cluster", EnvVars: env("cluster"), Usage: "cluster file (YAML)"},
			&cli.IntFlag{Name: "node-id", Value: -1, EnvVars: env("node-id"), Usage: "this leader's node id in the cluster file"},
			&cli.StringFlag{Name: "data-dir", Value: "./txncoord-data", EnvVars: env("data-dir")},
			&cli.StringFlag{Name: "kafka-version", EnvVars: env("kafka-version"), Usage: "override this leader's kafka_version (rolling upgrade or downgrade)"},
			&cli.StringFlag{Name: "admin-listen", EnvVars: env("admin-listen"), Usage: `address of this leader's admin listener: /v1/faults, /metrics, /healthz ("" (default): none)`},
			noSyncFlag(), retentionFlag(), producerExpirationFlag(), cleanerBackoffFlag(),
		}, limitsFlags()...),
		Action: func(c *cli.Context) error {
			if err := checkServerFlags(c); err != nil {
				return err
			}
			setServerGC()
			sigs := stopSignals()
			defer signal.Stop(sigs)
			view, err := loadCluster(c)
			if err != nil {
				return err
			}
			if c.Int("node-id") < 0 {
				return usagef("--node-id N is required")
			}
			lim, err := limits(c)
			if err != nil {
				return err
			}
			layout := node.NodeLayout(view.File(), int32(c.Int("node-id")), "leader")
			if err := checkNodeLayout(c.String("data-dir"), layout); err != nil {
				return err
			}
			id := int32(c.Int("node-id"))
			metrics := node.NewMetrics()
			// Faults on demand reach this node's listener through its
			// admin listener: a kill stops the node and its restart
			// reopens it, the process staying up. A leader process sends
			// no markers: it holds none.
			injected := faults.New(func(n int32) bool { return n == id }, func(int32) bool { return false }, metrics, logger)
			defer injected.Close()
			own, err := node.StartOwnLeader(node.LeaderConfig{
				View: view, NodeID: id, KafkaVersion: c.String("kafka-version"),
				DataDir: c.String("data-dir"), RetentionBytes: c.Int64("retention-bytes"),
				ProducerIDExpiration: c.Duration("producer-id-expiration"),
				CleanerBackoff:       c.Duration("log-cleaner-backoff"),
				UnsafeNoSync:         c.Bool("unsafe-no-fsync"), Log: logger, Metrics: metrics, Limits: lim, Faults: injected,
			})
			if err != nil {
				if strings.Contains(err.Error(), "not a leader") {
					return usageError{err}
				}
				return err
			}
			l := own.Current()
			if err := node.WriteLayout(c.String("data-dir"), layout); err != nil {
				own.Stop(context.Background())
				return err
			}
			adm, err := startProcessAdmin(c, view, own.Stop, func(a string, auth admin.Auth) (*admin.Server, error) {
				return admin.StartFaults(a, injected, metrics, auth, logger)
			})
			if err != nil {
				return err
			}
			if adm != nil {
				fmt.Fprintf(c.App.Writer, "txncoord ready leader=%d addr=%s admin=%s\n", l.Node.NodeID, l.Server.Addr(), adm.URL())
			} else {
				fmt.Fprintf(c.App.Writer, "txncoord ready leader=%d addr=%s\n", l.Node.NodeID, l.Server.Addr())
			}
			return waitAndStop(sigs, func(ctx context.Context) error {
				if adm != nil {
					adm.Shutdown(ctx)
				}
				injected.Close()
				return own.Stop(ctx)
			})
		},
	}
}

// startProcessAdmin starts the admin listener of a coordinator or leader
// process on --admin-listen (none when it is ""), behind the cluster
// file's token; on an error it stops the node.
func startProcessAdmin(c *cli.Context, view *cluster.View, stop func(context.Context) error, start func(addr string, auth admin.Auth) (*admin.Server, error)) (*admin.Server, error) {
	a := c.String("admin-listen")
	if a == "" {
		return nil, nil
	}
	token, open, err := node.AdminToken(view.File())
	if err == nil {
		var adm *admin.Server
		if adm, err = start(a, admin.Auth{Token: token, Open: open}); err == nil {
			return adm, nil
		}
	}
	stop(context.Background())
	return nil, err
}

// checkNodeLayout refuses to start a coordinator or leader process on a data
// dir that holds another layout (node.CheckLayout): a usage error, exit 2.
func checkNodeLayout(dataDir string, want node.Layout) error {
	err := node.CheckLayout(dataDir, want, nil)
	if errors.Is(err, node.ErrLayoutChanged) {
		return usageError{err}
	}
	return err
}

// portsFree checks that each address ("" or port 0: skipped) can be
// listened on now, by listening and closing at once.
func portsFree(addrs []string) error {
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); a == "" || (err == nil && port == "0") {
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("listen %s: %w (nothing was started or written)", a, err)
		}
		ln.Close()
	}
	return nil
}
