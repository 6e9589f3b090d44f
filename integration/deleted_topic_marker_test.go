package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
)

// A topic deleted while a transaction writes to it: the transaction
// commits, its marker to the deleted topic's partition is resolved as
// Kafka does (the leader answers UNKNOWN_TOPIC_OR_PARTITION, the metadata
// no longer has the topic: the partition is dropped, one info line), never
// stuck; the other topic's records are committed.
func TestDeletedTopicMarkerResolved(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	up := startProc(t, "up", t.TempDir(), txncoordBinary(t), "up", "--data-dir", t.TempDir(), "--listen", upListen(t),
		"--admin-listen", upListen(t), "--topics", "doomed:1,kept:1", "--log-level", "info")
	bootstrap := bootstrapOf(t, up.ready)
	adm := admin.NewClient(regexp.MustCompile(`admin=(\S+)`).FindStringSubmatch(up.ready)[1])
	ctx := testCtx(t, 90*time.Second)

	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID("deleter"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "doomed", Value: []byte("a")}, &kgo.Record{Topic: "kept", Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, "doomed")
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete topic: %v %v", err, resp.Error())
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for {
		txn, err := adm.Transaction(ctx, "deleter")
		if err != nil {
			t.Fatal(err)
		}
		if txn.StuckReason != "" {
			t.Fatalf("stuck: %s", txn.StuckReason)
		}
		if txn.State == "CompleteCommit" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the transaction is still %s\n%s", txn.State, tail(up.log))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := countLines(t, up.log, "marker skipped: the partition's topic was deleted"); n != 1 {
		t.Errorf("%d lines for the skipped marker, want 1\n%s", n, tail(up.log))
	}
	if c := committedCounts(t, bootstrap, "kept", 1); c[0] != 1 {
		t.Fatalf("kept: %v records visible read_committed, want 1", c)
	}
	if strings.Contains(tail(up.log), "transaction markers stuck") {
		t.Fatalf("a stuck line:\n%s", tail(up.log))
	}
	up.stop(t)
}
