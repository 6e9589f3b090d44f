package leaderstub

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cpuTime is the process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCleanVsRead compares the leader's CPU to clean a compacted
// partition of 64 MiB (uncompressed batches of 500 records, 100-byte
// values, 10,000 keys each written ~13 times) with its CPU to read the
// same partition once with Fetch (in-process: no socket writes, so the
// reading side is the cheaper one). The clean's CPU runs until bbolt holds
// its result (the applier's deletes and puts count). It reports both and
// their ratio.
//
//	go test -run '^$' -bench BenchmarkCleanVsRead -benchtime 3x ./leaderstub/
func BenchmarkCleanVsRead(b *testing.B) {
	const (
		total    = 64 << 20
		perBatch = 500
		keys     = 10000
	)
	value := make([]byte, 100)
	for i := range value {
		value[i] = 'v'
	}
	var readCPU, cleanCPU time.Duration
	var logBytes int64
	for range b.N {
		b.StopTimer()
		f := newFixtureWith(b, func(c *Config) { c.NoSync = true })
		ts := f.now.UnixMilli() - 1000
		n := 0
		for size := 0; size < total; {
			kvs := make([]string, perBatch)
			for j := range kvs {
				kvs[j] = fmt.Sprintf("key-%05d=%s", n%keys, value)
				n++
			}
			raw := keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: ts}, kvs...)
			size += len(raw)
			if p := f.produce(raw); p.ErrorCode != 0 {
				b.Fatal(codeName(p.ErrorCode))
			}
		}
		// Let the applier write everything to bbolt, as a partition
		// older than a second is.
		p := f.l.partitions[string(partitionKey("t", 0))]
		waitForB(b, func() bool {
			p.mu.RLock()
			defer p.mu.RUnlock()
			return len(p.unapplied) == 0
		})
		p.mu.RLock()
		logBytes = p.size
		p.mu.RUnlock()
		runtime.GC() // the setup's garbage is not the read's
		b.StartTimer()

		start := cpuTime(b)
		read := int64(0)
		for off := int64(0); ; {
			req := kmsg.NewPtrFetchRequest()
			req.MaxBytes = 8 << 20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes = off, 8<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			fp := f.call(f.l.handleFetch, req, 12).(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if len(fp.RecordBatches) == 0 {
				break
			}
			read += int64(len(fp.RecordBatches))
			for rest := fp.RecordBatches; len(rest) > 0; {
				h, n, err := parseHeader(rest)
				if err != nil {
					b.Fatal(err)
				}
				off = int64(binary.BigEndian.Uint64(rest)) + int64(h.LastOffsetDelta) + 1
				rest = rest[n:]
			}
		}
		readCPU += cpuTime(b) - start
		if read < logBytes {
			b.Fatalf("read %d bytes of %d", read, logBytes)
		}

		f.setConfigs(map[string]string{"cleanup.policy": "compact", "segment.ms": "1"})
		runtime.GC()
		start = cpuTime(b)
		res, err := f.l.CleanLogs()
		if err != nil || res.RecordsRemoved < n-keys-perBatch {
			b.Fatalf("clean: %+v %v, want at least %d records removed", res, err, n-keys-perBatch)
		}
		// The clean is done when bbolt holds it: the applier applies the
		// process log in order, so a batch appended after the clean is
		// applied only after the clean's ops.
		if pr := f.produce(keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: ts}, "after=x")); pr.ErrorCode != 0 {
			b.Fatal(codeName(pr.ErrorCode))
		}
		waitForB(b, func() bool {
			p.mu.RLock()
			defer p.mu.RUnlock()
			return len(p.unapplied) == 0 && len(p.cleaned) == 0
		})
		cleanCPU += cpuTime(b) - start
		b.StopTimer()
		f.l.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(logBytes)/(1<<20), "MiB")
	b.ReportMetric(readCPU.Seconds()/float64(b.N), "read-cpu-s")
	b.ReportMetric(cleanCPU.Seconds()/float64(b.N), "clean-cpu-s")
	b.ReportMetric(cleanCPU.Seconds()/readCPU.Seconds(), "clean/read")
}

func waitForB(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
