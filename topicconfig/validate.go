package topicconfig

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Error is a refused config: a Kafka error code (INVALID_CONFIG here) and
// the message Kafka gives with it. errors.Is(err, kerr.InvalidConfig) holds.
type Error struct {
	Code    *kerr.Error
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap makes errors.Is(err, kerr.InvalidConfig) work.
func (e *Error) Unwrap() error { return e.Code }

func invalid(format string, args ...any) *Error {
	return &Error{Code: kerr.InvalidConfig, Message: fmt.Sprintf(format, args...)}
}

// invalidValue is Kafka's ConfigException(name, value, message).
func invalidValue(name, value, msg string) *Error {
	return invalid("Invalid value %s for configuration %s: %s", value, name, msg)
}

// value is a parsed config value (ConfigDef.parseType).
type value struct {
	str  string // the trimmed text (STRING, and what a range error prints for numbers)
	num  int64
	dbl  float64
	b    bool
	list []string
}

// javaTrim is Java's String.trim: every char ≤ ' ' at either end.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

var commaWithWhitespace = regexp.MustCompile(`\s*,\s*`)

// parse turns raw into the def's type, as Kafka's ConfigDef.parseType.
func parse(d *Def, raw string) (value, error) {
	t := javaTrim(raw)
	v := value{str: t}
	switch d.Type {
	case kmsg.ConfigTypeBoolean:
		switch {
		case strings.EqualFold(t, "true"):
			v.b = true
		case strings.EqualFold(t, "false"):
		default:
			return v, invalidValue(d.Name, raw, "Expected value to be either true or false")
		}
	case kmsg.ConfigTypeInt, kmsg.ConfigTypeShort, kmsg.ConfigTypeLong:
		bits, typ := 64, "LONG"
		switch d.Type {
		case kmsg.ConfigTypeInt:
			bits, typ = 32, "INT"
		case kmsg.ConfigTypeShort:
			bits, typ = 16, "SHORT"
		}
		n, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			return v, invalidValue(d.Name, raw, "Not a number of type "+typ)
		}
		v.num, v.str = n, strconv.FormatInt(n, 10)
	case kmsg.ConfigTypeDouble:
		// Java's parseDouble also takes a trailing d or f.
		f, err := strconv.ParseFloat(strings.TrimRight(t, "dDfF"), 64)
		if err != nil || strings.Contains(t, "_") {
			return v, invalidValue(d.Name, raw, "Not a number of type DOUBLE")
		}
		v.dbl, v.str = f, JavaDouble(f)
	case kmsg.ConfigTypeList:
		if t != "" {
			v.list = commaWithWhitespace.Split(t, -1)
		}
	}
	return v, nil
}

// JavaDouble prints a double as Java's Double.toString does for the values
// a config takes (1 → "1.0", 0.25 → "0.25"), as DescribeConfigs shows it.
func JavaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// Validators (ConfigDef.Range, ValidString, ValidList, ...).

func atLeast(min int64) func(string, value) error {
	return func(name string, v value) error {
		if v.num < min {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be at least %d", min))
		}
		return nil
	}
}

func between(min, max int64) func(string, value) error {
	return func(name string, v value) error {
		if v.num < min {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be at least %d", min))
		}
		if v.num > max {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be no more than %d", max))
		}
		return nil
	}
}

func betweenDouble(min, max int64) func(string, value) error {
	return func(name string, v value) error {
		if v.dbl < float64(min) {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be at least %d", min))
		}
		if v.dbl > float64(max) {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be no more than %d", max))
		}
		return nil
	}
}

func oneOf(valid ...string) func(string, value) error {
	return func(name string, v value) error {
		for _, s := range valid {
			if v.str == s {
				return nil
			}
		}
		return invalidValue(name, v.str, "String must be one of: "+strings.Join(valid, ", "))
	}
}

// gzipLevel is CompressionType.GZIP's level validator: 1–9, or -1 (zlib's
// default).
func gzipLevel(name string, v value) error {
	if v.num > 9 || (v.num < 1 && v.num != -1) {
		return invalidValue(name, v.str, "Value must be between 1 and 9 or equal to -1")
	}
	return nil
}

