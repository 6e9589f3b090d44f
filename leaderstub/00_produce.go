package leaderstub

// Produce (key 0), v3–v13, advertised from v0.
//
// Behavior:
//   - v0–v2 are advertised but refused, as Kafka 4.x does (KIP-896,
//     KAFKA-18659): the wire server closes the connection at the request's
//     header, before this handler (wire/refused.go). A client pinned below
//     0.11 (kgo kversion.V0_10_2, sarama V0_10_2_0: Produce v2) sees its
//     connection closed, as against Kafka 4.x; librdkafka, which compresses
//     only when the broker's Produce range includes v0, compresses;
//   - each partition's record set is validated (batch v2, CRC-32C, codec,
//     records) before anything is appended; a bad set is CORRUPT_MESSAGE or
//     INVALID_RECORD for that partition only. A message set of magic 0 or 1
//     (the formats of Produce v0–v2) is INVALID_RECORD, Kafka 4.x's answer
//     (legacyMagicCode);
//   - idempotent batches: a retry of one of the producer's last 5 batches is
//     answered with the original offset and appended again never; epoch and
//     sequence are checked as Kafka's ProducerAppendInfo does;
//   - transactional batches from a producer with no open transaction here
//     are registered with the coordinator first (AddPartitionsToTxn,
//     VerifyOnly for v≤11). The handler waits for that call itself, so that
//     pipelined requests on one connection keep their order;
//   - a transactional batch at an epoch above its producer's while that
//     producer's previous transaction is still open here (its marker not
//     yet applied: TV2 bumps the epoch at EndTxn, and the coordinator may
//     register the next transaction before the markers are written) is
//     held back until a marker closes that transaction, then validated and
//     appended (see "Held batches" below); if none comes within the
//     request's timeout (at most Config.PrevTxnMarkerWait, 10 s) the
//     partition gets NOT_ENOUGH_REPLICAS and nothing is appended;
//   - acks 1/-1 are answered after the batch is fsynced (the Reply waits on
//     the group commit); acks 0 gets no response; other acks are
//     INVALID_REQUIRED_ACKS.
//
// Held batches. The handler does not wait for the marker itself: it
// queues the batch on its partition (partition.held, per producer) and a
// goroutine appends it once the marker is applied; the Reply waits for that
// goroutine, then for durability. So the connection goes on handling its
// next requests, and the other partitions of the request are appended at
// once. Order is kept where it matters, per (partition, producer): while a
// producer has a held batch on a partition, every later batch of that
// producer there (the next request on the same connection, a retry on a
// new connection) queues behind it in arrival order and is validated only
// after it, so sequence numbers never see a later batch first, and a retry
// of the held batch finds it with findDuplicate once it is appended.
// Responses keep request order on the connection anyway (the server
// resolves Replies in order). Batches of other producers are not ordered
// against a held one: Kafka orders only per producer and partition.
//
// The refusal code is NOT_ENOUGH_REPLICAS (19), the code Kafka's
// ReplicaManager gives a transactional produce it cannot let in yet
// because the coordinator is busy (CONCURRENT_TRANSACTIONS,
// COORDINATOR_NOT_AVAILABLE, ... during verification: KAFKA-15459), chosen
// there because every client retries it without a metadata refresh, and the
// code verifyError gives for the same coordinator answers here. It also
// says what happened: nothing was appended. Since Kafka 4.0 (KAFKA-18662) a
// TV2 produce (v12+) gets CONCURRENT_TRANSACTIONS (51) itself instead;
// kgo retries 51 (sink.go handles it explicitly since KIP-890) and so does
// the Java producer (a RetriableException), but librdkafka (Produce ≤ v10)
// treats 51 on Produce as permanent and sarama does not retry it, while
// kgo (a retriable kerr), Java, librdkafka (RETRY, not persisted) and
// sarama all retry 19. A leader closing or a server shutting down answers
// a held batch NOT_LEADER_OR_FOLLOWER, as a write after Close does.
//
// Version notes: v11 may return TRANSACTION_ABORTABLE; v12 is KIP-890's
// implicit add (VerifyOnly=false); v13 names topics by id.

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/wire"
)

// produceAPI is Produce v0–v13. v0 is the advertised minimum, as Kafka
// 4.x advertises it; the wire server refuses v0–v2 (see above), so the
// handler sees v3+ over TCP.
var produceAPI = wire.API[*Leader]{Key: 0, Min: 0, Max: 13, Handle: (*Leader).handleProduce}

