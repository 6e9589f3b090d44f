package leaderstub

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/txnrules"
)

// Producer state per (partition, producer id), after Kafka's
// ProducerStateEntry / ProducerAppendInfo. The functions here are pure: they
// take an entry and return the entry to store, or a Kafka error and no
// change, so that a rejected batch or marker changes no state.

// dedupWindow is how many recent batches per producer are remembered for
// duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN, the client's
// max.in.flight of 5).
const dedupWindow = 5

// batchMeta is one remembered batch of a producer.
type batchMeta struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64
	LastOffset        int64
	Timestamp         int64
}

// producerEntry is a producer's state on one partition.
type producerEntry struct {
	ProducerID       int64
	Epoch            int16 // -1: no state (ProducerStateEntry.empty)
	CoordinatorEpoch int32 // -1 until a marker was accepted
	LastTimestamp    int64
	// TxnFirstOffset is the first offset of the open transaction, -1 when
	// none is open.
	TxnFirstOffset int64
	Batches        []batchMeta // newest last, at most dedupWindow
}

func emptyEntry(pid int64) producerEntry {
	return producerEntry{ProducerID: pid, Epoch: -1, CoordinatorEpoch: -1, LastTimestamp: -1, TxnFirstOffset: -1}
}

func (e producerEntry) txnOpen() bool { return e.TxnFirstOffset >= 0 }

func (e producerEntry) lastSeq() int32 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// findDuplicate returns the remembered batch a retried batch duplicates.
func (e producerEntry) findDuplicate(h batchHeader) (batchMeta, bool) {
	if h.ProducerEpoch != e.Epoch {
		return batchMeta{}, false
	}
	for _, b := range e.Batches {
		if b.FirstSeq == h.BaseSequence && b.LastSeq == h.lastSequence() {
			return b, true
		}
	}
	return batchMeta{}, false
}

func inSequence(lastSeq, nextSeq int32) bool {
	return nextSeq == lastSeq+1 || (nextSeq == 0 && lastSeq == 1<<31-1)
}

// checkDataBatch validates an idempotent or transactional data batch
// against the entry (Kafka's ProducerAppendInfo.append for CLIENT origin):
//   - data batches use the legacy epoch rule: an epoch below the current
//     one is INVALID_PRODUCER_EPOCH;
//   - a new epoch must start at sequence 0 unless the producer has no
//     state at all; the same epoch must continue the sequence, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - a non-transactional batch while a transaction is open is
//     INVALID_TXN_STATE.
//
// freshTV2 is set when the leader just registered the partition for a TV2
// (Produce v12+) producer with no state here: Kafka then requires seq 0.
//
// The produce path holds a batch back while awaitsPreviousMarker holds and
// calls checkDataBatch once the marker was applied; called directly on such
// a batch it would accept it into the open transaction, as Kafka does.
func checkDataBatch(e producerEntry, h batchHeader, freshTV2 bool) error {
	if h.ProducerEpoch < e.Epoch {
		return kerr.InvalidProducerEpoch
	}
	if h.BaseSequence < 0 {
		return invalidRecord("idempotent batch without a base sequence")
	}
	if freshTV2 && h.BaseSequence != 0 && len(e.Batches) == 0 {
		return kerr.OutOfOrderSequenceNumber
	}
	if h.ProducerEpoch != e.Epoch {
		if h.BaseSequence != 0 && e.Epoch != -1 {
			return kerr.OutOfOrderSequenceNumber
		}
	} else if !inSequence(e.lastSeq(), h.BaseSequence) {
		return kerr.OutOfOrderSequenceNumber
	}
	if !h.transactional() && e.txnOpen() {
		return kerr.InvalidTxnState
	}
	return nil
}

// awaitsPreviousMarker reports whether a data batch must be held back
// before it is validated: it is transactional, its epoch is above the
// entry's, and the entry still has an open transaction, opened at that
// lower epoch, whose COMMIT/ABORT marker has not been applied here yet.
//
// Kafka's ProducerAppendInfo would let the batch join that transaction and
// move the entry to the batch's epoch. With TV2 the coordinator bumps the
// epoch at every EndTxn and writes the markers at the bumped epoch, the
// epoch of the next transaction's data: once that data had joined, the
// strict TV2 rule (marker epoch must be above the entry's) would refuse
// the marker with INVALID_PRODUCER_EPOCH, the previous transaction would
// hang, and the new data would be committed or aborted with it. Kafka's
// coordinator never lets the next transaction register a partition before
// the previous markers are written; txncoord's does, so the leader orders
// the two: the batch waits for the marker (00_produce.go). Same-epoch,
// lower-epoch, first and non-transactional batches are not held back.
func awaitsPreviousMarker(e producerEntry, h batchHeader) bool {
	return h.transactional() && e.txnOpen() && h.ProducerEpoch > e.Epoch
}

