package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/topicconfig"
)

// Node is one Kafka listener of the cluster.
type Node struct {
	NodeID       int32  `yaml:"node_id" json:"node_id"`
	Addr         string `yaml:"addr" json:"addr"`
	KafkaVersion string `yaml:"kafka_version" json:"kafka_version"`
}

// File is the cluster file (architecture.md "Cluster file" and "Several
// coordinators (etcd)").
type File struct {
	ClusterID string `yaml:"cluster_id"`
	// Coordinator is the single-coordinator form, today's default.
	// Coordinators is the list form; Parse turns a list of one into the
	// single form, so Coordinator is nil only with several coordinators.
	// CoordinatorNodes reads either.
	Coordinator       *Node            `yaml:"coordinator,omitempty"`
	Coordinators      []Node           `yaml:"coordinators,omitempty"`
	Leaders           []Node           `yaml:"leaders"`
	DefaultPartitions int32            `yaml:"default_partitions"`
	Topics            map[string]int32 `yaml:"topics,omitempty"`
	// OffsetsPartitions is the partition count of __consumer_offsets
	// (Kafka's offsets.topic.num.partitions); 0 means 50.
	OffsetsPartitions int32 `yaml:"offsets_partitions,omitempty"`
	// AutoCreateTopicsEnable is Kafka's broker setting
	// auto.create.topics.enable: whether Metadata (AllowAutoTopicCreation)
	// creates an unknown topic. nil means true, Kafka's default.
	AutoCreateTopicsEnable *bool `yaml:"auto_create_topics_enable,omitempty"`
	// GroupInitialRebalanceDelayMs is Kafka's
	// group.initial.rebalance.delay.ms: how long the first rebalance of
	// an empty classic group waits for more members. nil means 3000,
	// Kafka's default; 0 rebalances at once.
	GroupInitialRebalanceDelayMs *int32 `yaml:"group_initial_rebalance_delay_ms,omitempty"`
	// Security, when set, turns on TLS/SASL on every listener, cluster
	// authorization of broker-only APIs, and the admin API's token.
	Security *security.Settings `yaml:"security,omitempty"`
	// Etcd is where several coordinators keep their shared state; it is
	// required with more than one coordinator.
	Etcd *Etcd `yaml:"etcd,omitempty"`
	// TransactionStatePartitions is the partition count of
	// __transaction_state (Kafka's transaction.state.log.num.partitions):
	// a transactional id belongs to partition fnv32a(id) mod this. 0 means
	// DefaultTransactionStatePartitions.
	TransactionStatePartitions int32 `yaml:"transaction_state_partitions,omitempty"`
	// The log cleaner's broker defaults, Kafka's broker configs of the
	// same names (log.cleanup.policy, log.cleaner.delete.retention.ms,
	// ...): a topic that does not set cleanup.policy,
	// delete.retention.ms, min.compaction.lag.ms, max.compaction.lag.ms
	// or min.cleanable.dirty.ratio inherits them (STATIC_BROKER_CONFIG);
	// nil means Kafka's default. BrokerConfigs names them as Kafka does.
	LogCleanupPolicy             *string  `yaml:"log_cleanup_policy,omitempty"`
	LogCleanerDeleteRetentionMs  *int64   `yaml:"log_cleaner_delete_retention_ms,omitempty"`
	LogCleanerMinCompactionLagMs *int64   `yaml:"log_cleaner_min_compaction_lag_ms,omitempty"`
	LogCleanerMaxCompactionLagMs *int64   `yaml:"log_cleaner_max_compaction_lag_ms,omitempty"`
	LogCleanerMinCleanableRatio  *float64 `yaml:"log_cleaner_min_cleanable_ratio,omitempty"`
}

// brokerConfigKeys are the cluster-file keys of Kafka broker configs, in
// the file's order, with the Kafka name of each.
var brokerConfigKeys = []struct{ key, kafka string }{
	{"log_cleanup_policy", "log.cleanup.policy"},
	{"log_cleaner_delete_retention_ms", "log.cleaner.delete.retention.ms"},
	{"log_cleaner_min_compaction_lag_ms", "log.cleaner.min.compaction.lag.ms"},
	{"log_cleaner_max_compaction_lag_ms", "log.cleaner.max.compaction.lag.ms"},
	{"log_cleaner_min_cleanable_ratio", "log.cleaner.min.cleanable.ratio"},
}