// producePart is one partition of a Produce request on its way through.
type producePart struct {
	topic   string
	topicID [16]byte
	index   int32
	p       *partition
	code    int16
	batches [][]byte
	headers []batchHeader
	fresh   bool // registered just now for a TV2 producer
	base    int64
	op      *writeOp
	// reg is the partition's registration at the coordinator, when it
	// needs one (neededRegistrations): kept here, it costs no allocation.
	reg coordclient.Registration
	// logAppendTime is the time a LogAppendTime topic's batches were
	// stamped with (topic_configs.go); 0 otherwise.
	logAppendTime int64
	// held is closed once a held-back batch was appended (op set) or
	// refused (code set) by its goroutine; nil when not held back.
	held <-chan struct{}
}

// holdLimits is what bounds a held batch's wait (one Produce request).
type holdLimits struct {
	ctx      context.Context // the server's: done at Shutdown's deadline
	stopping <-chan struct{} // closed when the server begins to drain
	bound    time.Duration
	req      *wire.Request // its Logger, built when a hold logs
}

// prevTxnMarkerWait is how long a held batch waits at most: the request's
// timeout capped at Config.PrevTxnMarkerWait (a timeout ≤ 0 gets the cap).
func (l *Leader) prevTxnMarkerWait(timeoutMillis int32) time.Duration {
	limit := l.cfg.PrevTxnMarkerWait
	if d := time.Duration(timeoutMillis) * time.Millisecond; d > 0 && d < limit {
		return d
	}
	return limit
}

func (l *Leader) handleProduce(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ProduceRequest)
	version := r.Version
	acksOK := req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	// The partitions' states in one allocation, the list in another.
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	states, parts := make([]producePart, n), make([]*producePart, 0, n)
	for _, rt := range req.Topics {
		name, topicErr := l.topicName(rt.Topic, rt.TopicID, version >= 13)
		// WRITE on the topic, before its existence (Kafka's order).
		writable := topicErr != nil || wire.Authorize(r, kmsg.ACLOperationWrite, wire.TopicResource(name))
		for _, rp := range rt.Partitions {
			pp := &states[len(parts)]
			*pp = producePart{topic: name, topicID: rt.TopicID, index: rp.Partition, base: -1}
			parts = append(parts, pp)
			switch {
			case !acksOK:
				pp.code = kerr.InvalidRequiredAcks.Code
			case !writable:
				pp.code = kerr.TopicAuthorizationFailed.Code
			case topicErr != nil:
				pp.code = topicErr.Code
			default:
				l.prepareProducePart(pp, rp.Records, req.TransactionID, r, wire.BudgetFrom(ctx))
			}
		}
	}

	if regs, owners := l.neededRegistrations(parts, req, version); len(regs) > 0 {
		l.registerWithRetry(ctx, regs, owners, version)
	}
	limits := holdLimits{ctx: ctx, stopping: r.Stopping, bound: l.prevTxnMarkerWait(req.TimeoutMillis), req: r}
	for _, pp := range parts {
		if pp.code == 0 {
			l.appendProduce(pp, limits)
		}
	}

	acks := req.Acks
	return func() (kmsg.Response, error) {
		if acks == 0 {
			return nil, nil // a held batch still goes in (or not) on its own
		}
		for _, pp := range parts {
			if pp.held != nil {
				<-pp.held // bounded: holdLimits
			}
			if pp.op != nil {
				if err := pp.op.Wait(); err != nil {
					pp.code, pp.base = errCode(err), -1
				}
			}
		}
		return l.produceResponse(req, parts, version), nil
	}
}

// prepareProducePart resolves the partition and validates the record set,
// charging decompression to mem (the request's budget share).
func (l *Leader) prepareProducePart(pp *producePart, records []byte, txnID *string, r *wire.Request, mem wire.MemoryBudget) {
	p, kerrE := l.partitionFor(pp.topic, pp.index)
	if kerrE != nil {
		pp.code = kerrE.Code
		return
	}
	pp.p = p
	if code, why := legacyMagicCode(records); code != 0 {
		pp.code = code
		r.Logger().Warn().Str("topic", pp.topic).Int32("partition", pp.index).Int16("error_code", code).
			Str("reason", why).Msg("produce: invalid record set")
		return
	}
	batches, headers, err := splitBatches(records, mem)
	if err != nil {
		pp.code = errCode(err)
		r.Logger().Warn().Err(err).Str("topic", pp.topic).Int32("partition", pp.index).Msg("produce: invalid record set")
		return
	}
	for _, h := range headers {
		if h.idempotent() && len(headers) > 1 {
			// Kafka accepts one batch per partition from an
			// idempotent or transactional producer.
			pp.code = kerr.InvalidRecord.Code
			return
		}
	}
	if headers[0].transactional() && (txnID == nil || *txnID == "") {
		pp.code = kerr.TransactionalIDAuthorizationFailed.Code
		return
	}
	if err := l.space.Err(); err != nil {
		pp.code = kerr.KafkaStorageError.Code
		return
	}
	pp.batches, pp.headers = batches, headers
	l.applyTopicConfigs(pp) // max.message.bytes, LogAppendTime (topic_configs.go)
}