// appendDataBatch returns the entry after appending a validated batch at
// [base, last].
func appendDataBatch(e producerEntry, h batchHeader, base, last int64) producerEntry {
	if h.ProducerEpoch != e.Epoch {
		e.Epoch = h.ProducerEpoch
		e.Batches = nil
	}
	e.Batches = append(append([]batchMeta(nil), e.Batches...), batchMeta{
		FirstSeq: h.BaseSequence, LastSeq: h.lastSequence(), BaseOffset: base, LastOffset: last, Timestamp: h.MaxTimestamp,
	})
	if len(e.Batches) > dedupWindow {
		e.Batches = e.Batches[len(e.Batches)-dedupWindow:]
	}
	e.LastTimestamp = h.MaxTimestamp
	if h.transactional() && !e.txnOpen() {
		e.TxnFirstOffset = base
	}
	return e
}

// errNegativeTV marks a marker whose TransactionVersion is negative.
var errNegativeTV = txnrules.ErrNegativeTV

// rules is what the shared marker rules (package txnrules) read of the
// entry.
func (e producerEntry) rules() txnrules.Producer {
	return txnrules.Producer{Epoch: e.Epoch, CoordinatorEpoch: e.CoordinatorEpoch, TxnOpen: e.txnOpen()}
}

// checkMarker is the leader's marker validation: txnrules.CheckMarker, the
// one implementation the group coordinator's __consumer_offsets partitions
// apply too (reference §2 table, KAFKA-19999 retry, coordinator-epoch
// fencing). The caller maps a negative TV first (27_write_txn_markers.go:
// -1 is answered UNKNOWN_SERVER_ERROR, any other gets the legacy rule, as
// in Kafka); one that reaches here anyway is errNegativeTV.
func checkMarker(e producerEntry, markerEpoch int16, coordinatorEpoch int32, tv int8) error {
	return txnrules.CheckMarker(e.rules(), markerEpoch, coordinatorEpoch, tv)
}

// applyMarker returns the entry after an accepted marker
// (txnrules.ApplyMarker: both epochs stored, the transaction closed), with
// the sequence window cleared when the epoch moved (the next batch must
// start at sequence 0).
func applyMarker(e producerEntry, markerEpoch int16, coordinatorEpoch int32, nowMillis int64) producerEntry {
	next := txnrules.ApplyMarker(e.rules(), markerEpoch, coordinatorEpoch)
	if next.Epoch != e.Epoch {
		e.Batches = nil
	}
	e.Epoch, e.CoordinatorEpoch = next.Epoch, next.CoordinatorEpoch
	e.LastTimestamp = nowMillis
	if !next.TxnOpen {
		e.TxnFirstOffset = -1
	}
	return e
}

// Entry encoding in bbolt: fixed fields, then the batch window.
func (e producerEntry) marshal() []byte {
	return e.appendTo(make([]byte, 0, e.size()))
}

// size is the length of the entry's record (marshal).
func (e producerEntry) size() int { return 33 + len(e.Batches)*32 }

// appendTo appends the entry's record (marshal) to b.
func (e producerEntry) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, 1) // record version
	b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(e.LastTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(e.TxnFirstOffset))
	b = append(b, byte(len(e.Batches)))
	for _, m := range e.Batches {
		b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
		b = binary.BigEndian.AppendUint32(b, uint32(m.LastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(m.BaseOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(m.Timestamp))
	}
	return b
}

func unmarshalEntry(b []byte) (producerEntry, error) {
	if err := checkEntry(b); err != nil {
		return producerEntry{}, err
	}
	e := producerEntry{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		Epoch:            int16(binary.BigEndian.Uint16(b[10:])),
		CoordinatorEpoch: int32(binary.BigEndian.Uint32(b[12:])),
		LastTimestamp:    int64(binary.BigEndian.Uint64(b[16:])),
		TxnFirstOffset:   int64(binary.BigEndian.Uint64(b[24:])),
	}
	n := int(b[32])
	rest := b[33:]
	for i := 0; i < n; i++ {
		r := rest[i*32:]
		e.Batches = append(e.Batches, batchMeta{
			FirstSeq:   int32(binary.BigEndian.Uint32(r)),
			LastSeq:    int32(binary.BigEndian.Uint32(r[4:])),
			BaseOffset: int64(binary.BigEndian.Uint64(r[8:])),
			LastOffset: int64(binary.BigEndian.Uint64(r[16:])),
			Timestamp:  int64(binary.BigEndian.Uint64(r[24:])),
		})
	}
	return e, nil
}

// checkEntry checks an entry's record (marshal) as unmarshalEntry reads
// it, without building the entry.
func checkEntry(b []byte) error {
	if len(b) < 33 || binary.BigEndian.Uint16(b) != 1 {
		return errors.New("leaderstub: bad producer entry record")
	}
	if len(b[33:]) != int(b[32])*32 {
		return errors.New("leaderstub: bad producer entry batch window")
	}
	return nil
}

// entryProducerID is the producer id of an entry's record that checkEntry
// accepted.
func entryProducerID(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[2:])) }
