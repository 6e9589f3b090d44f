package leaderstub

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/txncoord/txncoord/internal/applytest"
)

// TestApplyRecordsMatchesOneByOne checks that ApplyRecords, which writes a
// producer's entry only at the last change of the batch touching it,
// leaves the buckets as applying the same records one by one with
// ApplyRecord does: entries of the same and of other producers and
// partitions, expiries in between, batches and log starts, a dropped
// topic among them.
func TestApplyRecordsMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	offset := int64(0)
	for range 200 {
		var raws [][]byte
		for range 1 + rng.IntN(10) {
			if rng.IntN(12) == 0 {
				raws = append(raws, append([]byte{dropTopicVersion}, "t1"...))
				continue
			}
			o := &persistOp{key: partitionKey(fmt.Sprintf("t%d", rng.IntN(2)), int32(rng.IntN(2)))}
			if rng.IntN(2) == 0 {
				o.addBatch(offset, []byte(fmt.Sprintf("batch-%d", offset)))
				offset++
			}
			if rng.IntN(3) != 0 {
				e := emptyEntry(rng.Int64N(3))
				e.Epoch, e.LastTimestamp, e.TxnFirstOffset = int16(rng.IntN(4)), rng.Int64N(1000), rng.Int64N(5)-1
				o.entry = &e
			}
			if rng.IntN(4) == 0 {
				o.expired = []int64{rng.Int64N(3)}
			}
			o.logStart = rng.Int64N(3)
			raws = append(raws, o.encode())
		}
		applytest.Same(t, ApplyRecord, ApplyRecords, nil, raws)
	}
}
