package leaderstub

import (
	"bytes"
	"fmt"

	"github.com/txncoord/txncoord/storage"
)

// Dropping a deleted topic's data (the controller, package topics, deleted
// it; the node assembly calls DropTopic from the view's OnTopicRemoved
// hook).
//
// The drop is one record of its own in the leader's space: version byte
// dropTopicVersion, then the topic name. Applied, it deletes the bucket of
// every partition of the topic. Each of the topic's partitions is locked
// while the record is appended: writes append under the partition lock, so
// every write to it before the drop is in the log before the record, and
// none after (the partition has left the leader and the view). A request
// that resolved the partition before the view dropped the topic and takes
// l.mu only after DropTopic can still make a new, empty partition of that
// name: a window of one request, not closed here.
const dropTopicVersion = 2

// DropTopic forgets every partition of topic this leader holds, in memory
// and in its store, and waits until the drop is durable. A topic this
// leader holds nothing of writes nothing.
func (l *Leader) DropTopic(topic string) error {
	l.mu.Lock()
	var parts []*partition
	for k, p := range l.partitions {
		if p.topic == topic {
			parts = append(parts, p)
			delete(l.partitions, k)
		}
	}
	l.mu.Unlock()
	l.dropShareTopic(topic)
	if len(parts) == 0 {
		return nil
	}
	for _, p := range parts {
		p.mu.Lock()
	}
	_, done := l.space.Submit(append([]byte{dropTopicVersion}, topic...), nil)
	for _, p := range parts {
		p.mu.Unlock()
	}
	l.notify() // a waiting Fetch answers UNKNOWN_TOPIC_OR_PARTITION now
	l.log.Info().Str("topic", topic).Int("partitions", len(parts)).Msg("deleted topic's data dropped")
	return <-done
}

// HeldTopics returns, per topic this leader holds partitions of, one more
// than the highest partition number it holds.
func (l *Leader) HeldTopics() map[string]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int32{}
	for _, p := range l.partitions {
		out[p.topic] = max(out[p.topic], p.index+1)
	}
	return out
}

// applyDropTopic deletes the buckets of every partition of the record's
// topic.
func applyDropTopic(root storage.Root, raw []byte) error {
	if len(raw) < 2 {
		return fmt.Errorf("%w: empty topic drop", errBadRecord)
	}
	parts := root.Bucket(bucketPartitions)
	if parts == nil {
		return nil
	}
	prefix := append(raw[1:len(raw):len(raw)], 0)
	var keys [][]byte
	c := parts.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := parts.DeleteBucket(k); err != nil {
			return err
		}
	}
	return nil
}
