// Command countapp is a stateful exactly-once application: it counts the
// words of its input topic in a kgo GroupTransactSession and keeps each
// word's count in a compacted changelog topic, written in the same
// transaction as the group's offsets. At start it restores its counts from
// the changelog (read_committed, the last value of each key, up to a
// barrier record it writes first), as a state store restores. The
// integration tests run it as a child process, so that it and txncoord
// can be SIGKILLed while it runs.
//
// Stdout: "countapp ready restored=N records=R" once restored (N the sum of
// the counts, R the changelog records read), then "committed sum=N" after
// each committed transaction.
//
// Exit status: 0 once the counts sum to at least --expect; 1 when it could
// not go on (an error from the client: the test starts it again, and it
// restores); 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// barrierKey is the key of the restore's barrier records: compacted to one.
const barrierKey = "__restore-barrier"

func main() {
	var (
		bootstrap, input, changelog, group, txnID string
		expect, batch                             int
		pause, txnTimeout                         time.Duration
	)
	flag.StringVar(&bootstrap, "bootstrap", "", "comma-separated seed brokers")
	flag.StringVar(&input, "input", "words", "topic of words to count")
	flag.StringVar(&changelog, "changelog", "counts-changelog", "compacted changelog topic (one partition)")
	flag.StringVar(&group, "group", "count-app", "consumer group")
	flag.StringVar(&txnID, "txn-id", "count-app", "transactional id")
	flag.IntVar(&expect, "expect", 0, "stop once the counts sum to this")
	flag.IntVar(&batch, "batch", 20, "records per transaction at most")
	flag.DurationVar(&pause, "pause", 0, "sleep after each transaction")
	// A transaction left open by a SIGKILL holds the changelog's last
	// stable offset, so the next instance's restore, until the
	// coordinator aborts it at this timeout.
	flag.DurationVar(&txnTimeout, "txn-timeout", 6*time.Second, "transaction timeout")
	flag.Parse()
	if bootstrap == "" || expect <= 0 {
		fmt.Fprintln(os.Stderr, "countapp: --bootstrap and --expect are required")
		os.Exit(2)
	}
	seeds := strings.Split(bootstrap, ",")
	ctx := context.Background()
	if err := run(ctx, seeds, input, changelog, group, txnID, expect, batch, pause, txnTimeout); err != nil {
		fmt.Fprintf(os.Stderr, "countapp: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, seeds []string, input, changelog, group, txnID string, expect, batch int, pause, txnTimeout time.Duration) error {
	counts, records, err := restore(ctx, seeds, changelog)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	fmt.Printf("countapp ready restored=%d records=%d\n", sum, records)
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(txnTimeout), kgo.ConsumerGroup(group), kgo.ConsumeTopics(input),
		kgo.SessionTimeout(6*time.Second), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(changelog))
	if err != nil {
		return err
	}
	defer sess.Close()
	for sum < expect {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := sess.PollRecords(pctx, batch)
		cancel()
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("poll: %w", err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		next := map[string]int{}
		var produceErr error
		fs.EachRecord(func(r *kgo.Record) {
			w := string(r.Value)
			c, ok := next[w]
			if !ok {
				c = counts[w]
			}
			next[w] = c + 1
			sess.Produce(ctx, &kgo.Record{Key: r.Value, Value: []byte(strconv.Itoa(c + 1))}, func(_ *kgo.Record, err error) {
				if err != nil && produceErr == nil {
					produceErr = err
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TransactionEndTry(true))
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if !committed {
			// The session aborted (a rebalance, a failed produce): the
			// records are consumed again from the committed offsets,
			// and the counts stay as they were.
			continue
		}
		if produceErr != nil {
			return fmt.Errorf("a changelog produce failed in a committed transaction: %w", produceErr)
		}
		for w, c := range next {
			sum += c - counts[w]
			counts[w] = c
		}
		fmt.Printf("committed sum=%d\n", sum)
		time.Sleep(pause)
	}
	return nil
}

// restore reads the changelog read_committed from its start up to a
// barrier written now: the last value of each key, and the records read.
func restore(ctx context.Context, seeds []string, changelog string) (map[string]int, int, error) {
	pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, 0, err
	}
	barrier, err := pr.ProduceSync(ctx, &kgo.Record{Topic: changelog, Key: []byte(barrierKey), Value: []byte(time.Now().String())}).First()
	pr.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("barrier: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{changelog: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	counts, n := map[string]int{}, 0
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return nil, 0, err
		}
		done := false
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			n++
			done = done || r.Offset >= barrier.Offset
			if string(r.Key) == barrierKey {
				return
			}
			c, err := strconv.Atoi(string(r.Value))
			if err != nil {
				bad = fmt.Errorf("changelog value %q at offset %d: %w", r.Value, r.Offset, err)
			}
			counts[string(r.Key)] = c
		})
		if bad != nil {
			return nil, 0, bad
		}
		if done {
			return counts, n, nil
		}
	}
}
