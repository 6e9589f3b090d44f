package historytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
//
// Every transaction of h ended before Check: each partition's last stable
// offset must reach its high watermark (a transaction left open there is a
// hang, reported as such), and the read is complete once every partition
// holding committed data has returned records and the fetches then stay
// empty for a while. A partition that returns nothing at all is given
// longer before its writes count as lost: right after a node's restart a
// client's first fetch of it can take a few retries.
func Check(t *testing.T, bootstrap string, h checker.History) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stable := waitStable(ctx, t, kadm.NewClient(cl))
	offsets := map[int32]kgo.Offset{}
	for p := range int32(4) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{"orders": offsets})
	reads := checker.Reads{}
	for idle := 0; ; {
		// Short when every partition with committed data has answered;
		// 10 s when one has returned nothing yet.
		limit := 4
		for p, end := range stable {
			if end > 0 && len(reads[checker.Partition{Topic: "orders", Partition: p}]) == 0 {
				limit = 20
			}
		}
		if idle >= limit {
			break
		}
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
		t.Fatalf("history checker: %d anomalies (last stable offsets %v)\n%s", rep.Anomalies(), stable, rep.Table())
	}
	t.Logf("history checker: %s", rep.Summary())
	if rep.TxnsCommitted == 0 || rep.TxnsAborted == 0 {
		t.Fatalf("history of %d committed and %d aborted transactions: want both", rep.TxnsCommitted, rep.TxnsAborted)
	}
}

// waitStable waits until every partition of orders has its last stable
// offset at its high watermark (no transaction open on it) and returns
// those offsets; it fails the test naming a partition that stays behind.
func waitStable(ctx context.Context, t *testing.T, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	var last string
	for {
		hwm, herr := adm.ListEndOffsets(ctx, "orders")
		lso, lerr := adm.ListCommittedOffsets(ctx, "orders")
		if err := errors.Join(herr, lerr, hwm.Error(), lso.Error()); err != nil {
			last = err.Error()
		} else {
			stable := map[int32]int64{}
			last = ""
			hwm.Each(func(o kadm.ListedOffset) {
				l, _ := lso.Lookup("orders", o.Partition)
				if l.Offset != o.Offset {
					last += fmt.Sprintf(" orders/%d last stable offset %d below its high watermark %d;", o.Partition, l.Offset, o.Offset)
				}
				stable[o.Partition] = l.Offset
			})
			if last == "" && len(stable) == 4 {
				return stable
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a transaction stays open after every one ended:%s", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
