package leaderstub

// WriteTxnMarkers (key 27), v0–v2 (the node's profile caps the advertised
// max: 4.0/4.1 leaders advertise v1 and the wire server closes the
// connection on a v2 request, as those Kafka versions do).
//
// Behavior:
//   - per marker, per partition: validate (checkMarker: reference §2 table,
//     KAFKA-19999 retry, coordinator-epoch fencing), then append the control
//     batch; every partition gets its own error code;
//   - a rejected marker changes no state: validation runs before any
//     mutation, under the partition lock;
//   - on success a transaction that was open completes: its first offset
//     leaves the open set (the LSO moves once the marker is durable), an
//     abort adds an entry to the aborted-transaction index;
//   - a marker for a producer with no open transaction is still written
//     when accepted (Kafka appends it; with TV≥2 at the same epoch this is
//     the KAFKA-19999 "idempotent retry" with a duplicate control batch);
//   - the response is sent after every append is durable, except to an
//     in-process marker sender (`txncoord up`, wire.Request.InProcess),
//     which shares the process log: it gets the answer once the appends
//     are in the log, and appends the transaction's Complete record after
//     them (durable only with them, by the order of the log);
//   - an applied marker wakes the producer's data batches held back for it
//     (a TV2 batch at the bumped epoch that arrived first, 00_produce.go).
//
// Version notes: v2 adds TransactionVersion (KIP-1228); at v0/v1 the TV is
// 0 and the legacy ≥ rule applies. TV above 2 gets the strict rule. TV -1
// is Kafka's TV_UNKNOWN, which Kafka 4.2 refuses on a leader append
// (ProducerAppendInfo.appendEndTxnMarker throws IllegalArgumentException,
// which the append path answers as UNKNOWN_SERVER_ERROR): the same here,
// per partition, with a log line, nothing written. Any other negative TV
// is below 2, so Kafka applies the legacy rule to it, and so does this.

import (
	"context"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/wire"
)

// writeTxnMarkersAPI is WriteTxnMarkers v0–v2, broker-only: with
// security on, only the cluster principal may write markers (anyone else
// gets CLUSTER_AUTHORIZATION_FAILED per partition and nothing changes).
var writeTxnMarkersAPI = wire.API[*Leader]{Key: 27, Min: 0, Max: 2, Access: wire.BrokersOnly, Handle: (*Leader).handleWriteTxnMarkers}

// tvUnknown is Kafka's TransactionVersion.TV_UNKNOWN.
const tvUnknown int8 = -1

// markerResult is one partition's outcome, resolved when durable.
type markerResult struct {
	code int16
	op   *writeOp
	rec  ReceivedMarker
}

func (l *Leader) handleWriteTxnMarkers(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	// A caller appending to this leader's log (the marker sender of
	// `txncoord up`) is answered once the markers are appended: the
	// Complete record it appends next is durable only with them. Nobody
	// waits for those markers then, so they go to disk with the next
	// write someone waits for (lazy) instead of starting a group commit.
	inProcess := durable.Shares(r.CallerLog(), l.space.Store())
	version := r.Version
	var results []*markerResult
	for _, m := range req.Markers {
		tv := int8(0) // v0/v1 carry no TV: the legacy rule (reference §1)
		if version >= 2 {
			tv = m.TransactionVersion
		}
		for _, t := range m.Topics {
			for _, idx := range t.Partitions {
				res := &markerResult{rec: ReceivedMarker{RequestVersion: version, TransactionVersion: tv,
					ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed,
					CoordinatorEpoch: m.CoordinatorEpoch, Topic: t.Topic, Partition: idx}}
				res.code, res.op = l.writeMarker(r, m, tv, t.Topic, idx, inProcess)
				results = append(results, res)
			}
		}
	}
	return func() (kmsg.Response, error) {
		recs := make([]ReceivedMarker, 0, len(results))
		i := 0
		resp := wire.WriteTxnMarkersResponse(req, func(kmsg.WriteTxnMarkersRequestMarker, string, int32) int16 {
			res := results[i]
			i++
			switch {
			case res.op == nil:
			case inProcess:
				// Not waited for, but an append the log
				// refused at once (the leader closing, the
				// store stopped) is no marker written.
				if err := res.op.Refused(); err != nil {
					res.code = errCode(err)
				}
			default:
				if err := res.op.Wait(); err != nil {
					res.code = errCode(err)
				}
			}
			res.rec.ErrorCode = res.code
			recs = append(recs, res.rec)
			l.metrics.marker(version, res.code)
			return res.code
		})
		l.recordMarkers(recs)
		return resp, nil
	}
}

