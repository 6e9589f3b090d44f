package node

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countApp is a stateful exactly-once application: it counts words read
// from its input in a GroupTransactSession and keeps each count in a
// compacted changelog, written in the same transaction as its offsets.
type countApp struct {
	t      *testing.T
	addr   string
	counts map[string]int
	sess   *kgo.GroupTransactSession
}

const (
	eosInput     = "words"
	eosChangelog = "counts-changelog"
	eosBarrier   = "__restore-barrier"
)

// restoreCounts reads the changelog read_committed up to a barrier record
// written now, as a state store restores: the last value of each key.
func restoreCounts(ctx context.Context, t *testing.T, addr string) (map[string]int, int) {
	t.Helper()
	pr, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	barrier, err := pr.ProduceSync(ctx, &kgo.Record{Topic: eosChangelog, Key: []byte(eosBarrier), Value: []byte(time.Now().String())}).First()
	pr.Close()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{eosChangelog: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	counts, n := map[string]int{}, 0
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("restore: %v", err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.Offset >= barrier.Offset {
				done = true
			}
			if string(r.Key) == eosBarrier {
				return
			}
			c, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("changelog value %q: %v", r.Value, err)
			}
			counts[string(r.Key)] = c
		})
		if done {
			return counts, n
		}
	}
}

func startCountApp(ctx context.Context, t *testing.T, addr string) *countApp {
	t.Helper()
	counts, _ := restoreCounts(ctx, t, addr)
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("count-app"),
		kgo.ConsumerGroup("count-app"), kgo.ConsumeTopics(eosInput), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic(eosChangelog))
	if err != nil {
		t.Fatal(err)
	}
	return &countApp{t: t, addr: addr, counts: counts, sess: sess}
}

// step processes one poll in a transaction and ends it with commit (on a
// failed commit the counts are restored from the changelog, as the state
// store would be). It returns how many input records it counted.
func (a *countApp) step(ctx context.Context, commit bool) int {
	a.t.Helper()
	fs := a.sess.PollRecords(ctx, 50)
	if err := fs.Err0(); err != nil {
		a.t.Fatalf("poll: %v", err)
	}
	if err := a.sess.Begin(); err != nil {
		a.t.Fatal(err)
	}
	before := maps.Clone(a.counts)
	n := 0
	fs.EachRecord(func(r *kgo.Record) {
		w := string(r.Value)
		a.counts[w]++
		n++
		a.sess.Produce(ctx, &kgo.Record{Key: []byte(w), Value: []byte(strconv.Itoa(a.counts[w]))}, func(_ *kgo.Record, err error) {
			if err != nil {
				a.t.Errorf("changelog produce: %v", err)
			}
		})
	})
	if !commit {
		// The aborted records reach the changelog first: the cleaner
		// has aborted data to remove, and readers must skip it.
		if err := a.sess.Client().Flush(ctx); err != nil {
			a.t.Fatalf("flush before the abort: %v", err)
		}
	}
	committed, err := a.sess.End(ctx, kgo.TransactionEndTry(commit))
	if err != nil {
		a.t.Fatalf("end (commit %t, %d records): %v", commit, n, err)
	}
	if !committed {
		a.counts = before // the transaction's changes are gone
		return 0
	}
	return n
}

// TestCompactedChangelogExactlyOnce: a word-count application on a
// GroupTransactSession keeps its counts in a compacted changelog. Its first
// instance commits some transactions and aborts others, then goes away;
// the second restores its counts from the changelog (read_committed) and
// finishes the input. The counts are exact, and once the leaders' cleaner
// has run, the changelog holds about one record per word and restores the
// same counts.
func TestCompactedChangelogExactlyOnce(t *testing.T) {
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, Log: zerolog.Nop(),
		CleanerBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, e.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := e.Bootstrap()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(eosInput))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if c, err := adm.CreateTopic(ctx, 2, -1, nil, eosInput); err != nil || c.Err != nil {
		t.Fatalf("create %s: %v %v", eosInput, err, c.Err)
	}
	changelog := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "segment.ms": kadm.StringPtr("1"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"), "delete.retention.ms": kadm.StringPtr("100")}
	if c, err := adm.CreateTopic(ctx, 1, -1, changelog, eosChangelog); err != nil || c.Err != nil {
		t.Fatalf("create %s: %v %v", eosChangelog, err, c.Err)
	}
	const total, words = 600, 10
	want := map[string]int{}
	for i := range total {
		w := fmt.Sprintf("w%d", i%words)
		want[w]++
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(w)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The first instance: aborts every other transaction (first one
	// aborted) and commits the others until it has counted a third of
	// the input, 50 records a poll at most, then goes away.
	app := startCountApp(ctx, t, addr)
	counted, aborts := 0, 0
	for i := 0; counted < total/3; i++ {
		commit := i%2 == 1
		if !commit {
			aborts++
		}
		counted += app.step(ctx, commit)
	}
	app.sess.Close()
	if aborts == 0 || counted >= total {
		t.Fatalf("first instance: %d aborts, %d counted of %d", aborts, counted, total)
	}

	// The second restores from the changelog and finishes.
	app = startCountApp(ctx, t, addr)
	restored := 0
	for _, c := range app.counts {
		restored += c
	}
	if restored != counted {
		t.Fatalf("restored counts sum to %d, the first instance committed %d", restored, counted)
	}
	for counted < total {
		counted += app.step(ctx, true)
	}
	app.sess.Close()
	if !maps.Equal(app.counts, want) {
		t.Fatalf("counts %v, want %v", app.counts, want)
	}

	// The cleaner shrinks the changelog to about one record per word (and
	// the barriers' key); a restore from it gives the exact counts.
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts, n := restoreCounts(ctx, t, addr)
		if !maps.Equal(counts, want) {
			t.Fatalf("counts restored from the changelog %v, want %v", counts, want)
		}
		if n <= words+3 {
			t.Logf("changelog restored from %d records (%d words)", n, words)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s of cleaning the changelog still holds %d records, want about %d", n, words+1)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
