package txnrules

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Producer is what the marker rules read of a producer's state on one
// partition.
type Producer struct {
	// Epoch is the epoch of the producer's last accepted write or marker;
	// -1 when the partition has no state for it.
	Epoch int16
	// CoordinatorEpoch is the coordinator epoch of the last accepted
	// marker; -1 until one was accepted.
	CoordinatorEpoch int32
	// TxnOpen: a transactional write was accepted and no marker has
	// closed its transaction yet.
	TxnOpen bool
}

// None is the state of a producer the partition knows nothing about.
var None = Producer{Epoch: -1, CoordinatorEpoch: -1}

// TVUnknown is Kafka's TransactionVersion.TV_UNKNOWN (-1), which Kafka 4.2
// refuses on a marker append with UNKNOWN_SERVER_ERROR.
const TVUnknown int8 = -1

// ErrNegativeTV marks a marker whose TransactionVersion is negative: the
// caller maps it first (TVUnknown is refused, any other negative TV gets
// the legacy rule, as in Kafka).
var ErrNegativeTV = errors.New("negative transaction version")

// CheckMarker is the marker validation, reference §2 exactly:
//
//	| tv  | marker vs current | txn open | result                      |
//	| 0/1 | <                 | any      | INVALID_PRODUCER_EPOCH (47) |
//	| 0/1 | >=                | any      | accept                      |
//	| >=2 | <                 | any      | 47                          |
//	| >=2 | ==                | yes      | 47                          |
//	| >=2 | ==                | no       | accept (KAFKA-19999 retry)  |
//	| >=2 | >                 | any      | accept                      |
//
// then a stored coordinator epoch above the marker's is
// TRANSACTION_COORDINATOR_FENCED (52). TransactionVersion above 2 gets the
// strict rule (KIP-1228: future versions keep TV2 semantics).
func CheckMarker(p Producer, markerEpoch int16, coordinatorEpoch int32, tv int8) error {
	if tv < 0 {
		return ErrNegativeTV
	}
	if tv >= 2 {
		if markerEpoch < p.Epoch || (markerEpoch == p.Epoch && p.TxnOpen) {
			return kerr.InvalidProducerEpoch
		}
	} else if markerEpoch < p.Epoch {
		return kerr.InvalidProducerEpoch
	}
	if p.CoordinatorEpoch > coordinatorEpoch {
		return kerr.TransactionCoordinatorFenced
	}
	return nil
}

// ApplyMarker returns the state after an accepted marker: both epochs
// stored and the transaction closed. A caller that keeps more per producer
// (a sequence window) resets it when the epoch moved.
func ApplyMarker(p Producer, markerEpoch int16, coordinatorEpoch int32) Producer {
	p.Epoch = markerEpoch
	p.CoordinatorEpoch = coordinatorEpoch
	p.TxnOpen = false
	return p
}

// CheckTxnWrite is the epoch rule of a transactional write (a data batch,
// a transactional offset commit): Kafka's ProducerAppendInfo checks a
// client write with the legacy rule, so an epoch below the current one is
// INVALID_PRODUCER_EPOCH.
func CheckTxnWrite(p Producer, epoch int16) error {
	if epoch < p.Epoch {
		return kerr.InvalidProducerEpoch
	}
	return nil
}

// ApplyTxnWrite returns the state after an accepted transactional write:
// the write's epoch, and an open transaction.
func ApplyTxnWrite(p Producer, epoch int16) Producer {
	p.Epoch = epoch
	p.TxnOpen = true
	return p
}