// writeMarker validates and appends one partition's marker.
func (l *Leader) writeMarker(r *wire.Request, m kmsg.WriteTxnMarkersRequestMarker, tv int8, topic string, idx int32, lazy bool) (int16, *writeOp) {
	// The marker's logger is built only when a line is written: With()
	// formats every field at once, and most markers log nothing.
	logger := func() *zerolog.Logger {
		lg := r.Logger().With().Int64("pid", m.ProducerID).Int16("epoch", m.ProducerEpoch).Int8("tv", tv).
			Int16("wtm_version", r.Version).Str("topic", topic).Int32("partition", idx).
			Int32("coordinator_epoch", m.CoordinatorEpoch).Bool("commit", m.Committed).Logger()
		return &lg
	}
	p, kerrE := l.partitionFor(topic, idx)
	if kerrE != nil {
		return kerrE.Code, nil
	}
	if l.space.Err() != nil {
		return kerr.KafkaStorageError.Code, nil
	}
	ruleTV := tv
	switch {
	case tv == tvUnknown:
		logger().Warn().Msg("marker refused: TransactionVersion -1 (TV_UNKNOWN) on a leader append; UNKNOWN_SERVER_ERROR, as Kafka answers")
		return kerr.UnknownServerError.Code, nil
	case tv < 0:
		ruleTV = 0 // below 2: Kafka's legacy rule
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entry(m.ProducerID)
	if err := checkMarker(e, m.ProducerEpoch, m.CoordinatorEpoch, ruleTV); err != nil {
		logger().Info().Err(err).Int16("current_epoch", e.Epoch).Int32("current_coordinator_epoch", e.CoordinatorEpoch).
			Bool("txn_open", e.txnOpen()).Msg("marker rejected")
		return errCode(err), nil
	}
	if tv >= 2 && m.ProducerEpoch == e.Epoch {
		logger().Info().Msg("marker accepted as an idempotent retry (KAFKA-19999): duplicate control batch written")
	}
	now := l.nowMillis()
	offset := p.nextOffset
	raw := controlBatch(offset, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, now)
	op := &persistOp{key: p.key}
	op.addBatch(offset, raw)
	if e.txnOpen() {
		first := e.TxnFirstOffset
		if !m.Committed {
			// LSO recorded for the completed txn: the earliest open
			// txn of another producer, else just past the marker.
			lso := p.firstUnstable(m.ProducerID)
			if lso < 0 {
				lso = offset + 1
			}
			a := abortedTxn{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: offset, LastStableOffset: lso}
			p.aborted = append(p.aborted, a)
			op.aborted = &a
		}
		p.unreplicated = append(p.unreplicated, unreplicatedTxn{FirstOffset: first, MarkerOffset: offset})
	}
	op.ownEntry = applyMarker(e, m.ProducerEpoch, m.CoordinatorEpoch, now)
	p.setEntry(op.ownEntry)
	op.entry = &op.ownEntry
	p.appendIndex(batchIndex{Base: offset, Last: offset, Size: int64(len(raw)), MaxTimestamp: now,
		ProducerID: m.ProducerID, Control: true, Transactional: true, raw: raw})
	op.dropped, op.droppedAborted = l.retain(p)
	op.logStart = p.logStart
	end := p.nextOffset
	enqueue := l.enqueue
	if lazy {
		enqueue = l.enqueueLazy
	}
	op.advanceOnDurable(l, p, end)
	w := enqueue(op)
	p.keepRaw(w.Pos(), end)
	// Batches held back for this transaction's marker (00_produce.go)
	// may go now: they take the partition lock after this function
	// releases it, so their data gets offsets after the marker and their
	// ops are queued after its op (the group commit keeps queue order, so
	// they can never be durable without it).
	p.wakeMarkerWaiters()
	if r.Log.GetLevel() <= zerolog.DebugLevel {
		logger().Debug().Int64("offset", offset).Msg("marker appended")
	}
	return 0, w
}
