package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Workload is one measured window of transactional producers.
type Workload struct {
	Producers     int           // concurrent transactional producers, one kgo client each
	RecordsPerTxn int           // K: records to each partition per transaction
	Partitions    int           // P: partitions per transaction, on different leaders when possible
	AbortRatio    float64       // share of transactions ended with TryAbort, 0..1
	Duration      time.Duration // window length; ignored when Count > 0
	Count         int64         // total transactions (committed + aborted) across producers; 0 = use Duration
	Topic         string
	ValueBytes    int
	// TxnIDPrefix makes transactional ids unique per run, so a target that
	// keeps state never fences a producer of an earlier window.
	TxnIDPrefix string
	// StuckAfter bounds the warm-up, and how long a timed window's
	// transactions in flight may still take once it closes
	// (DefaultStuckAfter when 0): a target that stopped answering
	// (crashed) would otherwise hold Run for ever, as kgo retries a
	// produce without end. Run then fails. A Count run has no window end,
	// so only its warm-up is bounded.
	StuckAfter time.Duration
}

// DefaultStuckAfter is Workload.StuckAfter's default: far above any
// transaction's latency on a live target.
const DefaultStuckAfter = 30 * time.Second

// DefaultWorkload is the standard shape: one record to each of two
// partitions per transaction, committed, for 10 s.
func DefaultWorkload() Workload {
	return Workload{Producers: 1, RecordsPerTxn: 1, Partitions: 2, Duration: 10 * time.Second,
		Topic: "bench", ValueBytes: 100, TxnIDPrefix: "bench"}
}

func (w Workload) validate() error {
	switch {
	case w.Producers < 1:
		return errors.New("producers must be >= 1")
	case w.RecordsPerTxn < 1:
		return errors.New("records per transaction must be >= 1")
	case w.Partitions < 1:
		return errors.New("partitions per transaction must be >= 1")
	case w.AbortRatio < 0 || w.AbortRatio > 1:
		return errors.New("abort ratio must be within 0..1")
	case w.Count <= 0 && w.Duration <= 0:
		return errors.New("need a duration or a count")
	case w.Topic == "":
		return errors.New("topic must be set")
	}
	return nil
}

// Hooks let the caller sample the server exactly at the edges of the measured
// window (after every producer's warm-up transaction, before the first
// measured one; and after the last one).
type Hooks struct {
	WindowStart func()
	WindowEnd   func()
	// Progress, if set, is incremented once per finished transaction.
	Progress *atomic.Int64
}

// Result is what one window measured on the client side. Latencies are in
// microseconds.
type Result struct {
	Producers int
	Committed int64 // transactions whose EndTransaction(TryCommit) succeeded
	Aborted   int64 // transactions ended on purpose with TryAbort
	Failed    int64 // transactions that hit an error (then aborted)
	Records   int64 // records in committed transactions
	Elapsed   time.Duration
	EndTxn    *hdrhistogram.Histogram // EndTransaction(TryCommit) call, µs
	Commit    *hdrhistogram.Histogram // BeginTransaction → EndTransaction returns, µs
	Errors    []string                // first few distinct errors, for the report
}

// TxnPerSec is committed transactions per second of the window.
func (r *Result) TxnPerSec() float64 { return perSec(r.Committed, r.Elapsed) }

// RecordsPerSec is records of committed transactions per second.
func (r *Result) RecordsPerSec() float64 { return perSec(r.Records, r.Elapsed) }

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// newLatencyHistogram tracks 1 µs .. 10 min with 3 significant digits.
func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
}

// maxConsecutiveFailures stops a producer that can make no progress (fenced,
// target gone) instead of spinning for the whole window.
const maxConsecutiveFailures = 50

