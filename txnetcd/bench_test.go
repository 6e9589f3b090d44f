package txnetcd

import (
	"sync/atomic"
	"testing"

	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// BenchmarkApply measures fenced writes of transaction records to the
// test's one-member etcd (embedded, fsync on, same process): one
// transition per etcd Txn (sequential, and from 16 or 64 goroutines, as a
// coordinator's concurrent ids write), 100 transitions per Txn, and 64
// writers through PartitionStore, whose group commit puts the writes
// queued during one Txn into the next. It
// reports transitions/s, the number issue 19's performance model needs:
//
//	go test -run '^$' -bench BenchmarkApply -benchtime 3s ./txnetcd/
func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name     string
		perTxn   int
		parallel int  // goroutines per GOMAXPROCS; 0: sequential
		grouped  bool // through PartitionStore's group commit
	}{
		{"one-per-txn", 1, 0, false},
		{"one-per-txn-16-writers", 1, 8, false},
		{"one-per-txn-64-writers", 1, 32, false},
		{"batched-100-per-txn", 100, 0, false},
		{"group-commit-64-writers", 1, 32, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cli := newClient(b)
			l := newLayout(b)
			s := NewStore(cli, Options{Layout: l})
			const p = 17
			fence := acquire(b, cli, l, p, 0)
			ids := idsIn(p, 1000, "bench")
			rec := func(i int) txnlog.TxnMetadata {
				return txnlog.TxnMetadata{TransactionalID: ids[i%len(ids)], ProducerID: int64(i), NextProducerID: -1, PrevProducerID: -1,
					LastProducerEpoch: -1, TimeoutMs: 60000, State: txncore.Ongoing, ClientTransactionVersion: 2,
					Partitions: []txnlog.TopicPartition{{Topic: "orders", Partition: int32(i % 12)}, {Topic: "__consumer_offsets", Partition: 7}}}
			}
			ctx := ctxT(b)
			apply := func(batch txnlog.Batch) error { return s.Apply(ctx, fence, batch) }
			if bc.grouped {
				ps, err := s.Partition(fence)
				if err != nil {
					b.Fatal(err)
				}
				defer ps.Close()
				apply = func(batch txnlog.Batch) error { return ps.Apply(ctx, batch) }
			}
			b.ResetTimer()
			if bc.parallel > 0 {
				b.SetParallelism(bc.parallel)
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(next.Add(1))
						if err := apply(txnlog.Batch{Puts: []txnlog.TxnMetadata{rec(i)}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for i := 0; i < b.N; i++ {
					batch := txnlog.Batch{Puts: make([]txnlog.TxnMetadata, 0, bc.perTxn)}
					for j := range bc.perTxn {
						batch.Puts = append(batch.Puts, rec(i*bc.perTxn+j))
					}
					if err := apply(batch); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
			b.ReportMetric(float64(b.N*bc.perTxn)/b.Elapsed().Seconds(), "transitions/s")
		})
	}
}
