package wordcount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BarrierKey is the key of the restore's barrier records: compacted to one.
const BarrierKey = "__restore-barrier"

// Config is one run of the application.
type Config struct {
	Seeds            []string
	Input, Changelog string // the changelog has one partition
	Group, TxnID     string
	Expect           int           // stop once the counts sum to this
	Batch            int           // records per transaction at most
	Pause            time.Duration // sleep after each transaction
	// TxnTimeout: a transaction left open by a SIGKILL holds the
	// changelog's last stable offset, so the next instance's restore,
	// until the coordinator aborts it at this timeout.
	TxnTimeout time.Duration
	// Out gets "ready restored=N records=R" once restored and
	// "committed sum=N" after each committed transaction.
	Out io.Writer
}

// Run restores the counts, then counts until they sum to cfg.Expect. An
// error is the client's: the caller starts it again, and it restores.
func Run(ctx context.Context, cfg Config) error {
	seeds, input, changelog, group, txnID := cfg.Seeds, cfg.Input, cfg.Changelog, cfg.Group, cfg.TxnID
	counts, records, err := Restore(ctx, seeds, changelog)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	fmt.Fprintf(cfg.Out, "ready restored=%d records=%d\n", sum, records)
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(cfg.TxnTimeout), kgo.ConsumerGroup(group), kgo.ConsumeTopics(input),
		kgo.SessionTimeout(6*time.Second), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(changelog))
	if err != nil {
		return err
	}
	defer sess.Close()
	for sum < cfg.Expect {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := sess.PollRecords(pctx, cfg.Batch)
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
		fmt.Fprintf(cfg.Out, "committed sum=%d\n", sum)
		time.Sleep(cfg.Pause)
	}
	return nil
}

// Restore reads the changelog read_committed from its start up to a
// barrier written now (BarrierKey), as a state store restores: the last
// count of each word, and the records read.
func Restore(ctx context.Context, seeds []string, changelog string) (map[string]int, int, error) {
	pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, 0, err
	}
	barrier, err := pr.ProduceSync(ctx, &kgo.Record{Topic: changelog, Key: []byte(BarrierKey), Value: []byte(time.Now().String())}).First()
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
			if string(r.Key) == BarrierKey {
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