// Legacy framing: a message set of magic 0/1 and a record batch v2 share
// their first 17 bytes' layout (offset int64, size int32, crc or leader
// epoch int32, magic int8), so Kafka reads the magic of the first entry
// before knowing the format.
const (
	legacyLogOverhead   = 12 // offset + size
	legacyUpToMagic     = 17 // offset + size + crc/epoch + magic
	legacyRecordMinSize = 14 // LegacyRecord.RECORD_OVERHEAD_V0: the smallest entry size
)

// legacyMagicCode is Kafka 4.x's answer to a Produce record set whose first
// entry is not a whole record batch v2, or 0 when it is one (splitBatches
// validates the rest). Kafka reads the first entry as
// ByteBufferLogInputStream.nextBatch does, then ProduceRequest.validateRecords
// checks its magic:
//   - fewer bytes than an entry's framing, or an entry longer than the set
//     (truncated): no batch at all, INVALID_RECORD ("must have at least one
//     record batch");
//   - a size below the smallest legacy entry, or a magic other than 0, 1,
//     2: CORRUPT_MESSAGE (CorruptRecordException);
//   - magic 0 or 1 (message formats v0/v1, removed in 4.0 by KIP-896):
//     INVALID_RECORD ("only allowed to contain record batches with magic
//     version 2"); Kafka 3.x answered these at Produce v3+ the same way.
func legacyMagicCode(records []byte) (int16, string) {
	if len(records) < legacyLogOverhead {
		return kerr.InvalidRecord.Code, "no record batch"
	}
	size := int32(binary.BigEndian.Uint32(records[8:]))
	if size < legacyRecordMinSize {
		return kerr.CorruptMessage.Code, fmt.Sprintf("entry size %d below the minimum %d", size, legacyRecordMinSize)
	}
	if len(records) < legacyUpToMagic {
		return kerr.InvalidRecord.Code, "no record batch"
	}
	magic := int8(records[legacyUpToMagic-1])
	if magic < 0 || magic > 2 {
		return kerr.CorruptMessage.Code, fmt.Sprintf("invalid magic %d", magic)
	}
	if int64(len(records)) < int64(size)+legacyLogOverhead {
		return kerr.InvalidRecord.Code, "no record batch (the first entry is truncated)"
	}
	if magic < 2 {
		return kerr.InvalidRecord.Code, fmt.Sprintf("magic %d: only record batches of magic 2 are accepted (message formats v0/v1 were removed in Kafka 4.0)", magic)
	}
	return 0, ""
}

// neededRegistrations lists the transactional partitions whose producer
// has no open transaction here at this epoch: those go to the coordinator.
func (l *Leader) neededRegistrations(parts []*producePart, req *kmsg.ProduceRequest, version int16) ([]*coordclient.Registration, []*producePart) {
	var regs []*coordclient.Registration
	var owners []*producePart
	for _, pp := range parts {
		if pp.code != 0 || !pp.headers[0].transactional() {
			continue
		}
		h := pp.headers[0]
		pp.p.mu.RLock()
		e := pp.p.entry(h.ProducerID)
		pp.p.mu.RUnlock()
		if h.ProducerEpoch < e.Epoch {
			pp.code = kerr.InvalidProducerEpoch.Code // no need to ask
			continue
		}
		if e.txnOpen() && e.Epoch == h.ProducerEpoch {
			continue
		}
		pp.reg = coordclient.Registration{TxnID: *req.TransactionID, PID: h.ProducerID, Epoch: h.ProducerEpoch,
			VerifyOnly: version < 12, Topic: pp.topic, Partition: pp.index}
		regs = append(regs, &pp.reg)
		owners = append(owners, pp)
	}
	return regs, owners
}

