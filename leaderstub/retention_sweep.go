package leaderstub

import (
	"time"
)

// Retention sweep, as Kafka's log.retention.check.interval.ms: every
// RetentionCheckInterval the leader applies each partition's retention
// (retain in topic_configs.go: retention.ms, retention.bytes and
// Config.RetentionBytes, the same rule as at a write, so never a batch at
// or above the LSO nor the last one). Retention applied only when a
// partition is written would keep an idle partition's expired batches for
// good: a topic written once and left keeps its data past retention.ms,
// ListOffsets earliest never moves, and a consumer can still read it.
//
// Each partition's deletion is one persistOp built under the partition
// lock, the way a write builds its own, so it is ordered with the
// partition's writes in the process log (a write after the sweep is
// queued after it) and it is durable before SweepRetention returns.

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms
// default (five minutes).
const DefaultRetentionCheckInterval = 5 * time.Minute

// SweepRetention applies retention to every partition this leader holds,
// by Config.Now, and returns how many batches it deleted. It returns once
// the deletions are durable (an error if they failed: the store is then
// offline, as after any failed write).
func (l *Leader) SweepRetention() (int, error) {
	if err := l.space.Err(); err != nil {
		return 0, err
	}
	var ops []*writeOp
	deleted := 0
	for _, p := range l.sortedPartitions() {
		if op, n := l.sweepPartition(p); op != nil {
			ops = append(ops, op)
			deleted += n
		}
	}
	for _, op := range ops {
		if err := op.Wait(); err != nil {
			return deleted, err
		}
	}
	if deleted > 0 {
		l.log.Info().Int("batches", deleted).Int("partitions", len(ops)).Msg("retention sweep: batches deleted")
	}
	return deleted, nil
}

// sweepPartition applies p's retention under its lock and queues the
// deletion; it returns nil when nothing went.
func (l *Leader) sweepPartition(p *partition) (*writeOp, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// DropTopic takes a partition out of the map before it locks it and
	// appends its drop record: a partition still in the map here is
	// dropped after this op, one gone must not get its buckets back.
	if !l.holds(p) {
		return nil, 0
	}
	dropped, droppedAborted := l.retain(p)
	if len(dropped) == 0 && len(droppedAborted) == 0 {
		return nil, 0
	}
	l.log.Debug().Str("topic", p.topic).Int32("partition", p.index).Int("batches", len(dropped)).
		Int64("log_start", p.logStart).Msg("retention sweep: log start moved")
	op := &persistOp{key: p.key, dropped: dropped, droppedAborted: droppedAborted, logStart: p.logStart}
	return l.enqueue(op), len(dropped)
}

// holds reports whether p is still this leader's partition.
func (l *Leader) holds(p *partition) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.partitions[string(p.key)] == p
}
