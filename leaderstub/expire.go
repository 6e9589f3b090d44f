package leaderstub

import (
	"time"
)

// Producer expiry, as Kafka's producer.id.expiration.ms: a producer with
// no open transaction whose last write on a partition (its newest batch's
// max timestamp, or a marker's append time) is ProducerIDExpiration old is
// forgotten on that partition, in memory and in the store. Without it
// every producer id that ever wrote stays for good, and an idempotent
// client gets a new one each time it starts: a long-lived `txncoord up`
// behind a test suite would grow without end, and so would its restart.
// Forgetting is what Kafka does: a retry of a batch older than the
// expiration is then taken as a new producer's (no duplicate check), and
// a marker for a forgotten producer is accepted as for one never seen. A
// producer with an open transaction, or a batch held for its previous
// marker, is never forgotten, so the LSO and the aborted index do not
// change.

// DefaultProducerIDExpiration is Kafka's producer.id.expiration.ms default
// (one day); DefaultProducerIDExpirationCheck its check interval
// (producer.id.expiration.check.interval.ms, ten minutes).
const (
	DefaultProducerIDExpiration      = 24 * time.Hour
	DefaultProducerIDExpirationCheck = 10 * time.Minute
)

// ExpireProducers forgets, on every partition, the producers that have no
// open transaction and whose last write is at least ProducerIDExpiration
// old by Config.Now, and returns how many entries went. It returns once
// the deletions are durable (an error if they failed: the store is then
// offline, as after any failed write).
func (l *Leader) ExpireProducers() (int, error) {
	cutoff := l.nowMillis() - l.cfg.ProducerIDExpiration.Milliseconds()
	var ops []*writeOp
	expired := 0
	for _, p := range l.sortedPartitions() {
		if op, n := l.expirePartition(p, cutoff); op != nil {
			ops = append(ops, op)
			expired += n
		}
	}
	for _, op := range ops {
		if err := op.Wait(); err != nil {
			return expired, err
		}
	}
	if expired > 0 {
		l.metrics.producersExpired.Add(float64(expired))
		l.log.Info().Int("producers", expired).Dur("expiration", l.cfg.ProducerIDExpiration).Msg("producers expired")
	}
	return expired, nil
}

// expirePartition drops p's expired producers and queues their deletion,
// under the partition lock so the deletion is ordered with p's other
// writes (a producer that writes again after it is queued after it).
func (l *Leader) expirePartition(p *partition, cutoffMillis int64) (*writeOp, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int64
	for pid, e := range p.producers {
		if !e.txnOpen() && p.held[pid] == nil && e.LastTimestamp <= cutoffMillis {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, 0
	}
	for _, pid := range pids {
		delete(p.producers, pid)
	}
	op := &persistOp{key: p.key, expired: pids}
	return l.enqueue(op), len(pids)
}