// brokerConfigValues are the broker configs the file sets, by cluster-file
// key, as Kafka prints them.
func (f *File) brokerConfigValues() map[string]string {
	m := map[string]string{}
	num := func(key string, v *int64) {
		if v != nil {
			m[key] = strconv.FormatInt(*v, 10)
		}
	}
	if f.LogCleanupPolicy != nil {
		m["log_cleanup_policy"] = *f.LogCleanupPolicy
	}
	num("log_cleaner_delete_retention_ms", f.LogCleanerDeleteRetentionMs)
	num("log_cleaner_min_compaction_lag_ms", f.LogCleanerMinCompactionLagMs)
	num("log_cleaner_max_compaction_lag_ms", f.LogCleanerMaxCompactionLagMs)
	if f.LogCleanerMinCleanableRatio != nil {
		m["log_cleaner_min_cleanable_ratio"] = topicconfig.JavaDouble(*f.LogCleanerMinCleanableRatio)
	}
	return m
}

// BrokerConfigs are the Kafka broker configs the file sets (name →
// value): every node reports them as STATIC_BROKER_CONFIG, and a topic
// that does not set the topic config they default inherits them.
func (f *File) BrokerConfigs() map[string]string {
	m := map[string]string{}
	vals := f.brokerConfigValues()
	for _, k := range brokerConfigKeys {
		if v, ok := vals[k.key]; ok {
			m[k.kafka] = v
		}
	}
	return m
}

// validateBrokerConfigs checks each broker config the file sets against
// Kafka's definition (type, range, valid values), with Kafka's message.
func (f *File) validateBrokerConfigs(add func(string, ...any)) {
	vals := f.brokerConfigValues()
	for _, k := range brokerConfigKeys {
		v, ok := vals[k.key]
		if !ok {
			continue
		}
		d, _ := topicconfig.Broker(k.kafka)
		if err := topicconfig.ValidateValue(d, v); err != nil {
			add("%s: %v", k.key, err)
		}
	}
	if lo, hi := f.LogCleanerMinCompactionLagMs, f.LogCleanerMaxCompactionLagMs; lo != nil && hi != nil && *lo > *hi {
		add("log_cleaner_min_compaction_lag_ms (%d) must not be above log_cleaner_max_compaction_lag_ms (%d)", *lo, *hi)
	}
}

// Etcd is the etcd section of the cluster file.
type Etcd struct {
	// Endpoints are etcd client URLs (http://host:port, https://host:port)
	// or host:port.
	Endpoints []string `yaml:"endpoints,omitempty" json:"endpoints"`
	// Prefix is the key prefix of the cluster's state: "" means
	// DefaultEtcdPrefix(cluster_id).
	Prefix string `yaml:"prefix,omitempty" json:"prefix"`
	// LeaseTTLSeconds is the etcd lease of a coordinator's partitions (and
	// of the group coordinator's): how long a dead coordinator keeps them.
	// Every coordinator must use the same, so it lives here; a process's
	// --etcd-lease-ttl only overrides it. It must exceed etcd's election
	// time, or one election drops every lease. 0 means DefaultLeaseTTLSeconds.
	LeaseTTLSeconds int64 `yaml:"lease_ttl_seconds,omitempty" json:"lease_ttl_seconds,omitempty"`
}

// DefaultLeaseTTLSeconds is the etcd lease when the cluster file names
// none (ownership.DefaultLeaseTTL).
const DefaultLeaseTTLSeconds = 5

// DefaultTransactionStatePartitions is Kafka's
// transaction.state.log.num.partitions default.
const DefaultTransactionStatePartitions = 50

// DefaultEtcdPrefix is the etcd key prefix of a cluster that names none.
func DefaultEtcdPrefix(clusterID string) string { return "/txncoord/" + clusterID }

// CoordinatorNodes are the coordinators, whichever form the file uses:
// nodes 0..C-1 in order.
func (f *File) CoordinatorNodes() []Node {
	if f.Coordinator != nil {
		return []Node{*f.Coordinator}
	}
	return append([]Node(nil), f.Coordinators...)
}

// DefaultClusterID is used when the file names none.
const DefaultClusterID = "txncoord-local"

