package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// The wedge of issue 16: a release before invariant 10 accepted
// AddOffsetsToTxn while nothing led __consumer_offsets, so a
// sendOffsetsToTransaction that failed left its transaction in
// PrepareAbort with a marker for __consumer_offsets-N pending for good:
// no stuck reason, `txn abort` answered 409, every restart resent it, the
// id unusable. The data dir here is one an older release wrote (the
// 28e9227 fixture, bbolt only) with that transaction's record added as
// that release stored it (txnlog's codec in the bucket coordinator/txns).
//
// Started now, the transaction ends: either its marker is applied (a group
// coordinator serves __consumer_offsets on the coordinator node) or it is
// reported stuck with its reason (txncoord markers, txn describe, the stuck
// metric, one log line) and `txn abort` completes it. The id is then
// usable, and a restart has nothing left to resend for it.
func TestWedgedOffsetsTransactionRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	dir := extractFixture(t, "up")
	offsets := cluster.OffsetsPartitionFor("wedged-group", cluster.DefaultOffsetsPartitions)
	wedged := txnlog.TxnMetadata{
		TransactionalID: "wedged", ProducerID: 424242, PrevProducerID: -1, NextProducerID: -1,
		ProducerEpoch: 4, LastProducerEpoch: 3, TimeoutMs: 60000, State: txnlog.PrepareAbort,
		Partitions:     []txncore.TopicPartition{{Topic: "bench", Partition: 1}, {Topic: cluster.OffsetsTopic, Partition: offsets}},
		StartTimestamp: time.Now().Add(-time.Hour).UnixMilli(), LastUpdateTimestamp: time.Now().Add(-time.Hour).UnixMilli(),
		ClientTransactionVersion: 2,
	}
	db, err := bolt.Open(filepath.Join(dir, "txncoord.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("coordinator")).Bucket([]byte("txns")).Put([]byte(wedged.TransactionalID), txnlog.EncodeTxn(wedged))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	logs := t.TempDir()
	adminAddr := upListen(t)
	args := []string{"up", "--data-dir", dir, "--listen", upListen(t), "--admin-listen", adminAddr,
		"--topics", "bench:4,orders:3", "--log-level", "info"}
	up := startProc(t, "up-1", logs, txncoordBinary(t), args...)
	adminURL := regexp.MustCompile(`admin=(\S+)`).FindStringSubmatch(up.ready)[1]
	cl := admin.NewClient(adminURL)
	ctx := testCtx(t, 90*time.Second)

	// Ended by itself, or stuck with its reason.
	var got admin.Txn
	for deadline := time.Now().Add(60 * time.Second); ; {
		got, err = cl.Transaction(ctx, "wedged")
		if err != nil {
			t.Fatal(err)
		}
		if got.State == "CompleteAbort" || got.StuckReason != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the wedged transaction is %s with no stuck reason (the old behaviour)\n%s", got.State, tail(up.log))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.StuckReason != "" {
		t.Logf("stuck, as reported: %s", got.StuckReason)
		if !strings.Contains(got.StuckReason, fmt.Sprintf("%s-%d", cluster.OffsetsTopic, offsets)) {
			t.Errorf("stuck reason %q does not name the partition", got.StuckReason)
		}
		markers, err := cl.Markers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(markers) != 1 || !markers[0].Stuck || markers[0].Reason == "" {
			t.Errorf("txncoord markers: %+v, want the wedged transaction stuck with its reason", markers)
		}
		metrics, err := cl.Raw(ctx, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(metrics, "txncoord_marker_stuck_transactions 1") {
			t.Errorf("stuck gauge is not 1")
		}
		if n := countLines(t, up.log, "transaction markers stuck"); n != 1 {
			t.Errorf("%d stuck lines in the log, want 1", n)
		}
		out, err := exec.CommandContext(ctx, txncoordBinary(t), "txn", "abort", "--transactional-id", "wedged", "--yes", "--admin", adminURL).CombinedOutput()
		if err != nil {
			t.Fatalf("txn abort: %v: %s", err, out)
		}
		if got, err = cl.Transaction(ctx, "wedged"); err != nil || got.State != "CompleteAbort" {
			t.Fatalf("after txn abort: %+v %v", got, err)
		}
	}

	// Usable again: a transaction of the id commits.
	bootstrap := bootstrapOf(t, up.ready)
	commitTxns(t, bootstrap, "wedged", "bench", 4, 1)
	for got.State != "CompleteCommit" { // its markers may still be on their way
		if got, err = cl.Transaction(ctx, "wedged"); err != nil || ctx.Err() != nil {
			t.Fatalf("after a new transaction: %+v %v %v", got, err, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	up.stop(t)

	// A restart resends nothing for it: no pending markers, no stuck line.
	args[4], args[6] = upListen(t), upListen(t)
	up = startProc(t, "up-2", logs, txncoordBinary(t), args...)
	cl = admin.NewClient(regexp.MustCompile(`admin=(\S+)`).FindStringSubmatch(up.ready)[1])
	if m, err := cl.Markers(ctx); err != nil || len(m) != 0 {
		t.Fatalf("markers after the restart: %+v %v", m, err)
	}
	if got, err = cl.Transaction(ctx, "wedged"); err != nil || got.State != "CompleteCommit" {
		t.Fatalf("after the restart: %+v %v", got, err)
	}
	up.stop(t)
}
