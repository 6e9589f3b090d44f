package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRunAgainstKfake runs the workload for about a second against kfake in
// this process and checks that the counts agree with each other and with
// what a read_committed consumer sees: every committed transaction's K·P
// records, and none of the aborted ones.
func TestRunAgainstKfake(t *testing.T) {
	const brokers, partitions = 3, 6
	c, err := NewKfake(KfakeOptions{Brokers: brokers, Topic: "bench", Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	w := DefaultWorkload()
	w.Producers, w.RecordsPerTxn, w.Partitions, w.AbortRatio, w.Duration = 4, 2, 2, 0.25, time.Second
	var starts, ends int
	var progress atomic.Int64
	res, err := Run(ctx, c.ListenAddrs(), w, Hooks{
		WindowStart: func() { starts++ },
		WindowEnd:   func() { ends++ },
		Progress:    &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if starts != 1 || ends != 1 {
		t.Fatalf("window hooks ran %d/%d times, want 1/1", starts, ends)
	}
	if res.Committed == 0 {
		t.Fatal("no transaction committed")
	}
	if res.Aborted == 0 {
		t.Errorf("abort ratio 0.25 over %d transactions aborted none", res.Committed)
	}
	if res.Failed != 0 {
		t.Errorf("%d transactions failed: %v", res.Failed, res.Errors)
	}
	if want := res.Committed * int64(w.RecordsPerTxn*w.Partitions); res.Records != want {
		t.Errorf("records = %d, want committed·K·P = %d", res.Records, want)
	}
	if got := progress.Load(); got != res.Committed+res.Aborted {
		t.Errorf("progress counted %d transactions, result %d+%d", got, res.Committed, res.Aborted)
	}
	if res.Commit.TotalCount() != res.Committed || res.EndTxn.TotalCount() != res.Committed {
		t.Errorf("histograms hold %d/%d values, want %d each", res.Commit.TotalCount(), res.EndTxn.TotalCount(), res.Committed)
	}
	if res.Commit.ValueAtQuantile(50) < res.EndTxn.ValueAtQuantile(50) {
		t.Errorf("commit p50 %dµs below EndTxn p50 %dµs: EndTxn is part of the commit", res.Commit.ValueAtQuantile(50), res.EndTxn.ValueAtQuantile(50))
	}

	// Each producer also committed one warm-up transaction before the window.
	want := (res.Committed + int64(w.Producers)) * int64(w.RecordsPerTxn*w.Partitions)
	if got := countCommitted(ctx, t, c.ListenAddrs(), "bench", partitions); got != want {
		t.Errorf("read_committed sees %d records, want %d ((committed + warm-up) · K · P)", got, want)
	}
}

func TestRunCount(t *testing.T) {
	c, err := NewKfake(KfakeOptions{Brokers: 3, Topic: "bench", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := DefaultWorkload()
	w.Producers, w.Count = 3, 50
	res, err := Run(context.Background(), c.ListenAddrs(), w, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 50 {
		t.Errorf("committed %d, want exactly --count 50", res.Committed)
	}
}

func TestRunRejectsBadWorkload(t *testing.T) {
	w := DefaultWorkload()
	w.AbortRatio = 2
	if _, err := Run(context.Background(), []string{"127.0.0.1:1"}, w, Hooks{}); err == nil {
		t.Fatal("abort ratio 2 accepted")
	}
}

// countCommitted counts the data records a read_committed consumer sees in
// every partition. To know where the end is without waiting on a clock, it
// first appends a non-transactional sentinel to each partition (no
// transaction is open any more, so the sentinel is stable at once) and reads
// until it has seen every sentinel.
func countCommitted(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32) int64 {
	t.Helper()
	sentinel := []byte("sentinel")
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := range partitions {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: sentinel}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range partitions {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var count int64
	seen := map[int32]bool{}
	for len(seen) < int(partitions) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading committed records: %v (counted %d)", err, count)
		}
		fetches.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == string(sentinel) {
				seen[r.Partition] = true
			} else {
				count++
			}
		})
	}
	return count
}

// A target that dies during the window does not hold Run: transactions
// still in flight Workload.StuckAfter after the window closed end it with
// an error (kgo retries a produce to a dead broker without end). A
// transaction whose EndTxn gives up on the dead broker before the window
// closes ends instead as a failed transaction, and the window then closes
// with nothing in flight: the death shows as failures, not as an error.
func TestRunEndsWhenTargetDies(t *testing.T) {
	c, err := NewKfake(KfakeOptions{Brokers: 3, Topic: "bench", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := DefaultWorkload()
	w.Producers, w.Duration, w.StuckAfter = 2, 2*time.Second, time.Second
	start := time.Now()
	res, err := Run(ctx, c.ListenAddrs(), w, Hooks{WindowStart: func() {
		time.AfterFunc(300*time.Millisecond, func() { c.Close() })
		closed = true
	}})
	if err == nil && (res == nil || res.Failed == 0) {
		t.Fatal("Run reported neither an error nor a failed transaction after its target died")
	}
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when the test's context ended (%v): %v", time.Since(start), err)
	}
	failed := int64(0)
	if res != nil {
		failed = res.Failed
	}
	t.Logf("Run ended after %v: %v (%d failed transactions)", time.Since(start).Round(time.Millisecond), err, failed)
}

// A target that takes produce requests and never answers them fails the
// warm-up after Workload.StuckAfter instead of holding Run.
func TestRunWarmUpBounded(t *testing.T) {
	c, err := NewKfake(KfakeOptions{Brokers: 3, Topic: "bench", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	never := make(chan struct{})
	defer c.Close()
	defer close(never) // before Close: the held handlers return
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		<-never
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := DefaultWorkload()
	w.Producers, w.Duration, w.StuckAfter = 2, time.Second, time.Second
	start := time.Now()
	_, err = Run(ctx, c.ListenAddrs(), w, Hooks{WindowStart: func() { t.Error("the window started without a warm-up") }})
	if err == nil || !strings.Contains(err.Error(), "warm-up") {
		t.Fatalf("Run against a target that never answers a produce: %v, want a warm-up error", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when the test's context ended (%v): %v", time.Since(start), err)
	}
}