// LeaderClientID is the client id txncoord's leaders use toward the
// coordinator (AddPartitionsToTxn, forwarded InitProducerId). The
// coordinator lets only these leaders register a TV2 producer's next
// transaction while the previous one's markers are still being written:
// they hold a batch at the bumped epoch back until that marker is applied
// (leaderstub), which a Kafka broker does not do.
const LeaderClientID = "txncoord-leader"

// Load reads and validates a cluster file.
func Load(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	f, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("cluster file %s: %w", path, err)
	}
	if f.Security != nil {
		f.Security.Dir = filepath.Dir(path) // relative paths are the file's
	}
	return f, nil
}

// Parse decodes and validates a cluster file. Unknown fields are errors, so
// a typo does not silently fall back to a default.
func Parse(raw []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // EOF: empty file
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// One line per problem, not yaml's multi-line list.
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = unknownField.ReplaceAllString(m, "${1}unknown field $2")
			}
			return nil, fmt.Errorf("invalid cluster file: %s", strings.Join(msgs, "; "))
		}
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if f.ClusterID == "" {
		f.ClusterID = DefaultClusterID
	}
	if f.DefaultPartitions == 0 {
		f.DefaultPartitions = 3
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if len(f.Coordinators) == 1 {
		// A list of one is today's single coordinator: every caller
		// that reads Coordinator keeps working.
		f.Coordinator, f.Coordinators = &f.Coordinators[0], nil
	}
	return &f, nil
}

// unknownField rewrites yaml's "field x not found in type cluster.File".
var unknownField = regexp.MustCompile(`^(line \d+: )field (\S+) not found in type \S+$`)

// MaxPartitions is the most partitions one topic may have, the same limit
// for topics created with CreateTopics (topics.DefaultMaxPartitions), named
// in the cluster file, auto-created, and for the internal topics: every
// node lists every partition in Metadata and a leader keeps state per
// partition, so a count of millions costs every client's Metadata hundreds
// of megabytes.
const MaxPartitions = 10000

// Validate returns one error per problem, joined.
func (f *File) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case f.Coordinator != nil && len(f.Coordinators) > 0:
		add("coordinator and coordinators both given: use one form (coordinators: [...] for several)")
	case f.Coordinator == nil && len(f.Coordinators) == 0:
		add("missing coordinator: the file needs coordinator: {node_id, addr, kafka_version} or coordinators: [...]")
	}
	nc := int32(len(f.CoordinatorNodes())) // with both forms: the single one
	if len(f.Leaders) == 0 {
		add("no leaders: at least one leader is needed")
	}
	if f.DefaultPartitions < 1 || f.DefaultPartitions > MaxPartitions {
		add("default_partitions must be from 1 to %d, got %d", MaxPartitions, f.DefaultPartitions)
	}
	ids := map[int32]bool{}
	addrs := map[string]bool{}
	check := func(what string, n Node) {
		if n.NodeID < 0 {
			add("%s: node_id must not be negative, got %d", what, n.NodeID)
		}
		if ids[n.NodeID] {
			add("%s: duplicate node_id %d", what, n.NodeID)
		}
		ids[n.NodeID] = true
		if host, port, err := net.SplitHostPort(n.Addr); err != nil || host == "" {
			add("%s: addr %q is not host:port", what, n.Addr)
		} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			add("%s: addr %q: port must be a number from 1 to 65535", what, n.Addr)
		} else if addrs[n.Addr] {
			add("%s: duplicate addr %s", what, n.Addr)
		}
		addrs[n.Addr] = true
		if n.KafkaVersion == "" {
			add("%s: missing kafka_version (one of %v)", what, negotiation.ProfileNames())
		} else if _, err := negotiation.Profile(n.KafkaVersion); err != nil {
			add("%s: %v", what, err)
		}
	}
	// Node ids: coordinators 0..C-1 in order, leaders from C on, so a
	// node's id alone says what it is.
	if f.Coordinator != nil {
		if f.Coordinator.NodeID != 0 {
			add("coordinator: node_id must be 0 (coordinators are nodes 0..C-1, leaders C..), got %d", f.Coordinator.NodeID)
		}
		check("coordinator", *f.Coordinator)
	} else { // with both forms, their error says it all
		for i, c := range f.Coordinators {
			what := fmt.Sprintf("coordinators[%d]", i)
			if c.NodeID != int32(i) {
				add("%s: node_id must be %d (coordinators are nodes 0..%d in order, leaders from %d), got %d", what, i, nc-1, nc, c.NodeID)
			}
			check(what, c)
		}
	}
	for i, l := range f.Leaders {
		what := fmt.Sprintf("leaders[%d]", i)
		if l.NodeID >= 0 && l.NodeID < nc && !ids[l.NodeID] {
			add("%s: node_id must be at least %d (coordinators are nodes 0..%d), got %d", what, nc, nc-1, l.NodeID)
		}
		check(what, l)
	}
	if f.TransactionStatePartitions < 0 || f.TransactionStatePartitions > MaxPartitions {
		add("transaction_state_partitions must be from 1 to %d (or left out for %d), got %d", MaxPartitions, DefaultTransactionStatePartitions, f.TransactionStatePartitions)
	}
	f.validateEtcd(nc, add)
	f.validateBrokerConfigs(add)
	if d := f.GroupInitialRebalanceDelayMs; d != nil && *d < 0 {
		add("group_initial_rebalance_delay_ms must be 0 or more, got %d", *d)
	}
	if f.OffsetsPartitions < 0 || f.OffsetsPartitions > MaxPartitions {
		add("offsets_partitions must be from 1 to %d (or left out for %d), got %d", MaxPartitions, DefaultOffsetsPartitions, f.OffsetsPartitions)
	}
	if _, ok := f.Topics[OffsetsTopic]; ok {
		add("topics: %s is internal: set its partition count with offsets_partitions", OffsetsTopic)
	}
	names := make([]string, 0, len(f.Topics))
	for name := range f.Topics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := ValidTopicName(name); err != nil {
			add("topics: %v", err)
		}
		if n := f.Topics[name]; n < 1 || n > MaxPartitions {
			add("topics: %s: partition count must be from 1 to %d, got %d", name, MaxPartitions, n)
		}
	}
	return errors.Join(errs...)
}

