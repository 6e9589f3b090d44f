package leaderstub

import (
	"reflect"
	"testing"
)

// FuzzDecodePersistOp: a leader's log record of any bytes is refused or
// decoded, never a panic, and whatever decodes encodes back to a record
// that decodes the same.
func FuzzDecodePersistOp(f *testing.F) {
	e := producerEntry{ProducerID: 7, Epoch: 2, TxnFirstOffset: -1}
	a := abortedTxn{ProducerID: 7, FirstOffset: 10, LastOffset: 12, LastStableOffset: 13}
	f.Add((&persistOp{key: partitionKey("orders", 1)}).encode())
	f.Add((&persistOp{key: partitionKey("orders", 1), batches: []opBatch{{base: 10, raw: []byte("batch")}}, entry: &e, aborted: &a,
		dropped: []int64{1, 2}, droppedAborted: []int64{3}, logStart: 5, expired: []int64{9}}).encode())
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := decodePersistOp(raw)
		if err != nil {
			return
		}
		again, err := decodePersistOp(o.encode())
		if err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if !reflect.DeepEqual(o, again) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", o, again)
		}
	})
}
