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
)

// Node is one Kafka listener of the cluster.
type Node struct {
	NodeID       int32  `yaml:"node_id" json:"node_id"`
	Addr         string `yaml:"addr" json:"addr"`
	KafkaVersion string `yaml:"kafka_version" json:"kafka_version"`
}

// File is the cluster file (architecture.md "Cluster file").
type File struct {
	ClusterID         string           `yaml:"cluster_id"`
	Coordinator       *Node            `yaml:"coordinator"`
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
	// Security, when set, turns on TLS/SASL on every listener, cluster
	// authorization of broker-only APIs, and the admin API's token.
	Security *security.Settings `yaml:"security,omitempty"`
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
	return &f, nil
}

// unknownField rewrites yaml's "field x not found in type cluster.File".
var unknownField = regexp.MustCompile(`^(line \d+: )field (\S+) not found in type \S+$`)

// Validate returns one error per problem, joined.
func (f *File) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if f.Coordinator == nil {
		add("missing coordinator: the file needs coordinator: {node_id, addr, kafka_version}")
	}
	if len(f.Leaders) == 0 {
		add("no leaders: at least one leader is needed")
	}
	if f.DefaultPartitions < 1 {
		add("default_partitions must be at least 1, got %d", f.DefaultPartitions)
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
	if f.Coordinator != nil {
		check("coordinator", *f.Coordinator)
	}
	for i, l := range f.Leaders {
		check(fmt.Sprintf("leaders[%d]", i), l)
	}
	if f.OffsetsPartitions < 0 {
		add("offsets_partitions must be at least 1 (or left out for %d), got %d", DefaultOffsetsPartitions, f.OffsetsPartitions)
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
		if n := f.Topics[name]; n < 1 {
			add("topics: %s: partition count must be at least 1, got %d", name, n)
		}
	}
	return errors.Join(errs...)
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