// registerWithRetry registers the partitions, retrying CONCURRENT_TRANSACTIONS
// (the previous transaction's markers are still being written) with a short
// backoff as Kafka's ReplicaManager does, then maps the answers onto the
// partitions: an error fails that partition, success lets it append.
//
// It is the only layer that retries CONCURRENT_TRANSACTIONS: at most 9
// sends within 20 s. Below it each send is one coordclient.Registrar
// request (15 s over TCP; in-process, within the same 20 s), which Routed, with several coordinators, may resend
// only while the id's owner is unknown, moving or loading; the
// coordinator itself has waited up to 2 s for the previous markers
// before it answers CONCURRENT_TRANSACTIONS.
//
// The first send goes out under the request's own context: it is bounded
// below (15 s over TCP, the coordinator's 2 s wait in-process), and almost
// every registration is answered by it, so the 20 s deadline, a timer and
// a context, is made only when a retry needs it.
func (l *Leader) registerWithRetry(ctx context.Context, regs []*coordclient.Registration, owners []*producePart, version int16) {
	deadline := time.Now().Add(registerBound)
	pending := regs
	backoff := 10 * time.Millisecond
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == 1 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		l.registrar.Register(ctx, pending)
		var retry []*coordclient.Registration
		for _, reg := range pending {
			if reg.Code == kerr.ConcurrentTransactions.Code && attempt < 8 {
				retry = append(retry, reg)
			}
		}
		if len(retry) == 0 {
			break
		}
		select {
		case <-time.After(backoff): // a retry backoff, not a synchronization
		case <-ctx.Done():
			// The request's context ended (the server's Shutdown
			// deadline, or the 20 s bound): answer with the last
			// codes instead of retrying.
			retry = nil
		}
		if len(retry) == 0 {
			break
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		pending = retry
	}
	for i, reg := range regs {
		pp := owners[i]
		if code := verifyError(reg.Code, version); code != 0 {
			pp.code = code
			l.log.Info().Str("txn_id", reg.TxnID).Int64("pid", reg.PID).Int16("epoch", reg.Epoch).Str("topic", pp.topic).
				Int32("partition", pp.index).Int16("coordinator_error", reg.Code).Int16("error_code", code).
				Bool("verify_only", reg.VerifyOnly).Msg("produce: transaction registration refused")
			continue
		}
		pp.fresh = version >= 12
	}
}

// registerBound bounds registerWithRetry: every send and backoff of one
// Produce's registrations.
const registerBound = 20 * time.Second

// verifyError maps a coordinator answer to the Produce partition error,
// as Kafka's AddPartitionsToTxnManager does: PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE is INVALID_TXN_STATE before
// Produce v11, and an unreachable or moving coordinator is the retriable
// NOT_ENOUGH_REPLICAS.
func verifyError(code int16, produceVersion int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		if produceVersion < 11 {
			return kerr.InvalidTxnState.Code
		}
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}

// appendProduce appends a validated partition's batches under the
// partition lock and queues them for the group commit, or holds an
// idempotent batch back (see "Held batches" above): when it must wait for
// its producer's previous transaction's marker, or queue behind a batch of
// the same producer that is held. A retry of an appended batch is answered
// at once either way.
func (l *Leader) appendProduce(pp *producePart, limits holdLimits) {
	p := pp.p
	p.mu.Lock()
	if h := pp.headers[0]; h.idempotent() {
		e := p.entry(h.ProducerID)
		if dup, ok := e.findDuplicate(h); ok {
			p.mu.Unlock()
			pp.base = dup.BaseOffset // a retry: same answer, nothing appended
			return
		}
		prev, queued := p.held[h.ProducerID]
		if queued || awaitsPreviousMarker(e, h) {
			hb := &heldBatch{done: make(chan struct{})}
			if queued {
				hb.prev = prev.done
			}
			p.held[h.ProducerID] = hb
			p.mu.Unlock()
			pp.held = hb.done
			limits.req.Logger().Debug().Int64("pid", h.ProducerID).Int16("epoch", h.ProducerEpoch).Int16("current_epoch", e.Epoch).
				Int64("txn_first_offset", e.TxnFirstOffset).Bool("queued", queued).Str("topic", pp.topic).
				Int32("partition", pp.index).Msg("produce: batch held back until the previous transaction's marker")
			go l.appendHeld(pp, hb, limits)
			return
		}
	}
	l.appendLocked(pp)
	p.mu.Unlock()
}

