package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupTransactSession: franz-go's EOS loop (consume "in", produce
// "out", commit the group's offsets in the same transaction: TV2, so
// TxnOffsetCommit v5 adds __consumer_offsets implicitly) moves every input
// to the output exactly once, and the committed offsets are the inputs'
// end offsets once every transaction ended.
func TestGroupTransactSession(t *testing.T) {
	tc := startCluster(t)
	const n = 200
	produceNumbered(t, tc.client(), "in", n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tc.addrs[0]), kgo.TransactionalID("eos-1"),
		kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	moved := 0
	for moved < n {
		fs := sess.PollRecords(ctx, 50)
		if ctx.Err() != nil {
			t.Fatalf("moved %d of %d before the deadline", moved, n)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		copyRecords(ctx, t, sess, fs)
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			moved += fs.NumRecords()
		}
	}
	reader := tc.client(kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for len(seen) < n {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d distinct outputs of %d", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("output %s seen %d times", v, c)
		}
	}
	adm := kadm.NewClient(tc.client())
	checkCommitted(ctx, t, adm, "eos", "in", endOffsets(t, adm, "in"), "at the end")
}

// copyRecords produces each fetched record's key and value in the
// session's transaction (to its default topic).
func copyRecords(ctx context.Context, t *testing.T, sess *kgo.GroupTransactSession, fs kgo.Fetches) {
	fs.EachRecord(func(r *kgo.Record) {
		sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	})
}
