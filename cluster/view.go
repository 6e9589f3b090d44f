package cluster

import (
	"time"

	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/topicconfig"
	"github.com/txncoord/txncoord/wire"
)

// Topic is one topic of the view.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Internal marks __consumer_offsets (Metadata IsInternal): it is led
	// by the coordinator node, where the group coordinator serves it.
	Internal bool
	// Replicas, when set, are the replica lists of the partitions placed
	// by hand (CreateTopics or CreatePartitions assignments, a
	// reassignment), by partition: the first replica leads and holds the
	// partition's one copy; the others are recorded and reported, not
	// written. A partition beyond it, or with an empty list, is placed by
	// the rule (LeaderIndex).
	Replicas [][]int32
	// ReplicationFactor is the replica count reported for a partition
	// placed by the rule (0 or 1: its leader alone).
	ReplicationFactor int16
}

// Equal reports whether t and o are the same topic with the same
// partitions and placement.
func (t Topic) Equal(o Topic) bool {
	return t.Name == o.Name && t.ID == o.ID && t.Partitions == o.Partitions && t.Internal == o.Internal &&
		t.ReplicationFactor == o.ReplicationFactor && slices.EqualFunc(t.Replicas, o.Replicas, slices.Equal[[]int32])
}

// OffsetsTopic is Kafka's internal topic of committed group offsets. It
// exists in every view with File.OffsetsPartitions partitions, all led by
// the coordinator node; its partition of a group is OffsetsPartitionFor.
const OffsetsTopic = "__consumer_offsets"

// DefaultOffsetsPartitions is Kafka's offsets.topic.num.partitions default.
const DefaultOffsetsPartitions = 50

