package txncore

// The pure core: Kafka's transaction state machine as functions of (stored
// metadata, request, now) → Outcome. No I/O, no clock, no goroutines; the
// only injected dependency is PIDSource. Package coordinator persists
// Outcome.Persist and answers only after it is durable, then hands
// Outcome.Markers to the marker sender.
//
// Where this differs from Apache Kafka 4.2.0, and why:
//   - Previous/next producer id and the last producer epoch are persisted
//     (Kafka persists prev/next only from 4.3, never the last epoch), so a
//     retried rotation or InitProducerId is recognised after a restart.
//   - A fence or timeout abort at epoch exhaustion rotates the producer id
//     as 4.3.0 does (KAFKA-20090): markers carry 32767 with the old id,
//     Complete* moves to (new id, 0). 4.2.0 keeps the old id there.
//   - Dead is never stored: expiry deletes the record.
//   - PrepareEpochFence is never a separate step: the fence and its abort
//     are one persisted PrepareAbort (the only state Kafka persists too).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	noEpoch int16 = -1
	// epochExhausted: from this epoch on, a bump would reach the last
	// usable epoch, so the producer id rotates (Kafka: Short.MaxValue-1).
	epochExhausted int16 = 32766
	maxEpoch       int16 = 32767
)

// PIDSource hands out a new, never used producer id. It is an interface,
// not a func, so that a caller's per-step state can be the source without
// a closure allocated per step (most steps never ask for an id).
type PIDSource interface{ NextPID() int64 }

// PIDFunc is a func as a PIDSource.
type PIDFunc func() int64

// NextPID calls f.
func (f PIDFunc) NextPID() int64 { return f() }

// Outcome is what one core step decided.
type Outcome struct {
	// Err is the Kafka error code of the answer (0 = NONE).
	Err int16
	// Persist, when not nil, must be durable before the answer is sent.
	// It is the caller's: it shares no slice or pointer with the state
	// the step was decided on (every step builds it from a Clone), so
	// the caller may keep it as the new state without copying it again.
	Persist *Metadata
	// Delete removes the record (expiry); durable before anything else.
	Delete bool
	// ProducerID/ProducerEpoch are the answer's (InitProducerId, EndTxn v5).
	ProducerID    int64
	ProducerEpoch int16
	// Markers, when not nil, go to the marker sender once Persist is
	// durable (never before: invariant 1). The caller adds the
	// coordinator epoch.
	Markers *Markers
	// PartitionErrs holds per-partition answers of VerifyOnly checks.
	PartitionErrs map[TopicPartition]int16
}

// Fail is the answer code with nothing persisted and no producer id.
func Fail(code int16) Outcome { return Outcome{Err: code, ProducerID: -1, ProducerEpoch: -1} }

func isExhausted(epoch int16) bool { return epoch >= epochExhausted }

func isPrepare(s State) bool { return s == PrepareCommit || s == PrepareAbort }

