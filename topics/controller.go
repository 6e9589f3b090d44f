package topics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/topicconfig"
)

// SpaceName is the controller's space in the coordinator's store.
const SpaceName = "topics"

// DefaultMaxPartitions is txncoord's create-topic policy: more partitions
// per topic than this is POLICY_VIOLATION (every node lists every
// partition in Metadata, and a leader keeps state per partition); the
// cluster file's topics are held to the same limit.
const DefaultMaxPartitions = cluster.MaxPartitions

// Config configures a Controller.
type Config struct {
	View *cluster.View
	// Records, when set, keep the controller's records (etcd, under the
	// controller's lease); nil: the space SpaceName of Store.
	Records Records
	// Store holds the controller's space SpaceName (it must know
	// storage.KindTopic: ApplyRecord) unless Records are set, and the
	// security metadata (authmeta) when set: nil opens none, another
	// owner does.
	Store *storage.Store
	// MaxPartitions per topic (0: DefaultMaxPartitions).
	MaxPartitions int32
	Log           zerolog.Logger
}

// Controller owns topic existence, partition counts and configs.
type Controller struct {
	cfg  Config
	view *cluster.View
	recs Records
	auth bool // it opened the view's security metadata
	log  zerolog.Logger

	// mu serializes changes and is held while a change's record becomes
	// durable: topic changes are rare, and one at a time needs no
	// reasoning about overlapping creations of one name.
	mu     sync.Mutex
	topics map[string]state // by name, tombstones included
}

