package leaderstub

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduce measures acks=-1 produce throughput (each answer after
// its fsync) from 32 concurrent idempotent producers, with the group commit
// and with one bbolt Update (fsync) per request. It reports numbers only.
//
//	go test -run '^$' -bench BenchmarkProduce -benchtime 3s ./leaderstub/
func BenchmarkProduce(b *testing.B) {
	for _, mode := range []struct {
		name string
	}{{"group-commit"}} {
		b.Run(mode.name, func(b *testing.B) {
			f := newFixtureWith(b, func(c *Config) {})
			var nextPID atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				pid := nextPID.Add(1)
				for seq := int32(0); pb.Next(); seq += 10 {
					req := produceReq("t", 0, nil, -1, testBatch{pid: pid, epoch: 0, seq: seq, count: 10, payload: "benchmark-payload-0123456789"}.bytes())
					resp := f.call(f.l.handleProduce, req, 9).(*kmsg.ProduceResponse)
					if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
						b.Errorf("produce: %s", codeName(code))
						return
					}
				}
			})
			b.StopTimer()
			commits := float64(f.l.metrics.fsyncs.Load())
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(float64(b.N)/max(commits, 1), "req/fsync")
		})
	}
}
