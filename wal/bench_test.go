package wal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txncoord/txncoord/wal"
)

// BenchmarkAppendSync: appenders each Append one record and wait until it
// is durable, on the real disk (b.TempDir), fdatasync included. Reports
// appends/s, the latency of Append+WaitDurable (p50, p99) and how many
// records one fdatasync carried.
func BenchmarkAppendSync(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
		for _, appenders := range []int{1, 16} {
			b.Run(fmt.Sprintf("size=%dKiB/appenders=%d", size>>10, appenders), func(b *testing.B) {
				l, err := wal.Open(b.TempDir(), wal.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				rec := make([]byte, size)
				latencies := make([][]time.Duration, appenders)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.SetBytes(int64(size))
				b.ResetTimer()
				start := time.Now()
				for a := range appenders {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							began := time.Now()
							p, err := l.Append(rec)
							if err == nil {
								err = l.WaitDurable(context.Background(), p)
							}
							if err != nil {
								b.Error(err)
								return
							}
							latencies[a] = append(latencies[a], time.Since(began))
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				all := slices.Sorted(slices.Values(slices.Concat(latencies...)))
				quantile := func(q float64) float64 {
					return float64(all[int(q*float64(len(all)-1))].Microseconds())
				}
				st := l.Stats()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
				b.ReportMetric(quantile(0.50), "p50-us")
				b.ReportMetric(quantile(0.99), "p99-us")
				b.ReportMetric(float64(st.Records)/float64(max(st.Syncs, 1)), "records/sync")
			})
		}
	}
}