// OffsetsPartitionFor is the __consumer_offsets partition of a group:
// Kafka's GroupCoordinator.partitionFor, abs(Java String.hashCode) mod n.
// Clients never compute it, but AddOffsetsToTxn (coordinator) and the group
// coordinator must agree on it, and the number is visible in markers.
func OffsetsPartitionFor(group string, n int32) int32 {
	var h int32
	for _, r := range group { // Java hashes UTF-16 code units
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -1<<31 {
		h = 0 // Kafka's Utils.abs maps MIN_VALUE to 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// View is the cluster as every node presents it in Metadata. It is safe for
// concurrent use. Its topics change after start: created, deleted or grown
// by the controller (package topics), which calls SetTopic and RemoveTopic
// once its change is durable; a node in a process of its own learns the
// same changes from the controller and applies them the same way. Without a
// controller (SetCreator never called) unknown topics are auto-created
// locally with default_partitions, as every node derives the same topic.
type View struct {
	file *File
	// auth is the process's security metadata (ACLs, SCRAM
	// credentials): the controller's node opens it in its store, and
	// every listener of the process authorizes and logs in with it.
	auth *authmeta.State

	mu      sync.RWMutex
	topics  map[string]Topic
	byID    map[[16]byte]string
	configs map[string]map[string]string // a topic's explicit configs (none: absent)
	// values are the configs of configs resolved (topicconfig.Resolve),
	// what a leader enforces at each produce; absent: the defaults.
	values map[string]topicconfig.Values
	// broker are the file's broker configs (File.BrokerConfigs), and
	// defaults the configs of a topic with none of its own resolved
	// against them.
	broker   map[string]string
	defaults topicconfig.Values
	// groupConfigs are the groups' explicit configs (ConfigResource
	// GROUP: share.*, consumer.*), set by the controller once durable.
	groupConfigs map[string]map[string]string

	creator   atomic.Pointer[func(string) (Topic, error)]
	groupHook atomic.Pointer[func(partition int32) (Node, bool)]
	ctlHook   atomic.Pointer[func() (Node, bool)]
	liveHook  atomic.Pointer[func() (map[int32]bool, bool)]
	onMiss    atomic.Pointer[func(string)]
	hooksMu   sync.Mutex
	onRemoved []func(Topic)
}

// NewView builds the view of a validated file.
func NewView(f *File) *View {
	v := &View{file: f, topics: map[string]Topic{}, byID: map[[16]byte]string{}, configs: map[string]map[string]string{},
		values: map[string]topicconfig.Values{}, groupConfigs: map[string]map[string]string{}, auth: authmeta.New(),
		broker: f.BrokerConfigs()}
	v.defaults = topicconfig.Resolve(nil, v.broker)
	for name, n := range f.Topics {
		v.addLocked(name, n)
	}
	v.auth.SetSupportedFeatures(func() map[string][2]int16 {
		return map[string][2]int16{"transaction.version": {0, v.supportedTransactionVersion()}}
	})
	offsets := v.addLocked(OffsetsTopic, v.OffsetsPartitions())
	offsets.Internal = true
	v.topics[OffsetsTopic] = offsets
	return v
}

// AuthMeta is the process's security metadata: ACLs and SCRAM
// credentials (package authmeta).
func (v *View) AuthMeta() *authmeta.State { return v.auth }

// OffsetsPartitions is the partition count of __consumer_offsets.
func (v *View) OffsetsPartitions() int32 {
	if v.file.OffsetsPartitions > 0 {
		return v.file.OffsetsPartitions
	}
	return DefaultOffsetsPartitions
}

// GroupCoordinator is the node that coordinates every consumer group and
// leads __consumer_offsets (Kafka co-locates the group coordinator with
// that partition's leader): the coordinator node, or, with several
// coordinators on etcd, the one the hook SetGroupCoordinator installed
// names (node 0 while it names none).
func (v *View) GroupCoordinator() Node {
	n, _ := v.groupCoordinator()
	return n
}

// groupCoordinator is GroupCoordinator and whether a node holds it.
func (v *View) groupCoordinator() (Node, bool) { return v.groupCoordinatorOf(0) }

// groupCoordinatorOf is the node coordinating the groups of
// __consumer_offsets partition p (and leading it), and whether a node
// does.
func (v *View) groupCoordinatorOf(p int32) (Node, bool) {
	if fn := v.groupHook.Load(); fn != nil {
		if n, ok := (*fn)(p); ok {
			return n, true
		}
		return v.Coordinator(), false
	}
	return v.Coordinator(), true
}

// GroupCoordinatorOf is the node coordinating the groups of
// __consumer_offsets partition p, and whether a node does now.
func (v *View) GroupCoordinatorOf(p int32) (Node, bool) { return v.groupCoordinatorOf(p) }

// SetGroupCoordinator makes fn name the group coordinator node: the
// coordinator holding the group coordinator's etcd lease. fn
// returns false while none does: FindCoordinator for groups then answers
// COORDINATOR_NOT_AVAILABLE and __consumer_offsets has no leader.
func (v *View) SetGroupCoordinator(fn func() (Node, bool)) {
	v.SetGroupCoordinatorOf(func(int32) (Node, bool) { return fn() })
}

// SetGroupCoordinatorOf makes fn name the node coordinating the groups of
// each __consumer_offsets partition (and leading it), when the groups are
// spread over the coordinators by partition; fn returns false while no
// node owns the partition (a takeover).
func (v *View) SetGroupCoordinatorOf(fn func(partition int32) (Node, bool)) { v.groupHook.Store(&fn) }

// Controller is the node Metadata and DescribeCluster name as
// ControllerID: the coordinator (node 0), or with several coordinators
// on etcd the one holding the controller's lease (SetController); while
// none holds it, node 0.
func (v *View) Controller() Node {
	if fn := v.ctlHook.Load(); fn != nil {
		if n, ok := (*fn)(); ok {
			return n
		}
	}
	return v.Coordinator()
}

// SetController makes fn name the controller: the coordinator holding
// the controller's etcd lease; fn returns false while none does.
func (v *View) SetController(fn func() (Node, bool)) { v.ctlHook.Store(&fn) }

// File returns the cluster file the view was built from.
func (v *View) File() *File { return v.file }

// ClusterID is the cluster's id.
func (v *View) ClusterID() string { return v.file.ClusterID }

// Coordinator is the coordinator node: the first (node 0) when the file
// names several.
func (v *View) Coordinator() Node {
	if v.file.Coordinator != nil {
		return *v.file.Coordinator
	}
	return v.file.Coordinators[0]
}

// Coordinators are the coordinator nodes, 0..C-1: one unless the file
// names several (then TransactionStatePartitions and Etcd matter).
func (v *View) Coordinators() []Node { return v.file.CoordinatorNodes() }

// TransactionStatePartitions is the partition count of __transaction_state:
// a transactional id belongs to partition fnv32a(id) mod this.
func (v *View) TransactionStatePartitions() int32 {
	if v.file.TransactionStatePartitions > 0 {
		return v.file.TransactionStatePartitions
	}
	return DefaultTransactionStatePartitions
}

// Etcd is the file's etcd section with its defaults: the prefix is
// DefaultEtcdPrefix(cluster_id) when the file names none; no endpoints
// means no etcd is configured.
func (v *View) Etcd() Etcd {
	var e Etcd
	if v.file.Etcd != nil {
		e.Endpoints = append([]string(nil), v.file.Etcd.Endpoints...)
		e.Prefix = v.file.Etcd.Prefix
		e.LeaseTTLSeconds = v.file.Etcd.LeaseTTLSeconds
	}
	if e.LeaseTTLSeconds == 0 {
		e.LeaseTTLSeconds = DefaultLeaseTTLSeconds
	}
	if e.Prefix == "" {
		e.Prefix = DefaultEtcdPrefix(v.file.ClusterID)
	}
	return e
}

// Leaders are the leader nodes in file order.
func (v *View) Leaders() []Node { return v.file.Leaders }

// LiveBrokers are the brokers Metadata and DescribeCluster list: every
// node, or with several coordinators on etcd, every leader and the
// coordinators the hook SetLiveCoordinators names (those holding a
// lease), as Kafka leaves a fenced broker out: a client that picks a
// broker at random for its next request must not pick a coordinator that
// stopped answering.
func (v *View) LiveBrokers() []Node {
	fn := v.liveHook.Load()
	if fn == nil {
		return v.Brokers()
	}
	live, ok := (*fn)()
	if !ok {
		return v.Brokers()
	}
	var out []Node
	for _, n := range v.file.CoordinatorNodes() {
		if live[n.NodeID] {
			out = append(out, n)
		}
	}
	return append(out, v.file.Leaders...)
}

// SetLiveCoordinators installs LiveBrokers' hook: fn returns the
// coordinators holding a lease, or false when it cannot tell (then every
// node is listed).
func (v *View) SetLiveCoordinators(fn func() (map[int32]bool, bool)) { v.liveHook.Store(&fn) }

// PartitionNodes are the nodes that can lead a partition placed by hand
// and count toward a replication factor: the brokers Metadata lists
// (LiveBrokers). Every coordinator node is a KRaft combined node (broker
// and controller) that leads the partitions placed on it besides
// __consumer_offsets; with several coordinators on etcd one that holds no
// lease is left out, as Kafka's controller refuses a fenced broker.
func (v *View) PartitionNodes() []Node { return v.LiveBrokers() }

// Brokers are all nodes: the coordinators, then the leaders.
func (v *View) Brokers() []Node {
	return append(v.file.CoordinatorNodes(), v.file.Leaders...)
}

// Node returns the node with id.
func (v *View) Node(id int32) (Node, bool) {
	for _, n := range v.Brokers() {
		if n.NodeID == id {
			return n, true
		}
	}
	return Node{}, false
}

// TopicID derives a topic's id from the cluster id and the topic name, so
// every node computes the same id. It is never the zero (null) UUID.
func TopicID(clusterID, topic string) [16]byte {
	sum := sha256.Sum256([]byte(clusterID + "\x00" + topic))
	var id [16]byte
	copy(id[:], sum[:16])
	if id == [16]byte{} {
		id[15] = 1
	}
	return id
}

// TopicIDOf is the id of the given incarnation of a topic: incarnation 0,
// a topic never deleted, has TopicID(clusterID, topic), as every node
// derives it; a topic deleted and created again n times is incarnation n
// and gets another id, as Kafka gives a re-created topic a new one (clients
// key their state by it). Only the controller knows the incarnation: other
// nodes learn the id from it.
func TopicIDOf(clusterID, topic string, incarnation uint32) [16]byte {
	if incarnation == 0 {
		return TopicID(clusterID, topic)
	}
	return TopicID(clusterID, topic+"\x00"+strconv.FormatUint(uint64(incarnation), 10))
}

func (v *View) addLocked(name string, partitions int32) Topic {
	t := Topic{Name: name, ID: TopicID(v.file.ClusterID, name), Partitions: partitions}
	v.topics[name] = t
	v.byID[t.ID] = name
	return t
}

// Topic returns a known topic. A miss tells the hook of SetMissHook (a
// node that learns topics from the controller refreshes at once).
func (v *View) Topic(name string) (Topic, bool) {
	v.mu.RLock()
	t, ok := v.topics[name]
	v.mu.RUnlock()
	if !ok {
		if miss := v.onMiss.Load(); miss != nil {
			(*miss)(name)
		}
	}
	return t, ok
}

// Known is Topic without the miss hook: for the code that fills the view.
func (v *View) Known(name string) (Topic, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	t, ok := v.topics[name]
	return t, ok
}

// TopicByID returns a known topic by id.
func (v *View) TopicByID(id [16]byte) (Topic, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	name, ok := v.byID[id]
	if !ok {
		return Topic{}, false
	}
	return v.topics[name], true
}

// codedError is err, with code to errors.As.
type codedError struct {
	code *kerr.Error
	err  error
}

func (e codedError) Error() string   { return e.err.Error() }
func (e codedError) Unwrap() []error { return []error{e.err, e.code} }

// ErrAutoCreateDisabled answers EnsureTopic for an unknown topic when
// auto.create.topics.enable is off: Metadata then answers
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka does.
var ErrAutoCreateDisabled = fmt.Errorf("auto.create.topics.enable is false: %w", kerr.UnknownTopicOrPartition)

// EnsureTopic returns the topic, auto-creating it when it does not exist:
// through the creator of SetCreator (the controller, or a node asking the
// controller), else locally with default_partitions (every node derives the
// same topic from the name). Invalid names are refused
// (INVALID_TOPIC_EXCEPTION); with auto-creation off, an unknown topic is
// ErrAutoCreateDisabled. Errors wrap a kerr code.
func (v *View) EnsureTopic(name string) (Topic, error) {
	if t, ok := v.Topic(name); ok {
		return t, nil
	}
	if err := ValidTopicName(name); err != nil {
		return Topic{}, codedError{kerr.InvalidTopicException, err}
	}
	if create := v.creator.Load(); create != nil {
		return (*create)(name)
	}
	if !v.AutoCreateTopics() {
		return Topic{}, ErrAutoCreateDisabled
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.topics[name]; ok {
		return t, nil
	}
	return v.addLocked(name, v.file.DefaultPartitions), nil
}

// DefaultGroupInitialRebalanceDelay is Kafka's
// group.initial.rebalance.delay.ms default.
const DefaultGroupInitialRebalanceDelay = 3 * time.Second

// GroupInitialRebalanceDelay is the broker setting
// group.initial.rebalance.delay.ms (the cluster file's
// group_initial_rebalance_delay_ms, Kafka's 3 s when unset).
func (v *View) GroupInitialRebalanceDelay() time.Duration {
	if d := v.file.GroupInitialRebalanceDelayMs; d != nil {
		return time.Duration(*d) * time.Millisecond
	}
	return DefaultGroupInitialRebalanceDelay
}

// AutoCreateTopics is the broker setting auto.create.topics.enable (the
// cluster file's auto_create_topics_enable, default true as in Kafka).
func (v *View) AutoCreateTopics() bool {
	return v.file.AutoCreateTopicsEnable == nil || *v.file.AutoCreateTopicsEnable
}

// SetCreator makes create the way EnsureTopic makes an unknown topic (nil:
// locally, as without a controller). create is given a valid name and
// returns the topic once it exists in this view.
func (v *View) SetCreator(create func(name string) (Topic, error)) {
	if create == nil {
		v.creator.Store(nil)
		return
	}
	v.creator.Store(&create)
}

// SetMissHook makes Topic call miss with every name it does not know. miss
// must not block: it runs on request paths.
func (v *View) SetMissHook(miss func(name string)) {
	if miss == nil {
		v.onMiss.Store(nil)
		return
	}
	v.onMiss.Store(&miss)
}

// OnTopicRemoved registers fn, called after a topic left the view: deleted,
// or replaced by a topic of the same name and another id (deleted and
// created again). Leaders drop its data there. fn runs on the caller of
// RemoveTopic or SetTopic, outside the view's lock.
func (v *View) OnTopicRemoved(fn func(Topic)) {
	v.hooksMu.Lock()
	v.onRemoved = append(v.onRemoved, fn)
	v.hooksMu.Unlock()
}

func (v *View) removed(t Topic) {
	v.hooksMu.Lock()
	hooks := append([]func(Topic){}, v.onRemoved...)
	v.hooksMu.Unlock()
	for _, fn := range hooks {
		fn(t)
	}
}

// SetTopic adds t, or replaces the topic of its name (a new partition
// count or configs), with configs as its explicit topic configs (nil:
// none). It runs no hooks: a caller that knows the name was deleted and
// created again in between calls RemoveTopic first. Internal topics are
// the file's and never replaced.
func (v *View) SetTopic(t Topic, configs map[string]string) {
	if t.Name == OffsetsTopic {
		return
	}
	v.mu.Lock()
	if old, had := v.topics[t.Name]; had && old.ID != t.ID {
		delete(v.byID, old.ID)
	}
	t.Internal = false
	v.topics[t.Name] = t
	v.byID[t.ID] = t.Name
	if len(configs) > 0 {
		v.configs[t.Name] = maps.Clone(configs)
		v.values[t.Name] = topicconfig.Resolve(configs, v.broker)
	} else {
		delete(v.configs, t.Name)
		delete(v.values, t.Name)
	}
	v.mu.Unlock()
}

// RemoveTopic removes a topic (not an internal one) and runs the
// OnTopicRemoved hooks; false if it was not there.
func (v *View) RemoveTopic(name string) bool {
	v.mu.Lock()
	t, ok := v.topics[name]
	if !ok || t.Internal {
		v.mu.Unlock()
		return false
	}
	delete(v.topics, name)
	delete(v.byID, t.ID)
	delete(v.configs, name)
	delete(v.values, name)
	v.mu.Unlock()
	v.removed(t)
	return true
}

// TopicConfigs returns a copy of a topic's explicit configs (nil: none,
// or no such topic): every other config has its default.
func (v *View) TopicConfigs(name string) map[string]string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.configs[name])
}

// SetGroupConfigs sets a group's explicit configs (none: removes them).
func (v *View) SetGroupConfigs(group string, configs map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(configs) == 0 {
		delete(v.groupConfigs, group)
		return
	}
	v.groupConfigs[group] = maps.Clone(configs)
}

// GroupConfigs returns a copy of a group's explicit configs (nil: none).
func (v *View) GroupConfigs(group string) map[string]string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.groupConfigs[group])
}

