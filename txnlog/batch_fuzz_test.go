package txnlog

import (
	"github.com/txncoord/txncoord/txncore"
	"reflect"
	"testing"
)

// FuzzDecodeBatch: a log record of any bytes is refused or decoded, never
// a panic, and whatever decodes encodes back to a record that decodes the
// same (replay reads only checksummed records, but a record written by a
// buggy or newer binary must still be refused cleanly).
func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch(Batch{}))
	f.Add(encodeBatch(Batch{Puts: []TxnMetadata{{TransactionalID: "t", ProducerID: 7, State: Ongoing,
		Partitions: []txncore.TopicPartition{{Topic: "orders", Partition: 3}}}}, Deletes: []string{"gone"}, CoordinatorEpoch: 4, ProducerIDHighWater: 1000}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := decodeBatch(raw)
		if err != nil {
			return
		}
		again, err := decodeBatch(encodeBatch(b))
		if err != nil {
			t.Fatalf("re-encoded batch refused: %v", err)
		}
		if !reflect.DeepEqual(normalize(b), normalize(again)) {
			t.Fatalf("round trip changed the batch:\n%+v\n%+v", b, again)
		}
	})
}

// normalize makes empty and nil slices compare equal.
func normalize(b Batch) Batch {
	if len(b.Puts) == 0 {
		b.Puts = nil
	}
	if len(b.Deletes) == 0 {
		b.Deletes = nil
	}
	for i := range b.Puts {
		if len(b.Puts[i].Partitions) == 0 {
			b.Puts[i].Partitions = nil
		}
		if c := b.Puts[i].Completing; c != nil && len(c.Partitions) == 0 {
			c.Partitions = nil
		}
	}
	return b
}

// decodeBatch decodes a batch record whole: splitBatch, then each put.
func decodeBatch(raw []byte) (Batch, error) {
	var b Batch
	rb, err := splitBatch(raw)
	if err != nil {
		return b, err
	}
	for _, enc := range rb.puts {
		m, err := DecodeTxn(enc)
		if err != nil {
			return b, err
		}
		b.Puts = append(b.Puts, m)
	}
	for _, id := range rb.deletes {
		b.Deletes = append(b.Deletes, string(id))
	}
	b.CoordinatorEpoch, b.ProducerIDHighWater = rb.epoch, rb.highWater
	return b, nil
}
