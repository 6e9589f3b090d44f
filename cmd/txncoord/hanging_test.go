package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/storage"
)

// TestFindHanging makes a hanging transaction the way one arises in
// practice — the coordinator loses its state while a leader still holds the
// transaction open — and checks that `txn find-hanging` reports it and
// `txn abort --topic --partition --start-offset` ends it, as
// kafka-transactions.sh find-hanging and abort do.
func TestFindHanging(t *testing.T) {
	base := freePortRun(t, 4)
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.2", "--topics", "orders:2", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3)}
	up := startUp(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.TransactionalID("hang-app"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, _, _ := cl.ProducerID(ctx)
	cl.Close()
	adminArgs := []string{"--admin", up.adminURL, "-o", "json"}
	var hanging []hangingTxn
	cliJSON(t, &hanging, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0s"}, adminArgs...)...)
	if len(hanging) != 0 {
		t.Fatalf("an open transaction the coordinator knows is not hanging: %+v", hanging)
	}

	// The coordinator loses its log; the leaders keep theirs.
	up.cmd.Process.Kill()
	<-up.done
	// `up` keeps every node in one file, each in its own bucket: drop
	// the coordinator's, once the process log is applied to it (or its
	// records would be replayed into it again).
	st, err := storage.Open(filepath.Join(dataDir, node.SharedStoreFile), storage.Options{Kinds: node.RecordCodecs})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(filepath.Join(dataDir, node.SharedStoreFile), 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("coordinator")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	up = startUp(t, args...)
	cliJSON(t, &hanging, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0s"}, adminArgs...)...)
	if len(hanging) != 1 || hanging[0].ProducerID != pid || hanging[0].Partition != 1 || hanging[0].CurrentTxnStartOffset != 0 {
		t.Fatalf("find-hanging: %+v, want pid %d open on orders-1 at offset 0", hanging, pid)
	}
	// A longer max timeout leaves it out: it has not been open that long.
	cliJSON(t, &hanging, append([]string{"txn", "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "1h"}, adminArgs...)...)
	if len(hanging) != 0 {
		t.Fatalf("find-hanging --max-transaction-timeout 1h: %+v", hanging)
	}

	// It holds back every read_committed consumer of orders-1 until it is
	// aborted at the partition, as kafka-transactions.sh abort does: by
	// its start offset (a wrong one names nothing and changes nothing).
	if lso := lastStableOffset(ctx, t, up.bootstrap, "orders", 1); lso != 0 {
		t.Fatalf("last stable offset of orders-1 %d before the abort, want 0 (the hanging transaction's start)", lso)
	}
	_, stderr, code := runCLI(t, append([]string{"txn", "abort", "--topic", "orders", "--partition", "1", "--start-offset", "5", "--yes"}, adminArgs...)...)
	if code != 1 || !strings.Contains(stderr, "no open transaction starts at offset 5 on orders-1") {
		t.Fatalf("abort at a start offset with no transaction: exit %d, %s", code, stderr)
	}
	_, stderr, code = runCLI(t, append([]string{"txn", "abort", "--topic", "orders", "--start-offset", "0", "--yes"}, adminArgs...)...)
	if code != 2 || !strings.Contains(stderr, "--partition is required with --topic") {
		t.Fatalf("abort without --partition: exit %d, %s", code, stderr)
	}
	var aborted partitionAbort
	cliJSON(t, &aborted, append([]string{"txn", "abort", "--topic", "orders", "--partition", "1", "--start-offset", "0", "--yes"}, adminArgs...)...)
	if aborted.ProducerID != pid || aborted.StartOffset != 0 || aborted.Partition != 1 {
		t.Fatalf("abort: %+v, want pid %d at orders-1 from offset 0", aborted, pid)
	}
	cliJSON(t, &hanging, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0s"}, adminArgs...)...)
	if len(hanging) != 0 {
		t.Fatalf("find-hanging after the abort: %+v", hanging)
	}
	// The record and its ABORT marker: offsets 0 and 1, both stable.
	if lso := lastStableOffset(ctx, t, up.bootstrap, "orders", 1); lso != 2 {
		t.Fatalf("last stable offset of orders-1 %d after the abort, want 2", lso)
	}
	up.stop(t)
}

// lastStableOffset is a partition's end offset as read_committed consumers
// see it (ListOffsets, isolation level 1).
func lastStableOffset(ctx context.Context, t *testing.T, bootstrap, topic string, partition int32) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, partition)
	if !ok || o.Err != nil {
		t.Fatalf("ListOffsets %s-%d: %+v", topic, partition, o)
	}
	return o.Offset
}
