package checker_test

import (
	"fmt"
	"testing"

	"github.com/txncoord/txncoord/integration/checker"
)

// BenchmarkCheckSoak checks a soak-sized history: 100,000 values in
// transactions of 750 over 12 partitions, a third aborted.
func BenchmarkCheckSoak(b *testing.B) {
	var h checker.History
	reads := checker.Reads{}
	offsets := map[checker.Partition]int64{}
	for i := 0; i*750 < 100000; i++ {
		txn := checker.Txn{ID: fmt.Sprint(i), Producer: fmt.Sprint(i % 4), Outcome: checker.Committed}
		if i%3 == 2 {
			txn.Outcome = checker.Aborted
		}
		for j := 0; j < 750 && i*750+j < 100000; j++ {
			p := checker.Partition{Topic: "soak", Partition: int32(j % 12)}
			v := fmt.Sprintf("v-%d", i*750+j)
			txn.Writes = append(txn.Writes, checker.Write{Value: v, Partition: p})
			if txn.Outcome == checker.Committed {
				reads[p] = append(reads[p], checker.Record{Offset: offsets[p], Value: v})
			}
			offsets[p]++
		}
		h.Txns = append(h.Txns, txn)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := checker.Check(h, reads)
		if err != nil || r.Anomalies() != 0 {
			b.Fatal(err, r.Summary())
		}
	}
}
