package topicconfig

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Effective is the value of topic config d for a topic whose own configs
// are topic, on a node whose broker settings are broker (name → value,
// what the node was started with): the topic's own value
// (DYNAMIC_TOPIC_CONFIG), else the first of its broker synonyms that is
// set (STATIC_BROKER_CONFIG, converted to the topic config's unit), else
// Kafka's default (DEFAULT_CONFIG). The value is nil for a null default.
func Effective(d *Def, topic, broker map[string]string) (*string, kmsg.ConfigSource) {
	if v, ok := topic[d.Name]; ok {
		return &v, kmsg.ConfigSourceDynamicTopicConfig
	}
	for _, s := range d.Synonyms {
		v, ok := broker[s.Name]
		if !ok {
			continue
		}
		if s.Factor != 1 {
			n, err := strconv.ParseInt(javaTrim(v), 10, 64)
			if err != nil {
				continue
			}
			v = strconv.FormatInt(n*s.Factor, 10)
		}
		return &v, kmsg.ConfigSourceStaticBrokerConfig
	}
	return d.Default, kmsg.ConfigSourceDefaultConfig
}

// Values are the topic configs a leader enforces, resolved.
type Values struct {
	// MaxMessageBytes is the largest record batch accepted
	// (max.message.bytes).
	MaxMessageBytes int64
	// RetentionMs and RetentionBytes bound a partition's log; -1 (any
	// negative) is no bound. They apply only when Delete is set.
	// RetentionMs is -1 unless the topic or the broker sets it: Kafka's
	// 7-day default deletes whole 1 GiB segments by their newest record,
	// and a leader here deletes batch by batch, so applying the default
	// would delete records with made-up old timestamps that Kafka keeps
	// in a segment with newer ones.
	RetentionMs    int64
	RetentionBytes int64
	// Delete: cleanup.policy holds delete (an empty policy keeps
	// everything, KIP-1161).
	Delete bool
	// LogAppendTime: the leader stamps each batch with its own clock
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
	// Compact: cleanup.policy holds compact; the log cleaner keeps the
	// last record of each key. The fields below bound it.
	Compact bool
	// DeleteRetentionMs: how long a tombstone or a transaction marker
	// stays once it could go (delete.retention.ms).
	DeleteRetentionMs int64
	// MinCompactionLagMs and MaxCompactionLagMs: a record is not cleaned
	// before the first, and its partition is cleaned, whatever its dirty
	// ratio, once a dirty record is older than the second.
	MinCompactionLagMs, MaxCompactionLagMs int64
	// MinCleanableDirtyRatio: the share of dirty bytes in the cleanable
	// part that starts a clean (min.cleanable.dirty.ratio).
	MinCleanableDirtyRatio float64
	// SegmentMs and SegmentBytes bound the active segment, which is never
	// cleaned (segment.ms, segment.bytes).
	SegmentMs, SegmentBytes int64
}

// Resolve turns a topic's stored configs into the values a leader
// enforces (see Effective for the order). A value that does not parse,
// which validation keeps out of the store, falls back to Kafka's default.
func Resolve(topic, broker map[string]string) Values {
	num := func(name string) int64 {
		d := topicByName[name]
		if v, _ := Effective(d, topic, broker); v != nil {
			if n, err := strconv.ParseInt(javaTrim(*v), 10, 64); err == nil {
				return n
			}
		}
		n, _ := strconv.ParseInt(*d.Default, 10, 64)
		return n
	}
	text := func(name string) string {
		v, _ := Effective(topicByName[name], topic, broker)
		if v == nil {
			return ""
		}
		return javaTrim(*v)
	}
	vals := Values{
		MaxMessageBytes: num(MaxMessageBytes),
		RetentionMs:     -1,
		RetentionBytes:  num(RetentionBytes),
		LogAppendTime:   text(MessageTimestampType) == "LogAppendTime",
	}
	if _, src := Effective(topicByName[RetentionMs], topic, broker); src != kmsg.ConfigSourceDefaultConfig {
		vals.RetentionMs = num(RetentionMs)
	}
	if p := text(CleanupPolicy); p != "" {
		for _, s := range commaWithWhitespace.Split(p, -1) {
			vals.Delete = vals.Delete || strings.EqualFold(s, CleanupDelete)
			vals.Compact = vals.Compact || strings.EqualFold(s, CleanupCompact)
		}
	}
	vals.DeleteRetentionMs = num(DeleteRetentionMs)
	vals.MinCompactionLagMs = num(MinCompactionLagMs)
	vals.MaxCompactionLagMs = num(MaxCompactionLagMs)
	vals.SegmentMs = num(SegmentMs)
	vals.SegmentBytes = num(SegmentBytes)
	vals.MinCleanableDirtyRatio = 0.5
	if f, err := strconv.ParseFloat(strings.TrimRight(text(MinCleanableRatio), "dDfF"), 64); err == nil {
		vals.MinCleanableDirtyRatio = f
	}
	return vals
}

// Default is the Values of a topic with no configs of its own on a node
// with Kafka's broker defaults.
func Default() Values { return Resolve(nil, nil) }
