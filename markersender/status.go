package markersender

import (
	"sort"
	"time"
)

// LeaderStatus is one leader as `txncoord leaders -o json` and
// GET /v1/leaders show it (architecture.md, stable contract).
type LeaderStatus struct {
	NodeID            int32        `json:"node_id"`
	Addr              string       `json:"addr"`
	KafkaVersion      string       `json:"kafka_version"`
	WriteTxnMarkers   VersionRange `json:"write_txn_markers"`
	Connected         bool         `json:"connected"`
	QueuedMarkers     int          `json:"queued_markers"`
	StuckTransactions int          `json:"stuck_transactions"`
	LastError         string       `json:"last_error"`
	// Sender is the coordinator whose marker sender this is: each
	// coordinator of the etcd mode sends the markers of the partitions it
	// owns, so each has its own view of the leaders (set by the admin
	// backend).
	Sender int32 `json:"sender"`
}

// VersionRange is the leader's advertised WriteTxnMarkers range and the
// version in use; -1 before the first negotiation.
type VersionRange struct {
	Min   int16 `json:"min"`
	Max   int16 `json:"max"`
	InUse int16 `json:"in_use"`
}

// PendingTxn is one transaction whose markers are not all delivered.
type PendingTxn struct {
	TransactionalID    string             `json:"transactional_id"`
	ProducerID         int64              `json:"producer_id"`
	ProducerEpoch      int16              `json:"producer_epoch"`
	Result             string             `json:"result"` // COMMIT or ABORT
	CoordinatorEpoch   int32              `json:"coordinator_epoch"`
	TransactionVersion int8               `json:"transaction_version"`
	Stuck              bool               `json:"stuck"`
	Reason             string             `json:"reason,omitempty"`
	Partitions         []PendingPartition `json:"partitions"`
}

// PendingPartition is one undelivered partition marker.
type PendingPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Leader is the leader it was last routed to, -1 if none is known.
	Leader    int32     `json:"leader"`
	InFlight  bool      `json:"in_flight"`
	Attempts  int       `json:"attempts"`
	NextRetry time.Time `json:"next_retry,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// Leaders returns every known leader, by node id.
func (s *Sender) Leaders() []LeaderStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	queued := map[int32]int{}
	stuck := map[int32]int{}
	for _, ts := range s.txns {
		seen := map[int32]bool{}
		for _, ps := range ts.parts {
			queued[ps.leader]++
			if ts.stuck != "" && !seen[ps.leader] {
				seen[ps.leader] = true
				stuck[ps.leader]++
			}
		}
	}
	out := make([]LeaderStatus, 0, len(s.leaders))
	for id, l := range s.leaders {
		st := l.conns[0].Status()
		for _, c := range l.conns[1:] {
			o := c.Status()
			if o.NegotiatedAt.After(st.NegotiatedAt) {
				st.AdvertisedMin, st.AdvertisedMax, st.InUse, st.NegotiatedAt = o.AdvertisedMin, o.AdvertisedMax, o.InUse, o.NegotiatedAt
			}
			st.Connected = st.Connected || o.Connected
		}
		out = append(out, LeaderStatus{
			NodeID: id, Addr: l.node.Addr, KafkaVersion: l.node.KafkaVersion,
			WriteTxnMarkers: VersionRange{Min: st.AdvertisedMin, Max: st.AdvertisedMax, InUse: st.InUse},
			Connected:       st.Connected, QueuedMarkers: queued[id], StuckTransactions: stuck[id], LastError: st.LastError,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// Markers returns the pending and stuck transactions, by transactional id,
// each with its undelivered partitions and their leaders.
func (s *Sender) Markers() []PendingTxn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PendingTxn, 0, len(s.txns))
	for _, ts := range s.txns {
		t := ts.txn
		p := PendingTxn{
			TransactionalID: t.TransactionalID, ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch,
			Result: result(t.Commit), CoordinatorEpoch: t.CoordinatorEpoch, TransactionVersion: t.TransactionVersion,
			Stuck: ts.stuck != "", Reason: ts.stuck, Partitions: []PendingPartition{},
		}
		for _, ps := range ts.parts {
			pp := PendingPartition{Topic: ps.tp.Topic, Partition: ps.tp.Partition, Leader: ps.leader,
				InFlight: ps.inFlight, Attempts: ps.attempts, LastError: ps.lastErr}
			if !ps.routed && !ps.inFlight && ts.stuck == "" {
				pp.NextRetry = ps.notBefore
			}
			p.Partitions = append(p.Partitions, pp)
		}
		sort.Slice(p.Partitions, func(i, j int) bool {
			a, b := p.Partitions[i], p.Partitions[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}