func isCompleteOrEmpty(s State) bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// InitPIDRequest is InitProducerId for a non-null transactional id.
type InitPIDRequest struct {
	TransactionalID string
	TimeoutMs       int32
	// ProducerID/ProducerEpoch are -1/-1 unless a v3+ client supplies
	// its current ones (KIP-360).
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID decides an InitProducerId (Kafka's
// prepareInitProducerIdTransit). cur is nil for an unknown id. serverTV is
// the cluster's finalized transaction.version, used when an Ongoing
// transaction must be fenced and aborted.
func InitProducerID(cur *Metadata, pending bool, req InitPIDRequest, now int64, serverTV int16, pids PIDSource) Outcome {
	hasExpected := req.ProducerID != NoProducerID
	if cur == nil {
		cur = &Metadata{
			TransactionalID: req.TransactionalID, ProducerID: pids.NextPID(), PrevProducerID: -1, NextProducerID: -1,
			ProducerEpoch: noEpoch, LastProducerEpoch: noEpoch, TimeoutMs: req.TimeoutMs, State: Empty,
			StartTimestamp: -1, LastUpdateTimestamp: now,
		}
	}
	// Pending first, a Prepare* included (checkProducer says why): a
	// client answered the new producer id of a rotation retries until the
	// Complete* stores it, rather than being fenced.
	if pending || cur.Completing != nil || isPrepare(cur.State) {
		return Fail(kerr.ConcurrentTransactions.Code)
	}
	if hasExpected {
		valid := cur.ProducerEpoch == noEpoch || cur.ProducerID == req.ProducerID ||
			(cur.PrevProducerID == req.ProducerID && isExhausted(req.ProducerEpoch))
		if !valid {
			return Fail(kerr.ProducerFenced.Code)
		}
	}
	if cur.State == Ongoing {
		// Fence the running producer: abort its transaction with a
		// bumped epoch; the caller retries on 51 and then gets the
		// epoch after the abort.
		out := abortByCoordinator(cur, now, serverTV, pids)
		out.Err, out.ProducerID, out.ProducerEpoch = kerr.ConcurrentTransactions.Code, -1, -1
		return out
	}
	next := cur.Clone()
	next.TimeoutMs, next.LastUpdateTimestamp = req.TimeoutMs, now
	if isExhausted(cur.ProducerEpoch) && (!hasExpected || req.ProducerEpoch == cur.ProducerEpoch) {
		next.PrevProducerID, next.ProducerID, next.ProducerEpoch = cur.ProducerID, pids.NextPID(), 0
		next.LastProducerEpoch = noEpoch
		if hasExpected {
			next.LastProducerEpoch = cur.ProducerEpoch
		}
	} else {
		switch {
		case !hasExpected:
			next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, noEpoch
		case cur.ProducerEpoch == noEpoch || req.ProducerEpoch == cur.ProducerEpoch:
			next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, cur.ProducerEpoch
		case req.ProducerEpoch == cur.LastProducerEpoch:
			// A retry of the InitProducerId that already bumped:
			// answer the current epoch again (the record is
			// rewritten with the new timeout, as Kafka does).
		default:
			return Fail(kerr.ProducerFenced.Code)
		}
	}
	next.State, next.Partitions = Empty, nil
	return Outcome{Persist: &next, ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch}
}

// abortByCoordinator fences an Ongoing transaction and prepares its abort
// (timeout, InitProducerId fence, operator abort): one bump e → e+1, the
// markers carry e+1 and the cluster's transaction version.
func abortByCoordinator(cur *Metadata, now int64, serverTV int16, pids PIDSource) Outcome {
	next := cur.Clone()
	next.ClientTransactionVersion = serverTV
	if cur.ProducerEpoch < maxEpoch {
		next.ProducerEpoch = cur.ProducerEpoch + 1
	}
	if serverTV >= 2 {
		next.LastProducerEpoch = cur.ProducerEpoch
	} else {
		next.LastProducerEpoch = noEpoch
	}
	if isExhausted(cur.ProducerEpoch) {
		// 4.3 behaviour: the abort's markers use 32767 with the old id;
		// Complete* rotates to (new id, 0).
		next.NextProducerID = pids.NextPID()
	}
	return prepare(cur, next, false, now)
}

// prepare finishes a transition to Prepare* from next's pid/epoch.
func prepare(cur *Metadata, next Metadata, commit bool, now int64) Outcome {
	next.State = PrepareAbort
	if commit {
		next.State = PrepareCommit
	}
	next.LastUpdateTimestamp = now
	m := &Markers{
		TransactionalID: next.TransactionalID, ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch,
		Commit: commit, TransactionVersion: int8(next.ClientTransactionVersion), Partitions: slices.Clone(next.Partitions),
	}
	return Outcome{Persist: &next, Markers: m, ProducerID: -1, ProducerEpoch: -1}
}

// AddPartitionsRequest adds partitions to a transaction (AddPartitionsToTxn,
// AddOffsetsToTxn).
type AddPartitionsRequest struct {
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition
	// ClientTV is 2 for AddPartitionsToTxn v4+, else 0.
	ClientTV int16
	// KeepTV keeps the stored TV of an Ongoing transaction (AddOffsetsToTxn
	// says nothing about the client's TV).
	KeepTV bool
	// Overlap lets a TV2 registration start the next transaction while
	// the previous one's markers are still being written (see
	// Completion); only leaders' registrations (AddPartitionsToTxn
	// v4+) ask for it, since the leader orders data after markers.
	Overlap bool
}

// AddPartitions decides an AddPartitionsToTxn (not VerifyOnly).
func AddPartitions(cur *Metadata, pending bool, req AddPartitionsRequest, now int64) Outcome {
	if cur != nil && !pending && isPrepare(cur.State) && req.Overlap && canOverlap(cur, req) &&
		cur.ProducerID == req.ProducerID && cur.ProducerEpoch == req.ProducerEpoch {
		// The next transaction starts on top of the Complete* this
		// Prepare leads to; the Prepare's markers stay outstanding.
		done := completed(*cur, now)
		done.Completing = &Completion{Commit: cur.State == PrepareCommit, ProducerID: cur.ProducerID,
			ProducerEpoch: cur.ProducerEpoch, TransactionVersion: cur.ClientTransactionVersion,
			Partitions: append([]TopicPartition(nil), cur.Partitions...)}
		cur = &done
	}
	if code := checkProducer(cur, pending, req.ProducerID, req.ProducerEpoch); code != 0 {
		return Fail(code)
	}
	if cur.State != Ongoing && !isCompleteOrEmpty(cur.State) {
		return Fail(kerr.InvalidTxnState.Code)
	}
	if cur.State == Ongoing && containsAll(cur.Partitions, req.Partitions) {
		return Outcome{} // nothing new to persist
	}
	next := cur.cloneGrow(len(req.Partitions))
	if cur.State != Ongoing {
		next.StartTimestamp, next.Partitions = now, next.Partitions[:0]
	}
	if !(req.KeepTV && cur.State == Ongoing) {
		next.ClientTransactionVersion = req.ClientTV
	}
	for _, tp := range req.Partitions {
		if !next.HasPartition(tp) {
			next.Partitions = append(next.Partitions, tp)
		}
	}
	next.State, next.LastUpdateTimestamp = Ongoing, now
	return Outcome{Persist: &next}
}

// canOverlap reports whether the next transaction may register while
// cur's markers are written: both TV2 (the Prepare bumped the epoch, so
// the leaders tell the two transactions apart) and no producer id
// rotation at this Prepare (the next transaction would use the new id).
func canOverlap(cur *Metadata, req AddPartitionsRequest) bool {
	return cur.ClientTransactionVersion >= 2 && req.ClientTV >= 2 && cur.NextProducerID == NoProducerID &&
		cur.Completing == nil
}

// VerifyPartitions answers AddPartitionsToTxn v4+ with VerifyOnly: per
// partition NONE when it is in the transaction, else TRANSACTION_ABORTABLE.
func VerifyPartitions(cur *Metadata, pending bool, pid int64, epoch int16, tps []TopicPartition) Outcome {
	if cur == nil || cur.ProducerID != pid {
		return Fail(kerr.InvalidProducerIDMapping.Code)
	}
	if cur.ProducerEpoch != epoch {
		return Fail(kerr.ProducerFenced.Code)
	}
	if pending || isPrepare(cur.State) {
		return Fail(kerr.ConcurrentTransactions.Code)
	}
	out := Outcome{PartitionErrs: map[TopicPartition]int16{}}
	for _, tp := range tps {
		code := kerr.TransactionAbortable.Code
		if cur.State == Ongoing && cur.HasPartition(tp) {
			code = 0
		}
		out.PartitionErrs[tp] = code
	}
	return out
}

// checkProducer is the check shared by AddPartitionsToTxn and
// AddOffsetsToTxn, in Kafka's order. A Prepare* transaction is pending
// as Kafka's is: its metadata holds a pending transition to Complete*
// from the Prepare's write until the Complete's, so a request meanwhile
// is answered CONCURRENT_TRANSACTIONS before its producer is checked.
// That is what a TV2 client relies on at epoch exhaustion: its EndTxn was
// answered with the new producer id, which the stored metadata holds only
// from the Complete* on, and its first registration with that id retries
// until then instead of failing with INVALID_PRODUCER_ID_MAPPING.
func checkProducer(cur *Metadata, pending bool, pid int64, epoch int16) int16 {
	switch {
	case cur == nil:
		return kerr.InvalidProducerIDMapping.Code
	case pending || isPrepare(cur.State):
		return kerr.ConcurrentTransactions.Code
	case cur.ProducerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case cur.ProducerEpoch != epoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

func containsAll(have, want []TopicPartition) bool {
	for _, tp := range want {
		if !slices.Contains(have, tp) {
			return false
		}
	}
	return true
}

// EndTxnRequest is an EndTxn.
type EndTxnRequest struct {
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	// Version is the EndTxn version: v5+ is TV2.
	Version int16
}

// EndTxn decides an EndTxn with Kafka's TV1 and TV2 retry rules.
func EndTxn(cur *Metadata, pending bool, req EndTxnRequest, now int64, pids PIDSource) Outcome {
	if cur == nil {
		return Fail(kerr.InvalidProducerIDMapping.Code)
	}
	if req.Version >= 5 {
		return endTxnV2(cur, pending, req, now, pids)
	}
	return endTxnV1(cur, pending, req, now)
}

func endTxnV1(cur *Metadata, pending bool, req EndTxnRequest, now int64) Outcome {
	switch {
	case cur.ProducerID != req.ProducerID:
		return Fail(kerr.InvalidProducerIDMapping.Code)
	case cur.ProducerEpoch != req.ProducerEpoch:
		return Fail(kerr.ProducerFenced.Code)
	case pending:
		return Fail(kerr.ConcurrentTransactions.Code)
	}
	switch cur.State {
	case Ongoing:
		next := cur.Clone()
		next.ClientTransactionVersion = 0
		return prepare(cur, next, req.Commit, now)
	case CompleteCommit, CompleteAbort:
		if (cur.State == CompleteCommit) == req.Commit {
			return Outcome{ProducerID: -1, ProducerEpoch: -1} // retry of a finished EndTxn
		}
	case PrepareCommit, PrepareAbort:
		if (cur.State == PrepareCommit) == req.Commit {
			return Fail(kerr.ConcurrentTransactions.Code)
		}
	}
	return Fail(kerr.InvalidTxnState.Code)
}

func endTxnV2(cur *Metadata, pending bool, req EndTxnRequest, now int64, pids PIDSource) Outcome {
	retryOnEpochBump := cur.ProducerEpoch == req.ProducerEpoch+1
	retryOnOverflow := cur.PrevProducerID == req.ProducerID && req.ProducerEpoch == epochExhausted && cur.ProducerEpoch == 0
	isRetry := retryOnEpochBump || retryOnOverflow
	if cur.ProducerID != req.ProducerID && !retryOnOverflow {
		return Fail(kerr.InvalidProducerIDMapping.Code)
	}
	var validEpoch bool
	switch {
	case cur.State == Ongoing || cur.State == Empty:
		validEpoch = req.ProducerEpoch == cur.ProducerEpoch
	case isPrepare(cur.State):
		validEpoch = retryOnEpochBump
	default: // Complete*
		validEpoch = isRetry || req.ProducerEpoch == cur.ProducerEpoch
	}
	if !validEpoch {
		return Fail(kerr.ProducerFenced.Code)
	}
	if pending || cur.Completing != nil {
		// The previous transaction's markers come first.
		return Fail(kerr.ConcurrentTransactions.Code)
	}
	bump := func() Outcome {
		next := cur.Clone()
		if cur.State != Ongoing {
			next.Partitions = nil // a bump abort has nothing to abort
		}
		next.ClientTransactionVersion = 2
		next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, cur.ProducerEpoch
		if isExhausted(cur.ProducerEpoch) {
			next.NextProducerID = pids.NextPID()
		}
		out := prepare(cur, next, req.Commit, now)
		// v5 answers the (pid, epoch) the client continues with.
		after := completed(next, now)
		out.ProducerID, out.ProducerEpoch = after.ProducerID, after.ProducerEpoch
		return out
	}
	switch cur.State {
	case Ongoing:
		return bump()
	case Empty:
		if !req.Commit {
			return bump()
		}
	case CompleteCommit, CompleteAbort:
		sameResult := (cur.State == CompleteCommit) == req.Commit
		switch {
		case isRetry && sameResult:
			return Outcome{ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch}
		case !isRetry && !req.Commit:
			return bump()
		}
	case PrepareCommit, PrepareAbort:
		if (cur.State == PrepareCommit) == req.Commit {
			return Fail(kerr.ConcurrentTransactions.Code)
		}
	}
	return Fail(kerr.InvalidTxnState.Code)
}

// completed is the Complete* metadata following a Prepare* (Kafka's
// prepareComplete): partitions cleared, the producer id rotated if the
// Prepare reserved a next one.
func completed(prepared Metadata, now int64) Metadata {
	prepared.Partitions = nil // cleared below: not worth a copy
	next := prepared.Clone()
	next.State = CompleteAbort
	if prepared.State == PrepareCommit {
		next.State = CompleteCommit
	}
	if prepared.NextProducerID != NoProducerID {
		next.PrevProducerID, next.ProducerID, next.ProducerEpoch = prepared.ProducerID, prepared.NextProducerID, 0
		next.NextProducerID = NoProducerID
	}
	next.Partitions, next.LastUpdateTimestamp = nil, now
	return next
}

// Complete decides the transition after every marker of txn was written.
// It is a no-op (nil Persist) unless cur is the Prepare* those markers
// belong to, or holds them as its Completing transaction: a late or
// duplicate completion changes nothing.
func Complete(cur *Metadata, pending bool, txn Markers, now int64) Outcome {
	if cur == nil || pending {
		return Outcome{Err: kerr.InvalidTxnState.Code}
	}
	if c := cur.Completing; c != nil && c.ProducerID == txn.ProducerID && c.ProducerEpoch == txn.ProducerEpoch && c.Commit == txn.Commit {
		next := cur.Clone()
		next.Completing = nil
		return Outcome{Persist: &next}
	}
	if !isPrepare(cur.State) || cur.ProducerID != txn.ProducerID ||
		cur.ProducerEpoch != txn.ProducerEpoch || (cur.State == PrepareCommit) != txn.Commit {
		return Outcome{Err: kerr.InvalidTxnState.Code}
	}
	next := completed(*cur, now)
	return Outcome{Persist: &next}
}

// OutstandingMarkers returns the markers cur still needs written: its
// Prepare*'s, or the completing previous transaction's; nil when none.
// Recovery and the operator's retry resend them.
func OutstandingMarkers(cur *Metadata) *Markers {
	if c := cur.Completing; c != nil {
		return &Markers{TransactionalID: cur.TransactionalID, ProducerID: c.ProducerID, ProducerEpoch: c.ProducerEpoch,
			Commit: c.Commit, TransactionVersion: int8(c.TransactionVersion), Partitions: slices.Clone(c.Partitions)}
	}
	if !isPrepare(cur.State) {
		return nil
	}
	return &Markers{TransactionalID: cur.TransactionalID, ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch,
		Commit: cur.State == PrepareCommit, TransactionVersion: int8(cur.ClientTransactionVersion),
		Partitions: slices.Clone(cur.Partitions)}
}

// TimedOut reports whether cur is an Ongoing transaction past its timeout
// that can be aborted now: not while its previous transaction is still
// completing (the abort's markers must not overtake that one's; the next
// scan after it completes aborts it).
func TimedOut(cur *Metadata, now int64) bool {
	return cur.State == Ongoing && cur.Completing == nil && cur.StartTimestamp+int64(cur.TimeoutMs) < now
}

// AbortTimedOut decides the coordinator's abort of a timed-out (or
// operator-aborted) Ongoing transaction.
func AbortTimedOut(cur *Metadata, pending bool, now int64, serverTV int16, pids PIDSource) Outcome {
	if cur == nil || pending || cur.State != Ongoing {
		return Outcome{Err: kerr.InvalidTxnState.Code}
	}
	if cur.Completing != nil {
		// Its abort markers must not overtake the previous
		// transaction's: try again once that one is complete.
		return Outcome{Err: kerr.ConcurrentTransactions.Code}
	}
	return abortByCoordinator(cur, now, serverTV, pids)
}

// Expired reports whether an idle transactional id may be removed: only
// Empty and Complete* expire (Kafka's rule), after idleMs without update.
func Expired(cur *Metadata, pending bool, now, idleMs int64) bool {
	return !pending && isCompleteOrEmpty(cur.State) && cur.LastUpdateTimestamp+idleMs <= now
}
