package markersender

// WriteTxnMarkers (key 27), sent to partition leaders, v1–v2 (v0 to a leader
// that advertises only v0).
//
// Behavior:
//   - one request per leader carries every queued marker (many producers,
//     many partitions); one marker entry per transaction;
//   - every marker carries the transaction's coordinator epoch and its
//     stored client TransactionVersion;
//   - each partition's answer goes through responseTable (below, and the
//     package README).
//
// Version notes:
//   - v2 (KIP-1228, Kafka 4.2): TransactionVersion, so a 4.2 leader applies
//     the strict TV2 epoch rule; kmsg drops the field at v1 and the leader
//     applies the legacy rule. The version is chosen per connection by
//     the negotiation package, never here.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/txncoord/txncoord/txncore"
)

// action is what the sender does with one partition's answer.
type action int

const (
	actDone          action = iota // delivered
	actRetry                       // retry after capped exponential backoff with jitter, re-routing first
	actRenegotiate                 // drop the connection, renegotiate the version, retry
	actCheckProducer               // DescribeProducers decides: already applied, or stuck
	actFenced                      // stuck: a newer coordinator owns the transaction
	actUnexpected                  // logged and retried with backoff: never drop a marker
)

// responseTable is the sender's answer to each partition error code,
// following Kafka's TransactionMarkerRequestCompletionHandler (reference
// §4) except where Kafka drops markers silently:
//
//	NONE                                       → done
//	NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
//	NOT_ENOUGH_REPLICAS(_AFTER_APPEND), KAFKA_STORAGE_ERROR,
//	REQUEST_TIMED_OUT                          → re-route and retry with backoff
//	UNSUPPORTED_VERSION                        → renegotiate and retry
//	INVALID_PRODUCER_EPOCH                     → DescribeProducers: the producer at or
//	                                             past the marker epoch with no open
//	                                             transaction means applied, else stuck
//	                                             (Kafka drops the markers and the
//	                                             transaction hangs until a reload)
//	TRANSACTION_COORDINATOR_FENCED             → stuck, logged as an error
//	anything else                              → logged, retried with backoff
//	                                             (Kafka throws IllegalStateException)
//
// Disconnects and timeouts are handled per request in onSendError.
var responseTable = map[int16]action{
	0:                                      actDone,
	kerr.NotLeaderForPartition.Code:        actRetry,
	kerr.UnknownTopicOrPartition.Code:      actRetry,
	kerr.NotEnoughReplicas.Code:            actRetry,
	kerr.NotEnoughReplicasAfterAppend.Code: actRetry,
	kerr.KafkaStorageError.Code:            actRetry,
	kerr.RequestTimedOut.Code:              actRetry,
	kerr.UnsupportedVersion.Code:           actRenegotiate,
	kerr.InvalidProducerEpoch.Code:         actCheckProducer,
	kerr.TransactionCoordinatorFenced.Code: actFenced,
}

func actionFor(code int16) action {
	if a, ok := responseTable[code]; ok {
		return a
	}
	return actUnexpected
}

func errorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
		return err.Error()
	}
	return "NONE"
}

// buildRequest makes one request of a sorted batch: one marker entry per
// transaction, its partitions grouped by topic. The batch is sorted by
// transaction, then topic, so each marker's topics and each topic's
// partitions are consecutive: they are carved from one array each.
func buildRequest(batch []queued) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	txns := 0
	for i, q := range batch {
		if i == 0 || q.ts != batch[i-1].ts {
			txns++
		}
	}
	req.Markers = make([]kmsg.WriteTxnMarkersRequestMarker, 0, txns)
	topics := make([]kmsg.WriteTxnMarkersRequestMarkerTopic, len(batch))
	partitions := make([]int32, len(batch))
	usedTopics := 0
	var cur *txnState
	for i, q := range batch {
		if q.ts != cur {
			cur = q.ts
			t := cur.txn
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed = t.ProducerID, t.ProducerEpoch, t.Commit
			m.CoordinatorEpoch, m.TransactionVersion = t.CoordinatorEpoch, t.TransactionVersion
			m.Topics = topics[usedTopics:usedTopics]
			req.Markers = append(req.Markers, m)
		}
		m := &req.Markers[len(req.Markers)-1]
		if n := len(m.Topics); n == 0 || m.Topics[n-1].Topic != q.ps.tp.Topic {
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic = q.ps.tp.Topic
			mt.Partitions = partitions[i:i]
			m.Topics = append(m.Topics, mt) // topics[usedTopics]
			usedTopics++
		}
		mt := &m.Topics[len(m.Topics)-1]
		mt.Partitions = append(mt.Partitions, q.ps.tp.Partition) // partitions[i]
	}
	return req
}

type markerKey struct {
	pid int64
	tp  txncore.TopicPartition
}

// answers are a WriteTxnMarkers response's error codes. A leader answers
// the partitions in the order they were asked (Kafka's and ours do), so
// code looks at the same place in the response first: a response in
// another order costs a map, built once, and nothing else.
type answers struct {
	inOrder []answer
	byKey   map[markerKey]int16
}

type answer struct {
	key  markerKey
	code int16
}

func responseAnswers(resp *kmsg.WriteTxnMarkersResponse) *answers {
	a := &answers{}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				a.inOrder = append(a.inOrder, answer{markerKey{m.ProducerID, txncore.TopicPartition{Topic: t.Topic, Partition: p.Partition}}, p.ErrorCode})
			}
		}
	}
	return a
}

// code is the answer for k, the i-th partition of the request.
func (a *answers) code(i int, k markerKey) (int16, bool) {
	if i < len(a.inOrder) && a.inOrder[i].key == k {
		return a.inOrder[i].code, true
	}
	if a.byKey == nil {
		a.byKey = make(map[markerKey]int16, len(a.inOrder))
		for _, an := range a.inOrder {
			a.byKey[an.key] = an.code
		}
	}
	code, ok := a.byKey[k]
	return code, ok
}
