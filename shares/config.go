package shares

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kafka 4.2's broker-level share-group settings (GroupCoordinatorConfig,
// ShareGroupConfig) that txncoord applies; a group may override some of
// them within bounds (GroupConfig).
const (
	DefaultRecordLockDuration  = 30 * time.Second // group.share.record.lock.duration.ms
	MinRecordLockDuration      = 15 * time.Second // group.share.min.record.lock.duration.ms
	MaxRecordLockDuration      = 60 * time.Second // group.share.max.record.lock.duration.ms
	DefaultDeliveryCountLimit  = 5                // group.share.delivery.count.limit
	MinDeliveryCountLimit      = 2
	MaxDeliveryCountLimit      = 10
	DefaultPartitionMaxLocks   = 2000 // group.share.partition.max.record.locks
	MinPartitionMaxLocks       = 100
	MaxPartitionMaxLocks       = 10000
	DefaultSessionTimeout      = 45 * time.Second // group.share.session.timeout.ms
	MinSessionTimeout          = 45 * time.Second
	MaxSessionTimeout          = 60 * time.Second
	DefaultHeartbeatInterval   = 5 * time.Second // group.share.heartbeat.interval.ms
	MinHeartbeatInterval       = 5 * time.Second
	MaxHeartbeatInterval       = 15 * time.Second
	DefaultMaxGroupSize        = 200 // group.share.max.size
	DefaultMaxRecordsPerFetch  = 500 // a ShareFetch asking MaxRecords <= 0
	DefaultShareSessionsPerKey = 1
)

// Config is the effective configuration of one share group.
type Config struct {
	LockDuration       time.Duration
	DeliveryCountLimit int16
	MaxRecordLocks     int
	SessionTimeout     time.Duration
	HeartbeatInterval  time.Duration
	// AutoOffsetReset is where a share partition starts when first
	// fetched: "latest" (Kafka's default), "earliest", or
	// "by_duration:<ISO-8601 duration>" (treated as earliest here: the
	// leaders keep no time index).
	AutoOffsetReset string
	ReadCommitted   bool
}

// Defaults is Kafka 4.2's configuration of a share group with no
// group-level configs.
func Defaults() Config {
	return Config{LockDuration: DefaultRecordLockDuration, DeliveryCountLimit: DefaultDeliveryCountLimit,
		MaxRecordLocks: DefaultPartitionMaxLocks, SessionTimeout: DefaultSessionTimeout,
		HeartbeatInterval: DefaultHeartbeatInterval, AutoOffsetReset: "latest"}
}

// GroupConfigDef is one group-level config (DescribeConfigs GROUP).
type GroupConfigDef struct {
	Name, Default, Doc string
	Int                bool
}

// GroupConfigs are the group-level configs txncoord accepts (Kafka's
// GroupConfig names), share and consumer alike, in name order.
var GroupConfigs = []GroupConfigDef{
	{Name: "consumer.heartbeat.interval.ms", Default: "5000", Int: true, Doc: "The heartbeat interval given to the members of a consumer group."},
	{Name: "consumer.session.timeout.ms", Default: "45000", Int: true, Doc: "The timeout to detect client failures when using the consumer group protocol."},
	{Name: "share.auto.offset.reset", Default: "latest", Doc: "The strategy to initialize the share-partition start offset."},
	{Name: "share.delivery.count.limit", Default: strconv.Itoa(DefaultDeliveryCountLimit), Int: true, Doc: "The maximum number of delivery attempts for a record delivered to a share group."},
	{Name: "share.heartbeat.interval.ms", Default: "5000", Int: true, Doc: "The heartbeat interval given to the members of a share group."},
	{Name: "share.isolation.level", Default: "read_uncommitted", Doc: "Controls how to read records written transactionally."},
	{Name: "share.partition.max.record.locks", Default: strconv.Itoa(DefaultPartitionMaxLocks), Int: true, Doc: "Share-group record lock limit per share-partition."},
	{Name: "share.record.lock.duration.ms", Default: "30000", Int: true, Doc: "The record acquisition lock duration in milliseconds for share groups."},
	{Name: "share.session.timeout.ms", Default: "45000", Int: true, Doc: "The timeout to detect client failures when using the share group protocol."},
}

