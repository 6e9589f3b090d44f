package eos

import (
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// librdkafka (through 2.15 at least) can start a partition at
// auto.offset.reset instead of its committed offset when the group's
// offsets for it are unstable (a transaction's TxnOffsetCommit waiting for
// its marker) during a rebalance: the assignment's OffsetFetch is answered
// UNSTABLE_OFFSET_COMMIT with offset -1, as Kafka answers it
// (OffsetMetadataManager.fetchOffsets); librdkafka retries it only while
// the assignment is unchanged (rdkafka_assignment.c,
// rd_kafka_assignment_handle_OffsetFetch), and an answer that arrives
// after an eager revoke and re-assign of the same partition puts it back
// on the pending list with offset INVALID (apply_offsets' unstable
// branch), which serve_pending starts with auto.offset.reset. With
// auto.offset.reset=earliest an exactly-once stage then reads the
// partition again from its start. TestLibrdkafkaStaleUnstableOffsetFetch
// shows it against kfake with the answers scripted.
//
// The members avoid that path: they fetch the committed offsets
// themselves (Consumer.Committed, whose retries of UNSTABLE_OFFSET_COMMIT
// do not depend on the assignment) and assign with explicit offsets.

// CommittedPositions returns parts with the offsets to start from: the
// group's committed offsets once they are stable, or the beginning where
// the group has none (auto.offset.reset=earliest). A partition the
// coordinator answered with an error fails the call: starting it anywhere
// could read twice or skip.
func CommittedPositions(c *kafka.Consumer, parts []kafka.TopicPartition, timeoutMs int) ([]kafka.TopicPartition, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	committed, err := c.Committed(parts, timeoutMs)
	if err != nil {
		return nil, fmt.Errorf("committed offsets: %w", err)
	}
	for i, tp := range committed {
		if tp.Error != nil {
			return nil, fmt.Errorf("committed offset of %s/%d: %w", *tp.Topic, tp.Partition, tp.Error)
		}
		if tp.Offset < 0 {
			committed[i].Offset = kafka.OffsetBeginning
		}
	}
	return committed, nil
}

// AssignCommitted assigns parts at CommittedPositions.
func AssignCommitted(c *kafka.Consumer, parts []kafka.TopicPartition, timeoutMs int) error {
	at, err := CommittedPositions(c, parts, timeoutMs)
	if err != nil {
		return err
	}
	return c.Assign(at)
}