// GroupsWithConfigs lists the groups that have explicit configs, sorted.
func (v *View) GroupsWithConfigs() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return slices.Sorted(maps.Keys(v.groupConfigs))
}

// TopicValues is a topic's configs resolved against the file's broker
// configs and Kafka's defaults (topicconfig.Resolve), computed when they
// were set: what a leader reads at every produce.
func (v *View) TopicValues(name string) topicconfig.Values {
	v.mu.RLock()
	vals, ok := v.values[name]
	v.mu.RUnlock()
	if !ok {
		return v.defaults
	}
	return vals
}

// Topics returns every known topic, sorted by name.
func (v *View) Topics() []Topic {
	v.mu.RLock()
	out := make([]Topic, 0, len(v.topics))
	for _, t := range v.topics {
		out = append(out, t)
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LeaderIndex is the index into Leaders of partition p of topic t:
// (fnv32a(t) + p) mod len(leaders).
func LeaderIndex(topic string, partition int32, leaders int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((uint64(h.Sum32()) + uint64(uint32(partition))) % uint64(leaders))
}

// LeaderOf returns the leader of a partition of a known topic; every
// partition of __consumer_offsets is led by the coordinator node.
func (v *View) LeaderOf(topic string, partition int32) (Node, bool) {
	t, ok := v.Topic(topic)
	if !ok || partition < 0 || partition >= t.Partitions {
		return Node{}, false
	}
	if t.Internal {
		return v.groupCoordinatorOf(partition)
	}
	if int(partition) < len(t.Replicas) && len(t.Replicas[partition]) > 0 {
		return v.Node(t.Replicas[partition][0])
	}
	return v.file.Leaders[LeaderIndex(topic, partition, len(v.file.Leaders))], true
}

// ReplicasOf is a partition's replica list as Metadata reports it: the
// list placed by hand, or the rule's leader followed by the partition
// brokers after it (in Brokers order, wrapping) up to the topic's
// replication factor. Only the first replica, the leader, holds the
// partition: txncoord keeps one copy, so the in-sync replica set is the
// leader alone.
func (v *View) ReplicasOf(topic string, partition int32) []int32 {
	t, ok := v.Topic(topic)
	leader, led := v.LeaderOf(topic, partition)
	if !ok || !led {
		return []int32{leader.NodeID}
	}
	if int(partition) < len(t.Replicas) && len(t.Replicas[partition]) > 0 {
		return slices.Clone(t.Replicas[partition])
	}
	out := []int32{leader.NodeID}
	// Every broker, live or not: a partition's replicas do not change as
	// a coordinator's lease comes and goes.
	nodes := v.Brokers()
	at := slices.IndexFunc(nodes, func(n Node) bool { return n.NodeID == leader.NodeID })
	for i := 1; i < len(nodes) && len(out) < int(t.ReplicationFactor) && !t.Internal; i++ {
		out = append(out, nodes[(at+i)%len(nodes)].NodeID)
	}
	return out
}

// TransactionVersion is the finalized transaction.version: 2 when every
// leader supports Produce v12+ (Kafka 4.0+) and every coordinator EndTxn v5;
// otherwise 0. kgo switches to TV2 on this feature alone, without checking
// each leader's Produce range, so advertising 2 with an older leader would
// break every transaction touching it (clients.md §1).
//
// A level UpdateFeatures finalized (a downgrade) caps it.
func (v *View) TransactionVersion() int16 {
	tv := v.supportedTransactionVersion()
	if level, ok := v.auth.FinalizedFeature("transaction.version"); ok && level < tv {
		return level
	}
	return tv
}

// supportedTransactionVersion is the highest transaction.version every
// node supports.
func (v *View) supportedTransactionVersion() int16 {
	for _, c := range v.file.CoordinatorNodes() {
		if negotiation.MaxVersion(c.KafkaVersion, 26) < 5 {
			return 0
		}
	}
	for _, l := range v.file.Leaders {
		if negotiation.MaxVersion(l.KafkaVersion, 0) < 12 {
			return 0
		}
	}
	return 2
}

// Features returns the ApiVersions features of a node running kafkaVersion:
// transaction.version 0–2 is supported from Kafka 4.0 (Produce v12); the
// finalized level is the cluster's. share.version 0–1 is supported from
// Kafka 4.1 (ShareGroupHeartbeat v1) and finalized at 1 when every node
// serves share groups at Kafka 4.2's versions (ShareFetch v2): Kafka 4.2
// makes share groups production-ready and a new 4.2 cluster finalizes
// share.version=1 (4.1 needs kafka-features.sh to enable the preview).
func (v *View) Features(kafkaVersion string) wire.Features {
	var f wire.Features
	if negotiation.MaxVersion(kafkaVersion, 0) >= 12 {
		f.Supported = append(f.Supported, wire.SupportedFeature{Name: "transaction.version", Min: 0, Max: 2})
	}
	if negotiation.MaxVersion(kafkaVersion, 76) >= 1 {
		f.Supported = append(f.Supported, wire.SupportedFeature{Name: "share.version", Min: 0, Max: 1})
	}
	f.Finalized = append(f.Finalized, wire.FinalizedFeature{Name: "transaction.version", Level: v.TransactionVersion()})
	if v.ShareVersion() > 0 {
		f.Finalized = append(f.Finalized, wire.FinalizedFeature{Name: "share.version", Level: v.ShareVersion()})
	}
	f.FinalizedEpoch = v.auth.FeatureEpoch()
	return f
}

// ShareVersion is the cluster's finalized share.version: 1 when every
// node's profile has ShareFetch v2 (Kafka 4.2+), otherwise 0.
func (v *View) ShareVersion() int16 {
	for _, c := range v.file.CoordinatorNodes() {
		if negotiation.MaxVersion(c.KafkaVersion, 78) < 2 {
			return 0
		}
	}
	for _, l := range v.file.Leaders {
		if negotiation.MaxVersion(l.KafkaVersion, 78) < 2 {
			return 0
		}
	}
	return 1
}

// hostPort splits a node address for Metadata.
func hostPort(addr string) (string, int32) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}
