package node

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// TestEpochExhaustionRotatesWithoutFailing: a kgo TV2 producer whose
// epoch runs out. Its commit at epoch 32766 rotates the producer id (the
// EndTxn answers the new id at epoch 0, the markers carry the old id at
// 32767), and its next transaction's first Produce registers the new id
// while the coordinator still holds the old one, in PrepareCommit until
// every marker is written. The markers are held here so that the
// registration surely comes first: it must wait (CONCURRENT_TRANSACTIONS,
// which the leader retries, as Kafka's pending transition to Complete
// answers), not fail with INVALID_PRODUCER_ID_MAPPING, and commit once the
// markers are released. Reaching epoch 32766 takes 32,765 transactions,
// so the stored metadata is moved there while `up` is stopped.
func TestEpochExhaustionRotatesWithoutFailing(t *testing.T) {
	const id = "exhaust"
	f, lns := twoLeaderFile(t)
	dir := t.TempDir()
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := f.Coordinator.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	commitOne := func(cl *kgo.Client, value string) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte(value)}).FirstErr(); err != nil {
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	producer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(id),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("orders"))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}

	first := producer()
	if err := commitOne(first, "before"); err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	first.Close()
	stopWithin(t, e.Stop)
	firstPID := moveEpoch(t, dir, id, 32765)

	f, lns = twoLeaderFileAt(t, f)
	if e, err = StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWithin(t, e.Stop) })

	cl := producer()
	defer cl.Close()
	describe := func() coordinator.TxnDetail {
		d, ok := e.Coordinator.Coordinator.Describe(id)
		if !ok {
			t.Fatalf("%s not found at the coordinator", id)
		}
		return d
	}
	// Transaction A: InitProducerId bumped 32765 to 32766, so its commit
	// exhausts the epoch. Its markers are held: it stays PrepareCommit.
	var held []faults.Fault
	for _, l := range f.Leaders {
		h, err := e.Faults.Add(faults.Spec{Kind: faults.HoldMarkers, Node: l.NodeID})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	if err := commitOne(cl, "A"); err != nil {
		t.Fatalf("transaction at epoch 32766: %v", err)
	}
	if d := describe(); d.State != "PrepareCommit" || d.ProducerID != firstPID {
		t.Fatalf("after the exhausting commit with its markers held: %s of producer %d, want PrepareCommit of %d", d.State, d.ProducerID, firstPID)
	}

	// Transaction B, with the id the EndTxn answered: its registration
	// waits while A is PrepareCommit, and goes through once A completes.
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		err := commitOne(cl, "B")
		done <- result{err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("transaction B ended (%v) while transaction A's markers were held, want it to wait for A's Complete", r.err)
	case <-time.After(400 * time.Millisecond):
	}
	released := time.Now()
	for _, h := range held {
		if err := e.Faults.Remove(h.ID); err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("transaction B after the producer id rotated: %v", r.err)
	}
	if r.at.Before(released) {
		t.Fatal("transaction B committed before transaction A's markers were released")
	}
	d := describe()
	if d.ProducerID == firstPID || d.ProducerEpoch != 1 {
		t.Fatalf("after transaction B: producer %d epoch %d, want a new producer id (not %d) at epoch 1", d.ProducerID, d.ProducerEpoch, firstPID)
	}
	countCommitted(t, bootstrap, 3) // "before", A and B
}

// moveEpoch rewrites id's stored metadata in the stopped `up` at dir to
// epoch at, CompleteCommit, and returns its producer id.
func moveEpoch(t *testing.T, dir, id string, at int16) int64 {
	t.Helper()
	st, err := openSharedStore(dir, false, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	tl, err := txnlog.OpenBoltIn(st, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := tl.Load()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := loaded.Txns[id]
	if !ok || m.State != txncore.CompleteCommit || m.ClientTransactionVersion != 2 {
		t.Fatalf("stored %q: %+v (found %v), want a completed TV2 commit", id, m, ok)
	}
	m.ProducerEpoch, m.LastProducerEpoch = at, at-1
	if _, err := tl.Submit(txnlog.Batch{Puts: []txnlog.TxnMetadata{m}}); err != nil {
		t.Fatal(err)
	}
	return m.ProducerID
}
