package txnlog

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/txncoord/txncoord/internal/applytest"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/txncore"
)

// TestApplyRecordsMatchesOneByOne checks that ApplyRecords, which writes
// each transactional id's last state once, leaves the buckets as applying
// the same records one by one with ApplyRecord does: puts and deletes of
// the same ids mixed within and across records, epochs and high-water
// marks going up and down, on top of a stored state.
func TestApplyRecordsMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	stored := func(root storage.Root) error {
		return ApplyRecord(root, encodeBatch(Batch{CoordinatorEpoch: 3, ProducerIDHighWater: 500,
			Puts: []txncore.Metadata{{TransactionalID: "id-0", ProducerID: 7, NextProducerID: -1, LastProducerEpoch: -1}}}))
	}
	for range 200 {
		var raws [][]byte
		for range 1 + rng.IntN(8) {
			var b Batch
			for range rng.IntN(4) {
				b.Puts = append(b.Puts, txncore.Metadata{TransactionalID: fmt.Sprintf("id-%d", rng.IntN(4)),
					ProducerID: rng.Int64N(100), ProducerEpoch: int16(rng.IntN(5)), State: txncore.State(rng.IntN(4)),
					NextProducerID: -1, LastProducerEpoch: -1})
			}
			for range rng.IntN(3) {
				b.Deletes = append(b.Deletes, fmt.Sprintf("id-%d", rng.IntN(4)))
			}
			if rng.IntN(3) == 0 {
				b.CoordinatorEpoch = int32(rng.IntN(10))
			}
			if rng.IntN(3) == 0 {
				b.ProducerIDHighWater = rng.Int64N(1000)
			}
			raws = append(raws, encodeBatch(b))
		}
		applytest.Same(t, ApplyRecord, ApplyRecords, stored, raws)
	}
}
