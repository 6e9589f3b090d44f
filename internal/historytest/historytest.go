package historytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/checker"
)

// Committer is a transactional producer committing (and every second time
// aborting) in a loop, as an application would through a node's kill:
// a transaction whose produce fails was never asked to commit (aborted by
// the next client's InitProducerId); one whose commit fails is unknown.
// After an error it starts a new client, as an application must once a
// kgo transactional client gave up.
type Committer struct {
	mu        sync.Mutex
	h         checker.History
	committed int
	stop      chan struct{}
	done      chan struct{}
}

// Start runs producer id's loop on topic orders' partitions 0..3 until
// Finish (or the test's end).
func Start(t *testing.T, seeds []string, id string) *Committer {
	c := &Committer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for n := 0; ; n++ {
			select {
			case <-c.stop:
				return
			default:
			}
			if err := c.client(seeds, id); err != nil {
				t.Logf("%s: %v (a new client next)", id, err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { c.Finish() })
	return c
}

// client runs transactions on one client until an error or stop.
func (c *Committer) client(seeds []string, id string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		select {
		case <-c.stop:
			return nil
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := c.one(ctx, cl, id)
		cancel()
		if err != nil {
			return err
		}
	}
}

func (c *Committer) one(ctx context.Context, cl *kgo.Client, id string) error {
	c.mu.Lock()
	txn := checker.Txn{ID: fmt.Sprintf("%s/%d", id, len(c.h.Txns)), Producer: id, Outcome: checker.Aborted}
	commit := len(c.h.Txns)%2 == 0
	c.mu.Unlock()
	record := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.h.Txns = append(c.h.Txns, txn)
		if txn.Outcome == checker.Committed {
			c.committed++
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for p := range int32(4) {
		v := fmt.Sprintf("%s-%d", txn.ID, p)
		txn.Writes = append(txn.Writes, checker.Write{Value: v, Partition: checker.Partition{Topic: "orders", Partition: p}})
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			record()
			return fmt.Errorf("%s produce: %w", txn.ID, err)
		}
	}
	err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	switch {
	case err != nil && commit:
		txn.Outcome = checker.Unknown
	case err == nil && commit:
		txn.Outcome = checker.Committed
	}
	record()
	if err != nil {
		return fmt.Errorf("%s end: %w", txn.ID, err)
	}
	return nil
}

// Commits is the number of transactions committed so far.
func (c *Committer) Commits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed
}

// WaitCommits waits until n more transactions than from committed.
func (c *Committer) WaitCommits(t *testing.T, from, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for c.Commits() < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions committed, want %d", c.Commits(), from+n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Finish stops the loop and returns the history.
func (c *Committer) Finish() checker.History {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.h
}

// Check reads every partition of orders (0..3) read_committed to its end
// and fails on any anomaly the history checker finds.
func Check(t *testing.T, bootstrap string, h checker.History) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offsets := map[int32]kgo.Offset{}
	for p := range int32(4) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{"orders": offsets})
	// Every transaction ended before this read: it is complete once the
	// fetches stay empty for a while (a write missing from it is a
	// lost-write).
	reads := checker.Reads{}
	for idle := 0; idle < 4; {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			p := checker.Partition{Topic: r.Topic, Partition: r.Partition}
			reads[p] = append(reads[p], checker.Record{Offset: r.Offset, Value: string(r.Value)})
		})
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	rep, err := checker.Check(h, reads)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Anomalies() != 0 {
		t.Fatalf("history checker: %d anomalies\n%s", rep.Anomalies(), rep.Table())
	}
	t.Logf("history checker: %s", rep.Summary())
	if rep.TxnsCommitted == 0 || rep.TxnsAborted == 0 {
		t.Fatalf("history of %d committed and %d aborted transactions: want both", rep.TxnsCommitted, rep.TxnsAborted)
	}
}