// appendHeld runs a held batch: after the producer's previous held batch
// (if any) is done, it waits until no transaction of the producer at a
// lower epoch is open here (a marker closed it: writeMarker wakes it), then
// validates and appends it as appendProduce would have. The wait is bounded
// by limits.bound and ends when the leader closes or the server stops;
// then the batch is refused and nothing is appended.
func (l *Leader) appendHeld(pp *producePart, hb *heldBatch, limits holdLimits) {
	defer close(hb.done)
	p, h := pp.p, pp.headers[0]
	start := time.Now()
	timer := time.NewTimer(limits.bound)
	defer timer.Stop()
	// release removes the batch from the producer's queue if it is the
	// newest there (a later one otherwise takes over and removes itself).
	release := func() {
		if p.held[h.ProducerID] == hb {
			delete(p.held, h.ProducerID)
		}
	}
	wait := func(ch <-chan struct{}) (code int16, reason string) {
		select {
		case <-ch:
			return 0, ""
		case <-timer.C:
			return kerr.NotEnoughReplicas.Code, "no marker within the wait bound"
		case <-l.space.Failed():
			return kerr.KafkaStorageError.Code, "the process log failed"
		case <-l.stop:
			return kerr.NotLeaderForPartition.Code, "leader closing"
		case <-limits.stopping:
			return kerr.NotLeaderForPartition.Code, "server shutting down"
		case <-limits.ctx.Done():
			return kerr.NotLeaderForPartition.Code, "server shut down"
		}
	}
	code, reason := int16(0), ""
	if hb.prev != nil {
		code, reason = wait(hb.prev)
	}
	for code == 0 {
		p.mu.Lock()
		e := p.entry(h.ProducerID)
		if !awaitsPreviousMarker(e, h) {
			l.appendLocked(pp)
			release()
			p.mu.Unlock()
			return
		}
		marker := p.nextMarker()
		p.mu.Unlock()
		code, reason = wait(marker)
	}
	p.mu.Lock()
	e := p.entry(h.ProducerID)
	release()
	p.mu.Unlock()
	pp.code, pp.base = code, -1
	limits.req.Logger().Info().Int64("pid", h.ProducerID).Int16("epoch", h.ProducerEpoch).Int16("current_epoch", e.Epoch).
		Int64("txn_first_offset", e.TxnFirstOffset).Str("topic", pp.topic).Int32("partition", pp.index).
		Dur("waited", time.Since(start)).Str("reason", reason).Int16("error_code", code).
		Msg("produce: batch held for the previous transaction's marker refused")
}

// appendLocked validates and appends a partition's batches; the caller
// holds the partition lock.
func (l *Leader) appendLocked(pp *producePart) {
	p := pp.p
	var entry *producerEntry
	if h := pp.headers[0]; h.idempotent() {
		e := p.entry(h.ProducerID)
		if dup, ok := e.findDuplicate(h); ok {
			pp.base = dup.BaseOffset // a retry: same answer, nothing appended
			return
		}
		if err := checkDataBatch(e, h, pp.fresh); err != nil {
			pp.code = errCode(err)
			return
		}
		next := appendDataBatch(e, h, p.nextOffset, p.nextOffset+int64(h.LastOffsetDelta))
		entry = &next
	}
	op := &persistOp{key: p.key}
	pp.base = p.nextOffset
	for i, raw := range pp.batches {
		h := pp.headers[i]
		base := p.nextOffset
		setBaseOffset(raw, base)
		op.addBatch(base, raw)
		p.appendIndex(batchIndex{Base: base, Last: base + int64(h.LastOffsetDelta), Size: int64(len(raw)),
			MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID, Transactional: h.transactional(), raw: raw})
	}
	if entry != nil {
		p.setEntry(*entry)
		op.ownEntry = *entry
		op.entry = &op.ownEntry
	}
	op.dropped, op.droppedAborted = l.retain(p)
	op.logStart = p.logStart
	end := p.nextOffset
	l.metrics.batches.Add(float64(len(pp.batches)))
	op.advanceOnDurable(l, p, end)
	pp.op = l.enqueue(op)
	p.keepRaw(pp.op.Pos(), end)
}

func (l *Leader) produceResponse(req *kmsg.ProduceRequest, parts []*producePart, version int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	i := 0
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for range rt.Partitions {
			pp := parts[i]
			i++
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime = pp.index, pp.code, pp.base, -1
			rp.LogStartOffset = -1
			if pp.code != 0 {
				rp.BaseOffset = -1
			} else if pp.logAppendTime != 0 {
				rp.LogAppendTime = pp.logAppendTime
			}
			if pp.p != nil {
				pp.p.mu.RLock()
				rp.LogStartOffset = pp.p.logStart
				pp.p.mu.RUnlock()
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
