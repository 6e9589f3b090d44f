package txnrules

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCheckMarker walks the reference §2 table row by row.
func TestCheckMarker(t *testing.T) {
	open := Producer{Epoch: 5, CoordinatorEpoch: 3, TxnOpen: true}
	closed := Producer{Epoch: 5, CoordinatorEpoch: 3}
	for _, c := range []struct {
		name  string
		p     Producer
		epoch int16
		coord int32
		tv    int8
		want  error
	}{
		{"tv0 below", open, 4, 3, 0, kerr.InvalidProducerEpoch},
		{"tv0 equal open", open, 5, 3, 0, nil},
		{"tv1 above", closed, 6, 3, 1, nil},
		{"tv2 below", closed, 4, 3, 2, kerr.InvalidProducerEpoch},
		{"tv2 equal open", open, 5, 3, 2, kerr.InvalidProducerEpoch},
		{"tv2 equal closed (KAFKA-19999 retry)", closed, 5, 3, 2, nil},
		{"tv2 above open", open, 6, 3, 2, nil},
		{"tv3 strict", open, 5, 3, 3, kerr.InvalidProducerEpoch},
		{"coordinator fenced", open, 6, 2, 2, kerr.TransactionCoordinatorFenced},
		{"epoch before fencing", open, 4, 2, 2, kerr.InvalidProducerEpoch},
		{"unknown producer", None, 0, 0, 2, nil},
		{"negative tv", open, 6, 3, -1, ErrNegativeTV},
	} {
		if got := CheckMarker(c.p, c.epoch, c.coord, c.tv); !errors.Is(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: CheckMarker = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestApply(t *testing.T) {
	p := ApplyTxnWrite(None, 4)
	if p != (Producer{Epoch: 4, CoordinatorEpoch: -1, TxnOpen: true}) {
		t.Fatalf("after write: %+v", p)
	}
	if err := CheckTxnWrite(p, 3); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("older write: %v", err)
	}
	p = ApplyMarker(p, 5, 7)
	if p != (Producer{Epoch: 5, CoordinatorEpoch: 7}) {
		t.Fatalf("after marker: %+v", p)
	}
	// The TV2 retry of the same marker is accepted; the next transaction's
	// marker at the same epoch while a write is open is not.
	if err := CheckMarker(p, 5, 7, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if err := CheckMarker(ApplyTxnWrite(p, 5), 5, 7, 2); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("late marker: %v", err)
	}
}