// Open opens the controller's records, loads every topic into the view and
// creates the cluster file's topics it has never had (a file topic deleted
// since stays deleted; one with fewer partitions than the file says is
// grown, as `up --topics` promises those counts).
func Open(cfg Config) (*Controller, error) {
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	recs := cfg.Records
	if recs == nil {
		var err error
		if recs, err = SpaceRecords(cfg.Store); err != nil {
			return nil, err
		}
	}
	c := &Controller{cfg: cfg, view: cfg.View, recs: recs, log: cfg.Log.With().Str("component", "controller").Logger()}
	var err error
	if c.topics, err = c.loadRecords(recs); err != nil {
		recs.Close()
		return nil, fmt.Errorf("topics: load: %w", err)
	}
	// The security metadata (ACLs, SCRAM credentials) is the
	// controller's too, in its own space of the same store.
	if cfg.Store != nil {
		if err := cfg.View.AuthMeta().Open(cfg.Store, cfg.Log); err != nil {
			recs.Close()
			return nil, err
		}
		c.auth = true
	}
	for _, s := range c.topics {
		c.publish(s)
	}
	if err := c.seed(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the controller's records (and the security metadata it
// opened).
func (c *Controller) Close() error {
	var err error
	if c.auth {
		err = c.view.AuthMeta().Close()
	}
	return errors.Join(err, c.recs.Close())
}

// seed creates or grows the cluster file's topics.
func (c *Controller) seed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var changes []state
	for _, name := range sortedKeys(c.view.File().Topics) {
		n := c.view.File().Topics[name]
		s, ok := c.topics[name]
		switch {
		case !ok:
			changes = append(changes, c.newStateLocked(name, n, 1, nil))
		case s.Deleted:
			c.log.Info().Str("topic", name).Msg("topic of the cluster file was deleted: it stays deleted")
		case s.Partitions < n:
			s.Partitions = n
			changes = append(changes, s)
		}
	}
	if err := c.commitLocked(changes); err != nil {
		return fmt.Errorf("topics: create the cluster file's topics: %w", err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// newStateLocked is a new live topic of name: the next incarnation after a
// tombstone, so a re-created topic gets a new id.
func (c *Controller) newStateLocked(name string, partitions int32, rf int16, configs map[string]string) state {
	var inc uint32
	if old, ok := c.topics[name]; ok {
		inc = old.Incarnation + 1
	}
	return state{Name: name, ID: cluster.TopicIDOf(c.view.ClusterID(), name, inc), Partitions: partitions,
		ReplicationFactor: rf, Incarnation: inc, Configs: configs}
}

// batch is a request's results, in request order, and the changes of the
// topics it accepted.
type batch struct {
	results []Result
	changes []state
	changed []int // the indexes of the accepted results
}

func newBatch(n int) *batch { return &batch{results: make([]Result, n)} }

// accept answers topic i with res and makes its change s.
func (b *batch) accept(i int, res Result, s state) {
	b.results[i] = res
	b.changes = append(b.changes, s)
	b.changed = append(b.changed, i)
}

// commitBatchLocked commits the changes the batch accepted, unless
// validateOnly; if the commit fails, each accepted result becomes
// KAFKA_STORAGE_ERROR (NOT_CONTROLLER when fenced out: commitCode).
func (c *Controller) commitBatchLocked(b *batch, validateOnly bool) []Result {
	if validateOnly {
		return b.results
	}
	if err := c.commitLocked(b.changes); err != nil {
		for _, i := range b.changed {
			b.results[i] = fail(b.results[i].Name, commitCode(err), "%v", err)
		}
	}
	return b.results
}

// nameCounts counts how often each name stands in a request.
func nameCounts[T any](specs []T, name func(T) string) map[string]int {
	count := map[string]int{}
	for _, s := range specs {
		count[name(s)]++
	}
	return count
}

// commitLocked commits one record per change, then applies them to memory
// and the view, in order. On a failure (the store stops every write:
// fail-stop; etcd refuses a former holder's) nothing changes here.
func (c *Controller) commitLocked(changes []state) error {
	if len(changes) == 0 {
		return nil
	}
	records := make([][]byte, 0, len(changes))
	for _, s := range changes {
		records = append(records, s.encode())
	}
	if err := c.recs.Commit(records); err != nil {
		c.log.Error().Err(err).Msg("topic change not durable")
		return fmt.Errorf("%w: %w", commitCode(err), err)
	}
	for _, s := range changes {
		c.topics[s.Name] = s
		c.publish(s)
		ev := c.log.Info().Str("topic", s.Name).Int32("partitions", s.Partitions).Uint32("incarnation", s.Incarnation)
		if s.Deleted {
			ev.Msg("topic deleted")
		} else {
			ev.Msg("topic stored")
		}
	}
	return nil
}

// publish shows a stored topic in the view (once durable).
func (c *Controller) publish(s state) {
	if s.Deleted {
		c.view.RemoveTopic(s.Name)
		return
	}
	c.view.SetTopic(cluster.Topic{Name: s.Name, ID: s.ID, Partitions: s.Partitions, Replicas: s.Assignment,
		ReplicationFactor: s.ReplicationFactor}, s.Configs)
}

// Spec is one topic to create.
type Spec struct {
	Name string
	// Partitions and ReplicationFactor: -1 for the default
	// (default_partitions; 1).
	Partitions        int32
	ReplicationFactor int16
	// Configs are the topic's configs; a nil value is INVALID_CONFIG.
	Configs map[string]*string
	// Assignments, by partition, are a manual placement over the
	// partition nodes (cluster.View.PartitionNodes): the first replica of
	// each leads and keeps its one copy; the others are recorded and
	// reported in Metadata.
	Assignments map[int32][]int32
}

// Result is the outcome of one topic of a request.
type Result struct {
	Name string
	Err  *kerr.Error // nil: success
	Msg  string      // Kafka's error message, if any
	// Info is the topic as created (or as it would be, validate-only).
	Info Info
}

func fail(name string, err *kerr.Error, format string, args ...any) Result {
	return Result{Name: name, Err: err, Msg: fmt.Sprintf(format, args...)}
}

// collisionName is Kafka's Topic.unifyCollisionChars: '.' and '_' collide
// in metric names.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// Create creates topics, in request order, as Kafka's controller does
// (ReplicationControlManager.createTopics); validateOnly checks and
// answers without creating.
func (c *Controller) Create(ctx context.Context, specs []Spec, validateOnly bool) []Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := nameCounts(specs, func(s Spec) string { return s.Name })
	b := newBatch(len(specs))
	for i, spec := range specs {
		if count[spec.Name] > 1 {
			b.results[i] = fail(spec.Name, kerr.InvalidRequest, "Duplicate topic name.")
			continue
		}
		s, res := c.checkCreateLocked(spec)
		if res.Err != nil {
			b.results[i] = res
			continue
		}
		b.accept(i, Result{Name: spec.Name, Info: c.info(s)}, s)
	}
	return c.commitBatchLocked(b, validateOnly)
}

// checkCreateLocked validates one topic in Kafka's order: the name, its
// existence, the configs, the placement, then txncoord's policy.
func (c *Controller) checkCreateLocked(spec Spec) (state, Result) {
	name := spec.Name
	if name == "__cluster_metadata" {
		return state{}, fail(name, kerr.InvalidRequest, "Creation of internal topic __cluster_metadata is prohibited.")
	}
	if err := cluster.ValidTopicName(name); err != nil {
		return state{}, fail(name, kerr.InvalidTopicException, "%v", err)
	}
	if _, ok := c.view.Known(name); ok {
		return state{}, fail(name, kerr.TopicAlreadyExists, "Topic '%s' already exists.", name)
	}
	if strings.ContainsAny(name, "._") {
		for _, t := range c.view.Topics() {
			if t.Name != name && collisionName(t.Name) == collisionName(name) {
				return state{}, fail(name, kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", name, t.Name)
			}
		}
	}
	configs := map[string]string{}
	for k, v := range spec.Configs {
		if v != nil {
			configs[k] = *v
		}
	}
	if err := topicconfig.ValidateTopicConfigs(spec.Configs); err != nil {
		return state{}, fail(name, kerr.InvalidConfig, "%v", err)
	}
	brokers := int16(len(c.view.PartitionNodes()))
	partitions, rf := spec.Partitions, spec.ReplicationFactor
	var assignment [][]int32
	switch {
	case len(spec.Assignments) > 0:
		if rf != -1 {
			return state{}, fail(name, kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if partitions != -1 {
			return state{}, fail(name, kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		var res Result
		if assignment, res = c.checkAssignments(name, 0, 0, spec.Assignments); res.Err != nil {
			return state{}, res
		}
		partitions, rf = int32(len(assignment)), int16(len(assignment[0]))
	case rf < -1 || rf == 0:
		return state{}, fail(name, kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	case partitions < -1 || partitions == 0:
		return state{}, fail(name, kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	if partitions == -1 {
		partitions = c.view.File().DefaultPartitions
	}
	if rf == -1 {
		rf = 1 // default.replication.factor
	}
	if rf > brokers {
		return state{}, fail(name, kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, brokers)
	}
	if res := c.policy(name, partitions); res.Err != nil {
		return state{}, res
	}
	if len(configs) == 0 {
		configs = nil
	}
	s := c.newStateLocked(name, partitions, rf, configs)
	s.Assignment = assignment
	return s, Result{}
}

// policy is txncoord's create-topic policy (Kafka's create.topic.policy):
// Kafka's own internal topics, which txncoord keeps no log of, and a cap on
// partitions per topic.
func (c *Controller) policy(name string, partitions int32) Result {
	switch name {
	case "__transaction_state", "__share_group_state":
		return fail(name, kerr.PolicyViolation, "Topic %s is internal to Kafka; txncoord keeps that state in its own store.", name)
	}
	if partitions > c.cfg.MaxPartitions {
		return fail(name, kerr.PolicyViolation, "Topic %s: %d partitions is more than txncoord's limit of %d per topic.", name, partitions, c.cfg.MaxPartitions)
	}
	return Result{}
}

// checkAssignments validates a manual assignment of partitions from, from
// on, as Kafka's controller does (validateManualPartitionAssignment): a
// consecutive sequence, each a non-empty list of distinct partition nodes
// (cluster.View.PartitionNodes), all of rf replicas (rf 0: the first
// list's count). It returns the lists in partition order. The first
// replica leads and keeps the partition's one copy.
func (c *Controller) checkAssignments(name string, from int32, rf int, as map[int32][]int32) ([][]int32, Result) {
	nodes := map[int32]bool{}
	for _, n := range c.view.PartitionNodes() {
		nodes[n.NodeID] = true
	}
	out := make([][]int32, 0, len(as))
	for i := range int32(len(as)) {
		replicas, ok := as[from+i]
		if !ok {
			return nil, fail(name, kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
		if len(replicas) == 0 {
			return nil, fail(name, kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
		}
		if res := c.checkReplicas(name, replicas, nodes); res.Err != nil {
			return nil, res
		}
		if rf == 0 {
			rf = len(replicas)
		}
		if len(replicas) != rf {
			return nil, fail(name, kerr.InvalidReplicaAssignment,
				"The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), rf)
		}
		out = append(out, slices.Clone(replicas))
	}
	return out, Result{}
}

// checkReplicas refuses a replica list naming a node that cannot lead
// partitions, or one node twice, with Kafka's messages.
func (c *Controller) checkReplicas(name string, replicas []int32, nodes map[int32]bool) Result {
	sorted := slices.Sorted(slices.Values(replicas))
	for i, id := range sorted {
		if !nodes[id] {
			return fail(name, kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return fail(name, kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	return Result{}
}

// AutoCreate is the view's creator: a topic auto-created by Metadata
// (AllowAutoTopicCreation) with default_partitions, unless
// auto.create.topics.enable is off. Errors wrap a kerr code.
func (c *Controller) AutoCreate(name string) (cluster.Topic, error) {
	if !c.view.AutoCreateTopics() {
		return cluster.Topic{}, cluster.ErrAutoCreateDisabled
	}
	return c.ensure(name, -1, false)
}

// Adopt makes a topic a leader holds data for exist, unless it was
// deleted: a data dir of the release before the controller, whose
// auto-created topics only the leaders knew. partitions is at least the
// leader's highest partition + 1 (-1: default_partitions). A deleted topic
// is UNKNOWN_TOPIC_OR_PARTITION: the leader then drops its data.
func (c *Controller) Adopt(name string, partitions int32) (cluster.Topic, error) {
	return c.ensure(name, partitions, true)
}

func (c *Controller) ensure(name string, partitions int32, adopt bool) (cluster.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.view.Known(name); ok {
		return t, nil
	}
	if s, ok := c.topics[name]; adopt && ok && s.Deleted {
		return cluster.Topic{}, fmt.Errorf("topic %s was deleted: %w", name, kerr.UnknownTopicOrPartition)
	}
	if partitions < c.view.File().DefaultPartitions {
		partitions = -1
	}
	s, res := c.checkCreateLocked(Spec{Name: name, Partitions: partitions, ReplicationFactor: -1})
	if res.Err != nil {
		return cluster.Topic{}, fmt.Errorf("%s: %w", res.Msg, res.Err)
	}
	if err := c.commitLocked([]state{s}); err != nil {
		return cluster.Topic{}, err
	}
	t, _ := c.view.Known(name)
	return t, nil
}

// Delete deletes live topics by name. Results are in the order given:
// UNKNOWN_TOPIC_OR_PARTITION for a name that does not exist; the internal
// __consumer_offsets cannot be deleted (INVALID_REQUEST).
func (c *Controller) Delete(ctx context.Context, names []string) []Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := newBatch(len(names))
	for i, name := range names {
		if name == cluster.OffsetsTopic {
			b.results[i] = fail(name, kerr.InvalidRequest, "Topic %s is internal: its partitions hold the committed offsets of every group.", name)
			continue
		}
		s, ok := c.topics[name]
		if !ok || s.Deleted {
			b.results[i] = fail(name, kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
			continue
		}
		res := Result{Name: name, Info: c.info(s)}
		s.Deleted, s.Configs = true, nil
		b.accept(i, res, s)
	}
	return c.commitBatchLocked(b, false)
}

// NameOf resolves a live topic id.
func (c *Controller) NameOf(id [16]byte) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.topics {
		if !s.Deleted && s.ID == id {
			return s.Name, true
		}
	}
	return "", false
}

// PartitionsSpec is one topic of CreatePartitions.
type PartitionsSpec struct {
	Name  string
	Count int32
	// Assignments, by new partition (the first is the current count),
	// as Spec.Assignments; nil: none.
	Assignments map[int32][]int32
}

// CreatePartitions grows topics (ReplicationControlManager.createPartitions):
// the count must be an increase. Existing partitions keep their leaders;
// new ones are placed by hand (as many replicas as the topic's replication
// factor) or by the rule.
func (c *Controller) CreatePartitions(ctx context.Context, specs []PartitionsSpec, validateOnly bool) []Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := nameCounts(specs, func(s PartitionsSpec) string { return s.Name })
	b := newBatch(len(specs))
	for i, spec := range specs {
		name := spec.Name
		s, ok := c.topics[name]
		switch {
		case count[name] > 1:
			b.results[i] = fail(name, kerr.InvalidRequest, "Duplicate topic name.")
		case name == cluster.OffsetsTopic:
			b.results[i] = fail(name, kerr.InvalidRequest, "Topic %s is internal: its partition count is the cluster file's offsets_partitions.", name)
		case !ok || s.Deleted:
			b.results[i] = fail(name, kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
		case spec.Count == s.Partitions:
			b.results[i] = fail(name, kerr.InvalidPartitions, "Topic already has %d partition(s).", s.Partitions)
		case spec.Count < s.Partitions:
			b.results[i] = fail(name, kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", name, s.Partitions, spec.Count)
		case spec.Assignments != nil && len(spec.Assignments) != int(spec.Count-s.Partitions):
			b.results[i] = fail(name, kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", spec.Count-s.Partitions, len(spec.Assignments))
		default:
			var added [][]int32
			if spec.Assignments != nil {
				var res Result
				if added, res = c.checkAssignments(name, s.Partitions, int(max(s.ReplicationFactor, 1)), spec.Assignments); res.Err != nil {
					b.results[i] = res
					continue
				}
			}
			if res := c.policy(name, spec.Count); res.Err != nil {
				b.results[i] = res
				continue
			}
			if added != nil {
				// The partitions before keep their placement: a
				// rule-placed one gets an empty list, still the rule's.
				grown := make([][]int32, s.Partitions, spec.Count)
				copy(grown, s.Assignment)
				s.Assignment = append(grown, added...)
			}
			s.Partitions = spec.Count
			b.accept(i, Result{Name: name, Info: c.info(s)}, s)
		}
	}
	return c.commitBatchLocked(b, validateOnly)
}

// AlterConfigs replaces a live topic's configs with configs (its whole
// explicit config after the change), validated by
// topicconfig.ValidateTopicConfigs; validateOnly checks only. For the
// AlterConfigs and IncrementalAlterConfigs handlers.
func (c *Controller) AlterConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.topics[name]
	if !ok || s.Deleted {
		return fmt.Errorf("topic %s does not exist: %w", name, kerr.UnknownTopicOrPartition)
	}
	check := make(map[string]*string, len(configs))
	for k, v := range configs {
		check[k] = &v
	}
	if err := topicconfig.ValidateTopicConfigs(check); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	s.Configs = maps.Clone(configs)
	if len(s.Configs) == 0 {
		s.Configs = nil
	}
	return c.commitLocked([]state{s})
}

// Configs returns a live topic's explicit configs.
func (c *Controller) Configs(name string) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.topics[name]
	if !ok || s.Deleted {
		return nil, false
	}
	return maps.Clone(s.Configs), true
}

// ErrUnknownTopic answers Describe for a topic that does not exist.
var ErrUnknownTopic = errors.New("unknown topic")
