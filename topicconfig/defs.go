package topicconfig

import (
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Def is one config as Kafka defines it (ConfigDef.define): its type, its
// default (nil when Kafka's is null), the valid values as Kafka's
// documentation prints them, and for a topic config the broker configs
// that supply its default, highest priority first.
type Def struct {
	Name        string
	Type        kmsg.ConfigType
	Default     *string
	Doc         string
	ValidValues string
	Synonyms    []Synonym
	// Enforced: txncoord acts on the value. The others are stored and
	// described only (see doc.go).
	Enforced bool
	// ReadOnly (broker configs): cannot be changed while the node runs
	// (Kafka's "read-only" dynamic update mode).
	ReadOnly  bool
	Sensitive bool

	check func(name string, v value) error
}

// Synonym is a broker config that supplies a topic config's default, and
// the factor that turns its value into the topic config's unit (log.roll.hours
// → segment.ms: 3,600,000).
type Synonym struct {
	Name   string
	Factor int64
}

func str(s string) *string { return &s }

func i64(v int64) *string { return str(strconv.FormatInt(v, 10)) }

const (
	maxLong      = int64(^uint64(0) >> 1)
	weekMs       = 7 * 24 * 3600 * 1000
	hourMs       = 3600 * 1000
	minuteMs     = 60 * 1000
	maxMsgBytes  = 1024*1024 + 12 // Kafka's MAX_MESSAGE_BYTES_DEFAULT: 1 MiB + LOG_OVERHEAD
	segmentBytes = 1 << 30
	indexBytes   = 10 << 20
)

// CleanupPolicy values.
const (
	CleanupDelete  = "delete"
	CleanupCompact = "compact"
)

// Names of the topic configs txncoord enforces.
const (
	MaxMessageBytes      = "max.message.bytes"
	RetentionMs          = "retention.ms"
	RetentionBytes       = "retention.bytes"
	CleanupPolicy        = "cleanup.policy"
	MessageTimestampType = "message.timestamp.type"
	RemoteStorageEnable  = "remote.storage.enable"
	MinCompactionLagMs   = "min.compaction.lag.ms"
	MaxCompactionLagMs   = "max.compaction.lag.ms"
	DeleteRetentionMs    = "delete.retention.ms"
	MinCleanableRatio    = "min.cleanable.dirty.ratio"
	SegmentMs            = "segment.ms"
	SegmentBytes         = "segment.bytes"
	// LogCleanerBackoffMs is the broker config of the cleaner's pause.
	LogCleanerBackoffMs = "log.cleaner.backoff.ms"
)

// topicDefs are Kafka 4.2's topic configs (LogConfig's ConfigDef) in its
// definition order, which is the order Kafka parses and so reports the
// first bad value in.
var topicDefs = []*Def{
	{Name: "segment.bytes", Type: kmsg.ConfigTypeInt, Default: i64(segmentBytes), check: atLeast(1024 * 1024),
		Synonyms: logSyn("segment.bytes"), Enforced: true, Doc: "The segment size of the log: the log cleaner never cleans the active segment, the newest batches up to this size (a leader's log has no segment files)."},
	{Name: "segment.ms", Type: kmsg.ConfigTypeLong, Default: i64(weekMs), check: atLeast(1),
		Synonyms: []Synonym{{"log.roll.ms", 1}, {"log.roll.hours", hourMs}}, Enforced: true, Doc: "How long before a segment is rolled: the log cleaner never cleans the active segment, the newest batches younger than this (by their largest timestamp)."},
	{Name: "segment.jitter.ms", Type: kmsg.ConfigTypeLong, Default: i64(0), check: atLeast(0),
		Synonyms: []Synonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", hourMs}}, Doc: "The maximum random jitter subtracted from segment.ms. Not enforced."},
	{Name: "segment.index.bytes", Type: kmsg.ConfigTypeInt, Default: i64(indexBytes), check: atLeast(4),
		Synonyms: logSyn("index.size.max.bytes"), Doc: "The size of the offset index. Not enforced."},
	{Name: "flush.messages", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(1),
		Synonyms: logSyn("flush.interval.messages"), Doc: "Messages between forced fsyncs. Not enforced: txncoord fsyncs every acknowledged write."},
	{Name: "flush.ms", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(0),
		Synonyms: []Synonym{{"log.flush.interval.ms", 1}, {"log.flush.scheduler.interval.ms", 1}}, Doc: "Time between forced fsyncs. Not enforced: txncoord fsyncs every acknowledged write."},
	{Name: RetentionBytes, Type: kmsg.ConfigTypeLong, Default: i64(-1), Enforced: true,
		Synonyms: logSyn("retention.bytes"), Doc: "The largest a partition may grow before its oldest batches are deleted; -1 for no size limit. The leader's --retention-bytes applies as well."},
	{Name: RetentionMs, Type: kmsg.ConfigTypeLong, Default: i64(weekMs), check: atLeast(-1), Enforced: true,
		Synonyms: []Synonym{{"log.retention.ms", 1}, {"log.retention.minutes", minuteMs}, {"log.retention.hours", hourMs}},
		Doc:      "How long a batch is kept before it is deleted, by its largest timestamp; -1 for no time limit."},
	{Name: MaxMessageBytes, Type: kmsg.ConfigTypeInt, Default: i64(maxMsgBytes), check: atLeast(0), Enforced: true,
		Synonyms: []Synonym{{"message.max.bytes", 1}}, Doc: "The largest record batch the leader accepts (MESSAGE_TOO_LARGE beyond)."},
	{Name: "index.interval.bytes", Type: kmsg.ConfigTypeInt, Default: i64(4096), check: atLeast(0),
		Synonyms: logSyn("index.interval.bytes"), Doc: "How often an offset index entry is added. Not enforced."},
	{Name: "delete.retention.ms", Type: kmsg.ConfigTypeLong, Default: i64(24 * hourMs), check: atLeast(0),
		Synonyms: cleanerSyn("delete.retention.ms"), Enforced: true, Doc: "How long tombstones and transaction markers are kept on compacted topics, by their batch's largest timestamp."},
	{Name: MinCompactionLagMs, Type: kmsg.ConfigTypeLong, Default: i64(0), check: atLeast(0),
		Synonyms: cleanerSyn("min.compaction.lag.ms"), Enforced: true, Doc: "The minimum time a record stays uncompacted."},
	{Name: MaxCompactionLagMs, Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(1),
		Synonyms: cleanerSyn("max.compaction.lag.ms"), Enforced: true, Doc: "The maximum time a record stays uncompacted: a partition is cleaned when a dirty batch is older, whatever its dirty ratio."},
	{Name: "file.delete.delay.ms", Type: kmsg.ConfigTypeLong, Default: i64(60000), check: atLeast(0),
		Synonyms: logSyn("segment.delete.delay.ms"), Doc: "How long a deleted file is kept. Not enforced."},
	{Name: "min.cleanable.dirty.ratio", Type: kmsg.ConfigTypeDouble, Default: str("0.5"), check: betweenDouble(0, 1),
		Synonyms: cleanerSyn("min.cleanable.ratio"), Enforced: true, Doc: "How dirty a log must be before it is compacted: the bytes written since the last clean over the cleanable bytes."},
	{Name: CleanupPolicy, Type: kmsg.ConfigTypeList, Default: str(CleanupDelete), check: cleanupPolicy, Enforced: true,
		Synonyms: logSyn("cleanup.policy"), Doc: "delete: old batches are deleted by retention.ms and retention.bytes; compact: the log cleaner keeps the last record of each key; both may be set; an empty list keeps everything."},
	{Name: "unclean.leader.election.enable", Type: kmsg.ConfigTypeBoolean, Default: str("false"),
		Synonyms: []Synonym{{"unclean.leader.election.enable", 1}}, Doc: "Whether an out-of-sync replica may become leader. Not enforced: one replica per partition."},
	{Name: "min.insync.replicas", Type: kmsg.ConfigTypeInt, Default: i64(1), check: atLeast(1),
		Synonyms: []Synonym{{"min.insync.replicas", 1}}, Doc: "Replicas that must acknowledge an acks=all write. Not enforced: one replica per partition."},
	{Name: "compression.type", Type: kmsg.ConfigTypeString, Default: str("producer"),
		check:    oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		Synonyms: []Synonym{{"compression.type", 1}}, Doc: "The codec batches are stored with. Not enforced: batches are stored as the producer sent them (producer)."},
	{Name: "compression.gzip.level", Type: kmsg.ConfigTypeInt, Default: i64(-1), check: gzipLevel,
		Synonyms: []Synonym{{"compression.gzip.level", 1}}, Doc: "The gzip level when compression.type is gzip. Not enforced."},
	{Name: "compression.lz4.level", Type: kmsg.ConfigTypeInt, Default: i64(9), check: between(1, 17),
		Synonyms: []Synonym{{"compression.lz4.level", 1}}, Doc: "The lz4 level when compression.type is lz4. Not enforced."},
	{Name: "compression.zstd.level", Type: kmsg.ConfigTypeInt, Default: i64(3), check: between(-131072, 22),
		Synonyms: []Synonym{{"compression.zstd.level", 1}}, Doc: "The zstd level when compression.type is zstd. Not enforced."},
	{Name: "preallocate", Type: kmsg.ConfigTypeBoolean, Default: str("false"),
		Synonyms: logSyn("preallocate"), Doc: "Whether segment files are preallocated. Not enforced."},
	{Name: MessageTimestampType, Type: kmsg.ConfigTypeString, Default: str("CreateTime"), check: oneOf("CreateTime", "LogAppendTime"), Enforced: true,
		Synonyms: logSyn("message.timestamp.type"), Doc: "CreateTime keeps the producer's timestamps; LogAppendTime makes the leader stamp each batch with its own clock."},
	{Name: "message.timestamp.before.max.ms", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(0),
		Synonyms: logSyn("message.timestamp.before.max.ms"), Doc: "How far in the past a CreateTime timestamp may be. Not enforced."},
	{Name: "message.timestamp.after.max.ms", Type: kmsg.ConfigTypeLong, Default: i64(hourMs), check: atLeast(0),
		Synonyms: logSyn("message.timestamp.after.max.ms"), Doc: "How far in the future a CreateTime timestamp may be. Not enforced."},
	{Name: "leader.replication.throttled.replicas", Type: kmsg.ConfigTypeList, Default: str(""), check: throttledReplicas,
		ValidValues: "[partitionId]:[brokerId],[partitionId]:[brokerId],...", Doc: "Replicas throttled on the leader side. Not enforced: no replication."},
	{Name: "follower.replication.throttled.replicas", Type: kmsg.ConfigTypeList, Default: str(""), check: throttledReplicas,
		ValidValues: "[partitionId]:[brokerId],[partitionId]:[brokerId],...", Doc: "Replicas throttled on the follower side. Not enforced: no replication."},
	{Name: RemoteStorageEnable, Type: kmsg.ConfigTypeBoolean, Default: str("false"),
		Doc: "Tiered storage for the topic. txncoord has none: true is refused."},
	{Name: "local.retention.ms", Type: kmsg.ConfigTypeLong, Default: i64(-2), check: atLeast(-2),
		Synonyms: logSyn("local.retention.ms"), Doc: "Local retention under tiered storage; -2 follows retention.ms. Not enforced."},
	{Name: "local.retention.bytes", Type: kmsg.ConfigTypeLong, Default: i64(-2), check: atLeast(-2),
		Synonyms: logSyn("local.retention.bytes"), Doc: "Local retention under tiered storage; -2 follows retention.bytes. Not enforced."},
	{Name: "remote.log.copy.disable", Type: kmsg.ConfigTypeBoolean, Default: str("false"),
		Doc: "Stops copying to tiered storage. Not enforced: no tiered storage."},
	{Name: "remote.log.delete.on.disable", Type: kmsg.ConfigTypeBoolean, Default: str("false"),
		Doc: "Deletes tiered data when tiered storage is turned off. Not enforced: no tiered storage."},
}

func logSyn(name string) []Synonym     { return []Synonym{{"log." + name, 1}} }
func cleanerSyn(name string) []Synonym { return []Synonym{{"log.cleaner." + name, 1}} }

// brokerDefs are the broker configs a node describes: what clients and
// tools read (kafka-configs.sh, kadm, the franz-go tests), with Kafka's
// defaults. The node's own settings (Broker's static map) override them
// as STATIC_BROKER_CONFIG. Every one is read-only here: txncoord changes
// no broker setting while it runs.
var brokerDefs = []*Def{
	{Name: "broker.id", Type: kmsg.ConfigTypeInt, Default: i64(-1), Doc: "This node's id."},
	{Name: "node.id", Type: kmsg.ConfigTypeInt, Default: i64(-1), Doc: "This node's id."},
	{Name: "auto.create.topics.enable", Type: kmsg.ConfigTypeBoolean, Default: str("true"), Doc: "Whether Metadata and Produce create a topic they name that does not exist."},
	{Name: "delete.topic.enable", Type: kmsg.ConfigTypeBoolean, Default: str("true"), Doc: "Whether DeleteTopics is allowed."},
	{Name: "num.partitions", Type: kmsg.ConfigTypeInt, Default: i64(1), check: atLeast(1), Doc: "Partitions of an auto-created topic, and of CreateTopics with -1 (the cluster file's default_partitions)."},
	{Name: "default.replication.factor", Type: kmsg.ConfigTypeInt, Default: i64(1), Doc: "Replication factor of an auto-created topic. txncoord keeps one replica per partition."},
	{Name: "offsets.topic.num.partitions", Type: kmsg.ConfigTypeInt, Default: i64(50), check: atLeast(1), Doc: "Partitions of __consumer_offsets."},
	{Name: "offsets.topic.replication.factor", Type: kmsg.ConfigTypeShort, Default: i64(3), check: atLeast(1), Doc: "Replication factor of __consumer_offsets (one replica here)."},
	{Name: "transaction.state.log.num.partitions", Type: kmsg.ConfigTypeInt, Default: i64(50), check: atLeast(1), Doc: "Partitions of __transaction_state."},
	{Name: "transaction.state.log.replication.factor", Type: kmsg.ConfigTypeShort, Default: i64(3), check: atLeast(1), Doc: "Replication factor of __transaction_state (one replica here)."},
	{Name: "transaction.state.log.min.isr", Type: kmsg.ConfigTypeInt, Default: i64(2), check: atLeast(1), Doc: "min.insync.replicas of __transaction_state."},
	{Name: "transaction.max.timeout.ms", Type: kmsg.ConfigTypeInt, Default: i64(900000), check: atLeast(1), Doc: "The largest transaction timeout a producer may ask for."},
	{Name: "transactional.id.expiration.ms", Type: kmsg.ConfigTypeInt, Default: i64(weekMs), check: atLeast(1), Doc: "How long an idle transactional id is kept."},
	{Name: "producer.id.expiration.ms", Type: kmsg.ConfigTypeInt, Default: i64(86400000), check: atLeast(1), Doc: "How long a leader keeps an idle producer's state."},
	{Name: "message.max.bytes", Type: kmsg.ConfigTypeInt, Default: i64(maxMsgBytes), check: atLeast(0), Doc: "The largest record batch accepted; the default of max.message.bytes."},
	{Name: "log.dirs", Type: kmsg.ConfigTypeString, Doc: "Where this node keeps its data."},
	{Name: "log.dir", Type: kmsg.ConfigTypeString, Default: str("/tmp/kafka-logs"), Doc: "Where this node keeps its data, when log.dirs is not set."},
	{Name: "log.segment.bytes", Type: kmsg.ConfigTypeInt, Default: i64(segmentBytes), check: atLeast(14), Doc: "The default of segment.bytes."},
	{Name: "log.roll.ms", Type: kmsg.ConfigTypeLong, Doc: "The default of segment.ms; when null, log.roll.hours."},
	{Name: "log.roll.hours", Type: kmsg.ConfigTypeInt, Default: i64(168), check: atLeast(1), Doc: "The default of segment.ms in hours."},
	{Name: "log.retention.ms", Type: kmsg.ConfigTypeLong, Doc: "The default of retention.ms; when null, log.retention.minutes."},
	{Name: "log.retention.minutes", Type: kmsg.ConfigTypeInt, Doc: "The default of retention.ms in minutes; when null, log.retention.hours."},
	{Name: "log.retention.hours", Type: kmsg.ConfigTypeInt, Default: i64(168), Doc: "The default of retention.ms in hours."},
	{Name: "log.retention.bytes", Type: kmsg.ConfigTypeLong, Default: i64(-1), Doc: "The default of retention.bytes."},
	{Name: "log.retention.check.interval.ms", Type: kmsg.ConfigTypeLong, Default: i64(300000), check: atLeast(1), Doc: "How often retention is checked."},
	{Name: "log.cleanup.policy", Type: kmsg.ConfigTypeList, Default: str(CleanupDelete), check: cleanupPolicy, Doc: "The default of cleanup.policy."},
	{Name: "log.message.timestamp.type", Type: kmsg.ConfigTypeString, Default: str("CreateTime"), check: oneOf("CreateTime", "LogAppendTime"), Doc: "The default of message.timestamp.type."},
	{Name: "log.message.timestamp.before.max.ms", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(0), Doc: "The default of message.timestamp.before.max.ms."},
	{Name: "log.message.timestamp.after.max.ms", Type: kmsg.ConfigTypeLong, Default: i64(hourMs), check: atLeast(0), Doc: "The default of message.timestamp.after.max.ms."},
	{Name: "compression.type", Type: kmsg.ConfigTypeString, Default: str("producer"), check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), Doc: "The default of the topic config compression.type."},
	{Name: "min.insync.replicas", Type: kmsg.ConfigTypeInt, Default: i64(1), check: atLeast(1), Doc: "The default of the topic config min.insync.replicas."},
	{Name: "unclean.leader.election.enable", Type: kmsg.ConfigTypeBoolean, Default: str("false"), Doc: "The default of the topic config unclean.leader.election.enable."},
	{Name: "log.index.size.max.bytes", Type: kmsg.ConfigTypeInt, Default: i64(indexBytes), check: atLeast(4), Doc: "The default of segment.index.bytes."},
	{Name: "log.index.interval.bytes", Type: kmsg.ConfigTypeInt, Default: i64(4096), check: atLeast(0), Doc: "The default of index.interval.bytes."},
	{Name: "log.flush.interval.messages", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(1), Doc: "The default of flush.messages."},
	{Name: "log.flush.interval.ms", Type: kmsg.ConfigTypeLong, Doc: "The default of flush.ms; when null, log.flush.scheduler.interval.ms."},
	{Name: "log.flush.scheduler.interval.ms", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), Doc: "The default of flush.ms."},
	{Name: "log.preallocate", Type: kmsg.ConfigTypeBoolean, Default: str("false"), Doc: "The default of preallocate."},
	{Name: "log.segment.delete.delay.ms", Type: kmsg.ConfigTypeLong, Default: i64(60000), check: atLeast(0), Doc: "The default of file.delete.delay.ms."},
	{Name: "log.cleaner.delete.retention.ms", Type: kmsg.ConfigTypeLong, Default: i64(24 * hourMs), check: atLeast(0), Doc: "The default of delete.retention.ms."},
	{Name: "log.cleaner.min.compaction.lag.ms", Type: kmsg.ConfigTypeLong, Default: i64(0), check: atLeast(0), Doc: "The default of min.compaction.lag.ms."},
	{Name: "log.cleaner.max.compaction.lag.ms", Type: kmsg.ConfigTypeLong, Default: i64(maxLong), check: atLeast(1), Doc: "The default of max.compaction.lag.ms."},
	{Name: "log.cleaner.min.cleanable.ratio", Type: kmsg.ConfigTypeDouble, Default: str("0.5"), check: betweenDouble(0, 1), Doc: "The default of min.cleanable.dirty.ratio."},
	{Name: "log.cleaner.enable", Type: kmsg.ConfigTypeBoolean, Default: str("true"), Doc: "The log cleaner of compacted topics runs on every leader."},
	{Name: LogCleanerBackoffMs, Type: kmsg.ConfigTypeLong, Default: i64(15000), check: atLeast(0), Doc: "How long the log cleaner sleeps when there is nothing to clean (txncoord: --log-cleaner-backoff)."},
	{Name: "log.local.retention.ms", Type: kmsg.ConfigTypeLong, Default: i64(-2), check: atLeast(-2), Doc: "The default of local.retention.ms."},
	{Name: "log.local.retention.bytes", Type: kmsg.ConfigTypeLong, Default: i64(-2), check: atLeast(-2), Doc: "The default of local.retention.bytes."},
	{Name: "compression.gzip.level", Type: kmsg.ConfigTypeInt, Default: i64(-1), check: gzipLevel, Doc: "The default of the topic config compression.gzip.level."},
	{Name: "compression.lz4.level", Type: kmsg.ConfigTypeInt, Default: i64(9), check: between(1, 17), Doc: "The default of the topic config compression.lz4.level."},
	{Name: "compression.zstd.level", Type: kmsg.ConfigTypeInt, Default: i64(3), check: between(-131072, 22), Doc: "The default of the topic config compression.zstd.level."},
	{Name: "group.initial.rebalance.delay.ms", Type: kmsg.ConfigTypeInt, Default: i64(3000), Doc: "How long a new classic group waits for more members before its first rebalance."},
	{Name: "listeners", Type: kmsg.ConfigTypeString, Doc: "This node's listener."},
	{Name: "advertised.listeners", Type: kmsg.ConfigTypeString, Doc: "The listener this node advertises in Metadata."},
	{Name: "sasl.enabled.mechanisms", Type: kmsg.ConfigTypeList, Default: str("GSSAPI"), Doc: "The SASL mechanisms served (txncoord: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 with --secure)."},
	{Name: "ssl.keystore.password", Type: kmsg.ConfigTypePassword, Sensitive: true, Doc: "The key store password; never shown."},
}

var (
	topicByName  = index(topicDefs)
	brokerByName = index(brokerDefs)
)

func index(defs []*Def) map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for _, d := range defs {
		if d.ValidValues == "" && d.check != nil {
			d.ValidValues = describeCheck(d)
		}
		if d.Type == kmsg.ConfigTypeBoolean && d.ValidValues == "" {
			d.ValidValues = "[true, false]"
		}
		m[d.Name] = d
	}
	return m
}

func init() {
	for _, d := range brokerDefs {
		d.ReadOnly = true // see brokerDefs
	}
}

// Topic returns a topic config's definition.
func Topic(name string) (*Def, bool) {
	d, ok := topicByName[name]
	return d, ok
}

// Topics returns every topic config, sorted by name (DescribeConfigs
// lists them so, as Kafka does).
func Topics() []*Def { return sorted(topicDefs) }

// Broker returns a broker config's definition.
func Broker(name string) (*Def, bool) {
	d, ok := brokerByName[name]
	return d, ok
}

// Brokers returns every broker config a node describes, sorted by name.
func Brokers() []*Def { return sorted(brokerDefs) }

func sorted(defs []*Def) []*Def {
	out := append([]*Def(nil), defs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
