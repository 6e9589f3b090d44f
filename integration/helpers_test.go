package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// txnProducer returns a transactional kgo producer with manual partitioning.
func (c *Cluster) txnProducer(t testing.TB, txnID string, opts ...kgo.Opt) *kgo.Client {
	return c.Client(append([]kgo.Opt{
		kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30 * time.Second),
	}, opts...)...)
}

// runTxn produces one record per partition in one transaction and commits
// or aborts it.
func runTxn(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, partitions []int32, value string, commit bool) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, p := range partitions {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-p%d", value, p))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s to p%d: %v", value, p, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

// consumeUntil reads the partitions from the start at the given isolation
// level until every value of until has been seen, and returns every value
// seen. Records arrive in offset order, so once the last value of a later
// committed transaction is seen, every earlier record has been judged: an
// aborted value that read_committed wrongly returned would be among them.
func (c *Cluster) consumeUntil(ctx context.Context, t testing.TB, topic string, partitions []int32, committed bool, until ...string) []string {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for _, p := range partitions {
		assign[p] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}), kgo.FetchIsolationLevel(iso))
	defer cl.Close()
	want := map[string]bool{}
	for _, v := range until {
		want[v] = true
	}
	var values []string
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v; got %v, still waiting for %v", topic, ctx.Err(), values, want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			values = append(values, string(r.Value))
			delete(want, string(r.Value))
		})
	}
	sort.Strings(values)
	return values
}

// waitState polls the coordinator until txnID is in state (EndTxn is
// answered once Prepare is durable; Complete* follows the markers).
func (c *Cluster) waitState(t testing.TB, txnID, state string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, ok := c.Coordinator.Coordinator.Describe(txnID)
		if ok && d.State == state && !d.Pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %s: %+v", txnID, state, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// keptDir is a directory for a test's data and logs: t.TempDir(), or,
// when TXNCOORD_KEEP_DIRS names a directory, a new one under it named for
// the test, left in place to read after a failure (processes' logs, data
// dirs, the EOS chain's histories).
func keptDir(t testing.TB) string {
	root := os.Getenv("TXNCOORD_KEEP_DIRS")
	if root == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(root, strings.ReplaceAll(t.Name(), "/", "_")+"-"+time.Now().Format("150405")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kept directory: %s", dir)
	return dir
}

// childLogLevel is the log level of the txncoord processes a test starts:
// def, or TXNCOORD_CHILD_LOG_LEVEL when set (debug, to read a failure).
func childLogLevel(def string) string {
	if l := os.Getenv("TXNCOORD_CHILD_LOG_LEVEL"); l != "" {
		return l
	}
	return def
}
