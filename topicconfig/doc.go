// Package topicconfig knows every topic config of Kafka 4.x and the broker
// configs clients describe: name, type, default, valid values, the broker
// synonyms of a topic config, and which of them txncoord enforces.
//
// It is pure: no I/O, no clock. The controller (package topics) validates
// CreateTopics and AlterConfigs input with ValidateTopicConfigs; the
// DescribeConfigs handlers list Topics and Brokers; a leader turns a topic's
// stored map into the values it enforces with Resolve.
//
// Validation follows Kafka's LogConfig.validate (ConfigDef parse, then the
// validators, then the cross-field checks) and answers INVALID_CONFIG with
// Kafka's message ("Invalid value abc for configuration retention.ms: Not a
// number of type LONG"). Where txncoord differs, and why:
//   - segment.ms and segment.bytes bound the active segment the log
//     cleaner leaves alone (a leader's log has no segment files);
//   - remote.storage.enable=true is refused as a Kafka broker without tiered
//     storage refuses it;
//   - retention.ms at its default (7 days) is not applied by time: see
//     Values.RetentionMs;
//   - a config that is known but not enforced (segment.ms, flush.messages,
//     compression.type, ...) is stored and described, and changes nothing:
//     Def.Enforced says which are enforced.
//
// Main types: Def (one config), Error (INVALID_CONFIG and its message),
// Values (what a leader enforces).
package topicconfig