// Run drives w against the cluster at seeds. Every producer first completes
// one committed warm-up transaction (InitProducerId, metadata, connections),
// then all start the measured window together.
func Run(ctx context.Context, seeds []string, w Workload, hooks Hooks) (*Result, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	groups, err := partitionGroups(ctx, seeds, w.Topic, w.Producers, w.Partitions)
	if err != nil {
		return nil, err
	}
	producers := make([]*producer, w.Producers)
	var closeOnce sync.Once
	closeAll := func() {
		closeOnce.Do(func() {
			for _, p := range producers {
				if p != nil {
					p.client.Close()
				}
			}
		})
	}
	defer closeAll()
	for i := range producers {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...),
			kgo.TransactionalID(fmt.Sprintf("%s-%d", w.TxnIDPrefix, i)),
			kgo.DefaultProduceTopic(w.Topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			// A transaction waits on its own produce; lingering would only
			// add latency (kgo's default is 10 ms).
			kgo.ProducerLinger(0),
		)
		if err != nil {
			return nil, fmt.Errorf("producer %d: %w", i, err)
		}
		producers[i] = &producer{w: &w, client: cl, partitions: groups[i],
			value: make([]byte, w.ValueBytes), endTxn: newLatencyHistogram(), commit: newLatencyHistogram(),
			rng: rand.New(rand.NewPCG(uint64(i), 0x62656e6368))}
	}

	// Warm-up, concurrently: the first transaction of each producer pays for
	// InitProducerId and connection setup, which is not what we measure.
	// Bounded as the window is (below): a target that never answers
	// fails the warm-up instead of holding it.
	stuckAfter := cmp.Or(w.StuckAfter, DefaultStuckAfter)
	var warmStuck atomic.Bool
	stuckWarm := time.AfterFunc(stuckAfter, func() {
		warmStuck.Store(true)
		closeAll()
	})
	err = forEach(producers, func(p *producer) error { return p.warmUp(ctx) })
	stuckWarm.Stop()
	if warmStuck.Load() {
		return nil, errors.Join(fmt.Errorf("warm-up: not done after %v: the target is not answering", stuckAfter), err)
	}
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	var tickets atomic.Int64 // remaining transactions when w.Count > 0
	tickets.Store(w.Count)
	var deadline time.Time
	if hooks.WindowStart != nil {
		hooks.WindowStart()
	}
	start := time.Now()
	if w.Count <= 0 {
		deadline = start.Add(w.Duration)
	}
	more := func() bool {
		if ctx.Err() != nil {
			return false
		}
		if w.Count > 0 {
			return tickets.Add(-1) >= 0
		}
		return time.Now().Before(deadline)
	}
	// A produce to a dead target is retried without end, and neither
	// ProduceSync's ctx nor a record timeout takes back a record sent:
	// closing the client does (ErrClientClosed).
	windowCtx, cancelWindow := context.WithCancel(ctx)
	defer cancelWindow()
	var windowStuck atomic.Bool
	if w.Count <= 0 {
		stuck := time.AfterFunc(w.Duration+stuckAfter, func() {
			windowStuck.Store(true)
			cancelWindow()
			closeAll()
		})
		defer stuck.Stop()
	}
	runErr := forEach(producers, func(p *producer) error { return p.loop(windowCtx, more, hooks.Progress) })
	elapsed := time.Since(start)
	if windowStuck.Load() {
		runErr = errors.Join(runErr, fmt.Errorf("transactions still in flight %v after the window closed: the target stopped answering", stuckAfter))
	}
	if hooks.WindowEnd != nil {
		hooks.WindowEnd()
	}

	res := &Result{Producers: w.Producers, Elapsed: elapsed, EndTxn: newLatencyHistogram(), Commit: newLatencyHistogram()}
	seen := map[string]bool{}
	for _, p := range producers {
		res.Committed += p.committed
		res.Aborted += p.aborted
		res.Failed += p.failed
		res.EndTxn.Merge(p.endTxn)
		res.Commit.Merge(p.commit)
		for _, e := range p.errs {
			if !seen[e] && len(res.Errors) < 5 {
				seen[e] = true
				res.Errors = append(res.Errors, e)
			}
		}
	}
	res.Records = res.Committed * int64(w.RecordsPerTxn*len(producers[0].partitions))
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	return res, runErr
}

// forEach runs fn for every producer on its own goroutine and waits for all;
// it returns the first error.
func forEach(producers []*producer, fn func(*producer) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(producers))
	for i, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// producer is one transactional client; only its own goroutine touches it
// between Run's setup and Run's merge.
type producer struct {
	w          *Workload
	client     *kgo.Client
	partitions []int32
	value      []byte
	rng        *rand.Rand

	committed, aborted, failed int64
	endTxn, commit             *hdrhistogram.Histogram
	errs                       []string
}

func (p *producer) records() []*kgo.Record {
	recs := make([]*kgo.Record, 0, len(p.partitions)*p.w.RecordsPerTxn)
	for _, part := range p.partitions {
		for range p.w.RecordsPerTxn {
			recs = append(recs, &kgo.Record{Partition: part, Value: p.value})
		}
	}
	return recs
}

func (p *producer) warmUp(ctx context.Context) error {
	if err := p.client.BeginTransaction(); err != nil {
		return err
	}
	if err := p.client.ProduceSync(ctx, p.records()...).FirstErr(); err != nil {
		_ = p.client.EndTransaction(ctx, kgo.TryAbort)
		return err
	}
	return p.client.EndTransaction(ctx, kgo.TryCommit)
}

func (p *producer) loop(ctx context.Context, more func() bool, progress *atomic.Int64) error {
	failures := 0
	for more() {
		if err := p.one(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // the window was cancelled, not a target failure
			}
			p.failed++
			if len(p.errs) < 3 {
				p.errs = append(p.errs, err.Error())
			}
			if failures++; failures >= maxConsecutiveFailures {
				return fmt.Errorf("%d transactions in a row failed, last: %w", failures, err)
			}
		} else {
			failures = 0
		}
		if progress != nil {
			progress.Add(1)
		}
	}
	return nil
}

// one runs a single transaction and records its latencies.
func (p *producer) one(ctx context.Context) error {
	abort := p.w.AbortRatio > 0 && p.rng.Float64() < p.w.AbortRatio
	begin := time.Now()
	if err := p.client.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := p.client.ProduceSync(ctx, p.records()...).FirstErr(); err != nil {
		// kgo stays in the transaction after an error: abort it so the next
		// Begin can start (reference/clients.md §1).
		_ = p.client.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce: %w", err)
	}
	commit := kgo.TryCommit
	if abort {
		commit = kgo.TryAbort
	}
	endStart := time.Now()
	if err := p.client.EndTransaction(ctx, commit); err != nil {
		_ = p.client.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("end transaction: %w", err)
	}
	done := time.Now()
	if abort {
		p.aborted++
		return nil
	}
	p.committed++
	recordLatency(p.endTxn, done.Sub(endStart))
	recordLatency(p.commit, done.Sub(begin))
	return nil
}

// recordLatency clamps into the histogram's range, so an outlier is counted
// at the edge rather than lost.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(1, d.Microseconds()), h.HighestTrackableValue()))
}
