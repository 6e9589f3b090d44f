package wal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkAppendSyncFilled compares a log appending to its segment files
// with one writing over segments filled with zeros ahead
// (Options.Preallocate), for records of the size the process log carries
// (a transaction's state, a small batch): one appender, each waiting for
// its record to be durable, so that every Append costs one fdatasync.
// Reports the same figures as BenchmarkAppendSync, plus the process's
// system CPU per append (getrusage), where the journal commit an
// appending fdatasync adds shows.
func BenchmarkAppendSyncFilled(b *testing.B) {
	const size = 512
	for _, filled := range []bool{false, true} {
		b.Run(fmt.Sprintf("filled=%v", filled), func(b *testing.B) {
			l, err := wal.Open(b.TempDir(), wal.Options{SegmentSize: 16 << 20, Preallocate: filled})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rec := make([]byte, size)
			appendOne := func() {
				p, err := l.Append(rec)
				if err == nil {
					err = l.WaitDurable(context.Background(), p)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			// Past the point where a log starts filling (1 MiB), then
			// time for the fill, then one more record: the log has
			// rolled into the filled segment (or, unfilled, goes on).
			for range (2 << 20) / size {
				appendOne()
			}
			time.Sleep(500 * time.Millisecond)
			appendOne()
			lat := make([]time.Duration, 0, b.N)
			sys0 := systemCPU()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				began := time.Now()
				appendOne()
				lat = append(lat, time.Since(began))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
			b.ReportMetric(float64((systemCPU()-sys0).Microseconds())/float64(b.N), "sys-us/append")
		})
	}
}

// systemCPU is the process's system CPU time so far.
func systemCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Stime.Nano())
}