// GroupConfigDefOf returns the definition of a group config name.
func GroupConfigDefOf(name string) (GroupConfigDef, bool) {
	for _, d := range GroupConfigs {
		if d.Name == name {
			return d, true
		}
	}
	return GroupConfigDef{}, false
}

// ValidateGroupConfigs checks a group's whole explicit config: known
// names, values in Kafka's bounds. The error message is Kafka's kind of
// INVALID_CONFIG message.
func ValidateGroupConfigs(configs map[string]string) error {
	for name, v := range configs {
		d, ok := GroupConfigDefOf(name)
		if !ok {
			return fmt.Errorf("Unknown group config name: %s", name)
		}
		if d.Int {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", v, name)
			}
			lo, hi, bounded := bounds(name)
			if bounded && (n < lo || n > hi) {
				return fmt.Errorf("Invalid value %s for configuration %s: Value must be in [%d, %d]", v, name, lo, hi)
			}
			continue
		}
		switch name {
		case "share.auto.offset.reset":
			if v != "latest" && v != "earliest" && !strings.HasPrefix(v, "by_duration:") {
				return fmt.Errorf("Invalid value %s for configuration share.auto.offset.reset: String must be one of: latest, earliest, by_duration:<PnDTnHnMn.nS.>", v)
			}
		case "share.isolation.level":
			if v != "read_uncommitted" && v != "read_committed" {
				return fmt.Errorf("Invalid value %s for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted", v)
			}
		}
	}
	return nil
}

// bounds are Kafka's bounds of an INT group config.
func bounds(name string) (lo, hi int64, ok bool) {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	switch name {
	case "share.record.lock.duration.ms":
		return ms(MinRecordLockDuration), ms(MaxRecordLockDuration), true
	case "share.delivery.count.limit":
		return MinDeliveryCountLimit, MaxDeliveryCountLimit, true
	case "share.partition.max.record.locks":
		return MinPartitionMaxLocks, MaxPartitionMaxLocks, true
	case "share.session.timeout.ms", "consumer.session.timeout.ms":
		return ms(MinSessionTimeout), ms(MaxSessionTimeout), true
	case "share.heartbeat.interval.ms", "consumer.heartbeat.interval.ms":
		return ms(MinHeartbeatInterval), ms(MaxHeartbeatInterval), true
	}
	return 0, 0, false
}

// ConfigOf is the effective configuration of a group with the explicit
// configs given (already validated; a bad value keeps the default).
func ConfigOf(configs map[string]string) Config {
	c := Defaults()
	num := func(name string) (int64, bool) {
		v, ok := configs[name]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 32)
		return n, err == nil
	}
	if n, ok := num("share.record.lock.duration.ms"); ok {
		c.LockDuration = time.Duration(n) * time.Millisecond
	}
	if n, ok := num("share.delivery.count.limit"); ok {
		c.DeliveryCountLimit = int16(n)
	}
	if n, ok := num("share.partition.max.record.locks"); ok {
		c.MaxRecordLocks = int(n)
	}
	if n, ok := num("share.session.timeout.ms"); ok {
		c.SessionTimeout = time.Duration(n) * time.Millisecond
	}
	if n, ok := num("share.heartbeat.interval.ms"); ok {
		c.HeartbeatInterval = time.Duration(n) * time.Millisecond
	}
	if v, ok := configs["share.auto.offset.reset"]; ok {
		c.AutoOffsetReset = v
	}
	c.ReadCommitted = configs["share.isolation.level"] == "read_committed"
	return c
}
