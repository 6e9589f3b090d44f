package leaderstub

import (
	"context"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// loggedRecord is one data record read back from the leader.
type loggedRecord struct {
	offset     int64
	key, value string
}

// fetchKeyed reads the whole partition t/0 (read_uncommitted) over the
// wire, checking each batch's CRC and that its records lie within its
// offsets, and returns its data records in offset order.
func fetchKeyed(t *testing.T, cl *wire.Client) []loggedRecord {
	t.Helper()
	var out []loggedRecord
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		part := do[*kmsg.FetchResponse](t, cl, req, 11).Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			t.Fatalf("fetch at %d: %s", offset, codeName(part.ErrorCode))
		}
		if len(part.RecordBatches) == 0 {
			return out
		}
		for _, b := range decodeBatches(t, part.RecordBatches) {
			raw := b.AppendTo(nil)
			if want, got := uint32(b.CRC), crc32.Checksum(raw[offAttributes:], crc32c); want != got {
				t.Fatalf("batch at %d: CRC %08x, computed %08x", b.FirstOffset, want, got)
			}
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			if b.Attributes&attrControl == 0 {
				if err := eachRecord(raw, func(off int64, key []byte, _ bool, enc []byte) {
					var r kmsg.Record
					if err := r.ReadFrom(enc); err != nil {
						t.Fatal(err)
					}
					if off < b.FirstOffset || off > last || (len(out) > 0 && off <= out[len(out)-1].offset) {
						t.Fatalf("record at %d in batch %d-%d after %d", off, b.FirstOffset, last, out[len(out)-1].offset)
					}
					out = append(out, loggedRecord{offset: off, key: string(key), value: string(r.Value)})
				}); err != nil {
					t.Fatal(err)
				}
			}
			offset = last + 1
		}
	}
}

// TestCrashDuringCleaning: two writers overwrite 20 keys of a compacted
// partition whose leader process cleans it every 2 ms; the process is
// SIGKILLed mid-stream. After a restart every batch is whole (valid CRC),
// every record read is at the offset it was acknowledged with, and every
// acknowledged record is either there or superseded by a later record of
// its key: no clean cut short lost a record that had to remain. The
// restarted cleaner then shrinks the log to about one record per key
// with the same guarantees.
func TestCrashDuringCleaning(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	child := startChild(t, addr, dir, "TXNCOORD_TEST_COMPACT=1")
	defer func() { child.kill() }()

	const writers, keys, perBatch = 2, 20, 5
	var mu sync.Mutex
	acked := map[int64]loggedRecord{}
	total := 0
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := wire.Dial(context.Background(), addr, "crash")
			if err != nil {
				return
			}
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var kvs []string
				for j := range perBatch {
					kvs = append(kvs, fmt.Sprintf("k%02d=w%d-%d-%d", (i*perBatch+j+w*7)%keys, w, i, j))
				}
				req := produceReq("t", 0, nil, -1, keyedBatch(testBatch{pid: -1, epoch: -1, seq: -1, ts: time.Now().UnixMilli()}, kvs...))
				req.SetVersion(9)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				raw, err := cl.Do(ctx, req)
				cancel()
				if err != nil {
					return // the leader died
				}
				rp := raw.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
				if rp.ErrorCode != 0 {
					t.Errorf("writer %d batch %d: %s", w, i, codeName(rp.ErrorCode))
					return
				}
				mu.Lock()
				for j, kv := range kvs {
					k, v := kv[:3], kv[4:]
					acked[rp.BaseOffset+int64(j)] = loggedRecord{offset: rp.BaseOffset + int64(j), key: k, value: v}
				}
				total++
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "400 acknowledged writes", func() bool { mu.Lock(); defer mu.Unlock(); return total >= 400 })
	child.kill()
	close(stop)
	wg.Wait()

	check := func(when string) []loggedRecord {
		t.Helper()
		cl, err := wire.Dial(context.Background(), addr, "crash")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		log := fetchKeyed(t, cl)
		lastOf := map[string]int64{}
		for _, r := range log {
			if a, ok := acked[r.offset]; ok && (a.key != r.key || a.value != r.value) {
				t.Fatalf("%s: offset %d holds %s=%s, acknowledged as %s=%s", when, r.offset, r.key, r.value, a.key, a.value)
			}
			lastOf[r.key] = r.offset
		}
		present := map[int64]bool{}
		for _, r := range log {
			present[r.offset] = true
		}
		for off, a := range acked {
			if !present[off] && lastOf[a.key] <= off {
				t.Fatalf("%s: acknowledged %s=%s at %d is gone and no later record of %s remains (last at %d)",
					when, a.key, a.value, off, a.key, lastOf[a.key])
			}
		}
		return log
	}
	child = startChild(t, addr, dir, "TXNCOORD_TEST_COMPACT=1")
	log := check("after the restart")
	t.Logf("%d records acknowledged, %d in the log after the restart", len(acked), len(log))
	waitFor(t, "the restarted cleaner to shrink the log", func() bool {
		cl, err := wire.Dial(context.Background(), addr, "crash")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return len(fetchKeyed(t, cl)) <= keys+perBatch
	})
	check("after the restarted cleaner")
}