// validateEtcd checks the etcd section: endpoints are needed as soon as
// several coordinators share state, and the prefix must make sound keys
// (<prefix>/txn/..., so a leading "/" and no trailing one).
func (f *File) validateEtcd(coordinators int32, add func(string, ...any)) {
	if f.Etcd == nil || len(f.Etcd.Endpoints) == 0 {
		if coordinators > 1 {
			add("etcd: endpoints are required with %d coordinators (etcd: {endpoints: [http://host:port, ...]})", coordinators)
		}
		if f.Etcd == nil {
			return
		}
	}
	seen := map[string]bool{}
	for i, e := range f.Etcd.Endpoints {
		if err := validEndpoint(e); err != nil {
			add("etcd: endpoints[%d] %q: %v", i, e, err)
		} else if seen[e] {
			add("etcd: endpoints[%d]: duplicate endpoint %s", i, e)
		}
		seen[e] = true
	}
	if p := f.Etcd.Prefix; p != "" && (!strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, " \t\n")) {
		add("etcd: prefix %q must start with \"/\", not end with \"/\" and hold no spaces (default %s)", p, DefaultEtcdPrefix(f.ClusterID))
	}
	if t := f.Etcd.LeaseTTLSeconds; t < 0 {
		add("etcd: lease_ttl_seconds must be at least 1 (or left out for %d), got %d", DefaultLeaseTTLSeconds, t)
	}
}

// validEndpoint accepts what etcd's client dials: http(s)://host:port or
// host:port.
func validEndpoint(e string) error {
	hostPort := e
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return fmt.Errorf("scheme must be http or https")
		}
		hostPort = strings.TrimSuffix(rest, "/")
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" {
		return fmt.Errorf("want http://host:port, https://host:port or host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port must be a number from 1 to 65535")
	}
	return nil
}

// ValidTopicName applies Kafka's topic name rules.
func ValidTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("invalid topic name %q", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("invalid topic name %q: character %q", name, c)
		}
	}
	return nil
}

// Leader returns the leader with node id id.
func (f *File) Leader(id int32) (Node, bool) {
	for _, l := range f.Leaders {
		if l.NodeID == id {
			return l, true
		}
	}
	return Node{}, false
}

// Write stores the file atomically (temp file, fsync, rename).
func (f *File) Write(path string) error {
	raw, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
