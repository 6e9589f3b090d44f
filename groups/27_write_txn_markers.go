package groups

// WriteTxnMarkers (key 27), v0–v2, for __consumer_offsets partitions
// (the partitions whose groups this coordinator serves: all of them on a
// single coordinator, the partitions it owns on etcd).
//
// Behavior:
//   - per partition: validated by txnrules.CheckMarker, the rule every
//     leader applies (reference §2: TV≥2 strict, legacy ≥ for TV 0/1 and
//     v0/v1 requests, the KAFKA-19999 retry, coordinator-epoch fencing);
//     a rejected marker changes nothing (INVALID_PRODUCER_EPOCH,
//     TRANSACTION_COORDINATOR_FENCED), and its pending offsets stay;
//   - accepted: COMMIT makes the producer's pending offsets of every group
//     of the partition committed (unless a plain commit was written after
//     them), ABORT drops them; the producer's state is stored;
//   - another topic is NOT_LEADER_OR_FOLLOWER, a partition out of range
//     UNKNOWN_TOPIC_OR_PARTITION;
//   - answered once durable, except to an in-process marker sender (it
//     shares the process log), answered once appended;
//   - broker-only: with security on, the cluster principal;
//   - counted in txncoord_group_markers_total by result, version and
//     transport (in_process: the node's own marker sender, which never
//     opens a connection to its own node).
//
// Version notes: v2 adds TransactionVersion (KIP-1228); at v0/v1 the TV
// is 0 and the legacy rule applies. TV -1 is UNKNOWN_SERVER_ERROR (as a
// 4.2 leader answers it), other negative TVs get the legacy rule.

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/txnrules"
	"github.com/txncoord/txncoord/wire"
)

// writeTxnMarkersAPI is WriteTxnMarkers v0–v2, broker-only (the coordinator's markers for __consumer_offsets).
var writeTxnMarkersAPI = wire.API[*Coordinator]{Key: 27, Min: 0, Max: 2, Access: wire.BrokersOnly, Handle: (*Coordinator).handleWriteTxnMarkers}

func (c *Coordinator) handleWriteTxnMarkers(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	var codes []int16
	pos, err := c.step(func(now time.Time) {
		for _, m := range req.Markers {
			tv := int8(0)
			if req.Version >= 2 {
				tv = m.TransactionVersion
			}
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					codes = append(codes, c.marker(now, r, m, tv, t.Topic, p))
				}
			}
		}
	})
	return func() (kmsg.Response, error) {
		if err == nil {
			err = c.durable(ctx, r, pos)
		}
		version, transport := strconv.Itoa(int(req.Version)), "tcp"
		if r.InProcess() {
			transport = "in_process"
		}
		i := 0
		return wire.WriteTxnMarkersResponse(req, func(kmsg.WriteTxnMarkersRequestMarker, string, int32) int16 {
			code := codes[i]
			i++
			if code == 0 && err != nil {
				code = kerr.KafkaStorageError.Code
			}
			c.m.markers.WithLabelValues(codeName(code), version, transport).Inc()
			return code
		}), nil
	}
}

// marker validates and applies one partition's marker; c.mu is held.
func (c *Coordinator) marker(now time.Time, r *wire.Request, m kmsg.WriteTxnMarkersRequestMarker, tv int8, topic string, partition int32) int16 {
	if code := c.offsetsPartitionCode(topic, partition); code != 0 {
		return code
	}
	ruleTV := tv
	switch {
	case tv == txnrules.TVUnknown:
		r.Logger().Warn().Int64("pid", m.ProducerID).Int16("epoch", m.ProducerEpoch).Int32("partition", partition).
			Msg("marker refused: TransactionVersion -1 (TV_UNKNOWN); UNKNOWN_SERVER_ERROR, as Kafka answers")
		return kerr.UnknownServerError.Code
	case tv < 0:
		ruleTV = 0
	}
	if err := c.core.Marker(now, partition, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, ruleTV, m.Committed); err != nil {
		cur := c.core.Producers(partition)[m.ProducerID]
		r.Logger().Info().Err(err).Int64("pid", m.ProducerID).Int16("epoch", m.ProducerEpoch).Int8("tv", tv).
			Int16("wtm_version", r.Version).Str("topic", topic).Int32("partition", partition).
			Int32("coordinator_epoch", m.CoordinatorEpoch).Bool("commit", m.Committed).Int16("current_epoch", cur.Epoch).
			Bool("txn_open", cur.TxnOpen).Msg("marker rejected")
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Code
		}
		return kerr.UnknownServerError.Code
	}
	if c.debugging() {
		r.Logger().Debug().Int64("pid", m.ProducerID).Int16("epoch", m.ProducerEpoch).Int8("tv", tv).Int32("partition", partition).
			Int32("coordinator_epoch", m.CoordinatorEpoch).Bool("commit", m.Committed).Msg("marker applied: pending offsets committed or dropped")
	}
	return 0
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return ke.Message
	}
	return "UNKNOWN"
}