// cleanupPolicy is Kafka 4.2's ValidList.in(true, "compact", "delete")
// (KIP-1161: an empty list is allowed and keeps everything).
func cleanupPolicy(name string, v value) error {
	seen := map[string]bool{}
	for _, p := range v.list {
		if seen[p] {
			return invalid("Configuration '%s' values must not be duplicated.", name)
		}
		seen[p] = true
	}
	for _, p := range v.list {
		if p == "" {
			return invalid("Configuration '%s' values must not be empty.", name)
		}
		if p != CleanupCompact && p != CleanupDelete {
			return invalidValue(name, p, "String must be one of: compact, delete")
		}
	}
	return nil
}

var throttledEntry = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

// throttledReplicas is Kafka's ThrottledReplicaListValidator: "*" or a
// list of partition:broker pairs.
func throttledReplicas(name string, v value) error {
	all := true
	for _, e := range v.list {
		if !throttledEntry.MatchString(javaTrim(e)) {
			all = false
		}
	}
	if !all && strings.Join(v.list, "") != "*" {
		return invalidValue(name, "["+strings.Join(v.list, ", ")+"]",
			name+" must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
	}
	return nil
}

// describeCheck prints a validator as Kafka's documentation does.
func describeCheck(d *Def) string {
	switch d.Name {
	case "compression.gzip.level":
		return "[1,...,9] or -1"
	case CleanupPolicy, "log.cleanup.policy":
		return "[compact, delete]"
	case "compression.type":
		return "[uncompressed, zstd, lz4, snappy, gzip, producer]"
	case MessageTimestampType, "log.message.timestamp.type":
		return "[CreateTime, LogAppendTime]"
	}
	// Probe the range by its messages: cheaper than a second table.
	lo, hi := "", ""
	if err := d.check(d.Name, value{num: math.MinInt64, dbl: math.Inf(-1)}); err != nil {
		if _, after, ok := strings.Cut(err.Error(), "at least "); ok {
			lo = after
		}
	}
	if err := d.check(d.Name, value{num: math.MaxInt64, dbl: math.Inf(1)}); err != nil {
		if _, after, ok := strings.Cut(err.Error(), "no more than "); ok {
			hi = after
		}
	}
	switch {
	case lo != "" && hi != "":
		return "[" + lo + ",...," + hi + "]"
	case lo != "":
		return "[" + lo + ",...]"
	}
	return ""
}

// ValidateTopicConfigs checks a topic's configs as Kafka's controller does
// for CreateTopics and (Incremental)AlterConfigs (ControllerConfigurationValidator
// then LogConfig.validate): a null value, an unknown name, a value that
// does not parse or is out of range, a min.compaction.lag.ms above
// max.compaction.lag.ms, remote storage. The map is the topic's whole
// config after the change. The error is an *Error (INVALID_CONFIG) with
// Kafka's message; nil when every config is valid.
func ValidateTopicConfigs(configs map[string]*string) error {
	var nulls []string
	for k, v := range configs {
		if v == nil {
			nulls = append(nulls, k)
		}
	}
	if len(nulls) > 0 {
		sort.Strings(nulls)
		return invalid("Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	names := make([]string, 0, len(configs))
	for k := range configs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := topicByName[k]; !ok {
			return invalid("Unknown topic config name: %s", k)
		}
	}
	parsed := map[string]value{}
	for _, d := range topicDefs { // Kafka parses in definition order
		raw, ok := configs[d.Name]
		if !ok {
			continue
		}
		v, err := parse(d, *raw)
		if err != nil {
			return err
		}
		if d.check != nil {
			if err := d.check(d.Name, v); err != nil {
				return err
			}
		}
		parsed[d.Name] = v
	}
	minLag, maxLag := numOr(parsed, MinCompactionLagMs, 0), numOr(parsed, MaxCompactionLagMs, maxLong)
	if minLag > maxLag {
		return invalid("conflict topic config setting %s (%d) > %s (%d)", MinCompactionLagMs, minLag, MaxCompactionLagMs, maxLag)
	}
	if v, ok := parsed[RemoteStorageEnable]; ok && v.b {
		return invalid("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	return nil
}

func numOr(parsed map[string]value, name string, def int64) int64 {
	if v, ok := parsed[name]; ok {
		return v.num
	}
	return def
}

// ValidateValue checks one value against a definition (a broker config
// being altered, or one topic config on its own).
func ValidateValue(d *Def, raw string) error {
	v, err := parse(d, raw)
	if err != nil {
		return err
	}
	if d.check != nil {
		return d.check(d.Name, v)
	}
	return nil
}
