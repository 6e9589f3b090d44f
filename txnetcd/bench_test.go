package txnetcd

import (
	"sync"
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
					Partitions: []txncore.TopicPartition{{Topic: "orders", Partition: int32(i % 12)}, {Topic: "__consumer_offsets", Partition: 7}}}
			}
			ctx := ctxT(b)
			apply := func(batch txnlog.Batch) error { return s.Apply(ctx, fence, batch) }
			if bc.grouped {
				ps, err := s.Partition(fence)
				if err != nil {
					b.Fatal(err)
				}
				defer ps.Close()
				apply = func(batch txnlog.Batch) error { return txnlog.Apply(ctx, ps, batch) }
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

// BenchmarkPartitions measures what a coordinator owning many partitions
// asks of etcd: 16 partitions of one Store, 4 writers on each (64 in all,
// each one id's transitions one after another), one transition per Apply.
// It reports applies/s and the etcd Txns/s they took: the member's
// revision delta over the run, since every committed write Txn is one
// revision (and one Raft proposal, which is what etcd's CPU scales with:
// docs/bench/20261201-etcd3.md).
//
//	go test -run '^$' -bench BenchmarkPartitions -benchtime 5s ./txnetcd/
func BenchmarkPartitions(b *testing.B) {
	const partitions, writersPerPartition = 16, 4
	cli := newClient(b)
	l := newLayout(b)
	s := NewStore(cli, Options{Layout: l})
	ctx := ctxT(b)
	stores := make([]*PartitionStore, partitions)
	ids := make([][]string, partitions)
	for i := range stores {
		p := int32(i)
		ps, err := s.Partition(acquire(b, cli, l, p, 0))
		if err != nil {
			b.Fatal(err)
		}
		defer ps.Close()
		stores[i], ids[i] = ps, idsIn(p, writersPerPartition, "bench-parts")
	}
	revision := func() int64 {
		resp, err := cli.Get(ctx, l.PIDNextKey())
		if err != nil {
			b.Fatal(err)
		}
		return resp.Header.Revision
	}
	start := revision()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range partitions * writersPerPartition {
		ps, id := stores[w%partitions], ids[w%partitions][w/partitions]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				m := txnlog.TxnMetadata{TransactionalID: id, ProducerID: i, NextProducerID: -1, PrevProducerID: -1,
					LastProducerEpoch: -1, TimeoutMs: 60000, State: txncore.Ongoing, ClientTransactionVersion: 2,
					Partitions: []txncore.TopicPartition{{Topic: "orders", Partition: int32(i % 12)}, {Topic: "__consumer_offsets", Partition: 7}}}
				if err := txnlog.Apply(ctx, ps, txnlog.Batch{Puts: []txnlog.TxnMetadata{m}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	txns := revision() - start
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	b.ReportMetric(float64(txns)/b.Elapsed().Seconds(), "txns/s")
	b.ReportMetric(float64(b.N)/float64(txns), "applies/txn")
}
