package leaderstub

// Topic configs on the leader: what of a topic's configs (its
// cluster.View entry, set by the controller) a leader enforces, resolved
// by topicconfig.Resolve against this node's broker settings:
//   - max.message.bytes: a batch larger than it is refused with
//     MESSAGE_TOO_LARGE, the whole partition of the request, as Kafka's
//     LogValidator does (RecordTooLargeException);
//   - message.timestamp.type=LogAppendTime: the leader sets each batch's
//     max timestamp to its clock and the timestamp-type attribute, and
//     recomputes the CRC (Kafka's DefaultRecordBatch.setMaxTimestamp); the
//     Produce answer carries that time. Consumers then read every record's
//     timestamp as the batch's;
//   - retention.ms and retention.bytes, when cleanup.policy holds delete:
//     whole batches are dropped from the start of the log, at each append,
//     while the log is larger than retention.bytes (and the leader's
//     Config.RetentionBytes, which always applies) or its first batch's
//     largest timestamp is older than retention.ms. Kafka deletes whole
//     segments every log.retention.check.interval.ms; a batch here is a
//     segment, checked when the partition is written and by the sweep
//     every Config.RetentionCheckInterval (retention_sweep.go). A batch
//     at or above the last stable offset is never dropped, nor the last
//     one. A topic whose cleanup.policy is compact alone is not bound by
//     Config.RetentionBytes: its log cleaner keeps the last record of
//     each key (cleaner.go).

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/topicconfig"
)

// attrLogAppendTime is the timestamp-type bit of a batch's attributes.
const attrLogAppendTime = 0x08

// topicValues resolves the configs a leader enforces for topic, against
// the cluster file's broker configs (the log cleaner's defaults) and
// Kafka's; --retention-bytes applies on its own (retain).
func (l *Leader) topicValues(topic string) topicconfig.Values {
	return l.cfg.View.TopicValues(topic)
}

// applyTopicConfigs checks a validated produce partition against its
// topic's configs and stamps LogAppendTime batches; it sets pp.code when
// the partition is refused.
func (l *Leader) applyTopicConfigs(pp *producePart) {
	vals := l.topicValues(pp.topic)
	for _, raw := range pp.batches {
		if int64(len(raw)) > vals.MaxMessageBytes {
			pp.code = kerr.MessageTooLarge.Code
			l.log.Debug().Str("topic", pp.topic).Int32("partition", pp.index).Int("batch_bytes", len(raw)).
				Int64("max_message_bytes", vals.MaxMessageBytes).Msg("produce: batch over max.message.bytes")
			return
		}
	}
	if !vals.LogAppendTime {
		return
	}
	now := l.nowMillis()
	for i, raw := range pp.batches {
		attrs := binary.BigEndian.Uint16(raw[offAttributes:]) | attrLogAppendTime
		binary.BigEndian.PutUint16(raw[offAttributes:], attrs)
		binary.BigEndian.PutUint64(raw[offMaxTimestamp:], uint64(now))
		binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], crc32c))
		pp.headers[i].Attributes = int16(attrs)
		pp.headers[i].MaxTimestamp = now
	}
	pp.logAppendTime = now
}

// retain applies the partition's retention (see above) under its lock and
// returns what to delete from the store.
func (l *Leader) retain(p *partition) (dropped []int64, droppedAborted []int64) {
	vals := l.topicValues(p.topic)
	limit := retentionLimit{bytes: l.cfg.RetentionBytes, ms: -1}
	if vals.Compact && !vals.Delete {
		// A compacted topic keeps the last record of every key: the
		// leader's own bound would delete the only value of a key, as
		// Kafka never does. The log cleaner bounds it by its keys.
		limit.bytes = 1<<63 - 1
	}
	if vals.Delete {
		if vals.RetentionBytes >= 0 && vals.RetentionBytes < limit.bytes {
			limit.bytes = vals.RetentionBytes
		}
		if vals.RetentionMs >= 0 {
			limit.ms = vals.RetentionMs
			limit.now = l.nowMillis()
		}
	}
	dropped, droppedAborted = p.retainBy(limit)
	l.metrics.retentionDeleted.Add(float64(len(dropped)))
	return dropped, droppedAborted
}

// retentionLimit bounds a partition's log: bytes, and age in ms (-1 none)
// of a batch's largest timestamp at now.
type retentionLimit struct {
	bytes   int64
	ms, now int64
}

func (r retentionLimit) expired(b batchIndex) bool {
	return r.ms >= 0 && b.MaxTimestamp < r.now-r.ms
}

// retainBy drops whole batches from the start while the log breaks the
// limit, never a batch at or above the LSO nor the last one. The caller
// holds p.mu (write).
func (p *partition) retainBy(limit retentionLimit) (dropped []int64, droppedAborted []int64) {
	// The LSO (a walk over the open transactions) only once the log
	// breaks the limit: most appends leave it within.
	var lso int64
	known := false
	for len(p.batches) > 1 && (p.size > limit.bytes || limit.expired(p.batches[0])) {
		if !known {
			lso, known = p.lso(), true
		}
		if p.batches[0].Last >= lso {
			break
		}
		b := p.batches[0]
		p.batches = p.batches[1:]
		p.size -= b.Size
		dropped = append(dropped, b.Base)
		// DeleteRecords may have moved the log start into a later batch.
		p.logStart = max(p.logStart, p.batches[0].Base)
	}
	return dropped, p.dropAbortedBelowStart()
}

// dropAbortedBelowStart forgets the aborted-index entries whose marker lies
// below the log start. The caller holds p.mu (write).
func (p *partition) dropAbortedBelowStart() (droppedAborted []int64) {
	for len(p.aborted) > 0 && p.aborted[0].LastOffset < p.logStart {
		droppedAborted = append(droppedAborted, p.aborted[0].LastOffset)
		p.aborted = p.aborted[1:]
	}
	return droppedAborted
}
