package workload

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/checker"
)

// stablePoll is how often ReadCommitted re-lists offsets while waiting for
// open transactions to finish. It only paces a condition poll.
const stablePoll = 50 * time.Millisecond

// ReadCommitted reads every given partition from its start with
// read_committed and returns the visible data records, for the checker.
//
// It is a final read: it first waits until no transaction is open on any of
// the partitions (last stable offset == high watermark, so markers still in
// flight after the producers' last EndTxn have landed), then consumes up to
// that offset. Control records are kept while consuming (and left out of the
// result) because they occupy offsets: the last offset below the end is a
// marker whenever the partition ends with a transaction. A transaction that
// never ends (a hanging one) makes ReadCommitted fail when ctx is done,
// naming the partitions whose last stable offset lags.
func ReadCommitted(ctx context.Context, bootstrap []string, partitions []checker.Partition) (checker.Reads, error) {
	return ReadCommittedSecure(ctx, bootstrap, nil, partitions)
}

// ReadCommittedSecure is ReadCommitted through a secured listener (sec nil:
// plaintext).
func ReadCommittedSecure(ctx context.Context, bootstrap []string, sec *Security, partitions []checker.Partition) (checker.Reads, error) {
	base, err := sec.kgoOpts()
	if err != nil {
		return nil, err
	}
	base = append(base, kgo.SeedBrokers(bootstrap...), kgo.ClientID("txncoord-workload-reader"))
	admin, err := kgo.NewClient(base...)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	ends, err := waitStable(ctx, kadm.NewClient(admin), partitions)
	if err != nil {
		return nil, err
	}

	reads := make(checker.Reads, len(partitions))
	consume := make(map[string]map[int32]kgo.Offset)
	remaining := 0
	for _, p := range partitions {
		reads[p] = []checker.Record{}
		if ends[p] == 0 {
			continue
		}
		if consume[p.Topic] == nil {
			consume[p.Topic] = make(map[int32]kgo.Offset)
		}
		consume[p.Topic][p.Partition] = kgo.NewOffset().AtStart()
		remaining++
	}
	if remaining == 0 {
		return reads, nil
	}
	cl, err := kgo.NewClient(append(base[:len(base):len(base)],
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	next := make(map[checker.Partition]int64, len(partitions)) // consumed position
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("workload: read_committed read incomplete (%s): %w", lagging(partitions, ends, next), ctx.Err())
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			fetchErr = fmt.Errorf("workload: fetch %s/%d: %w", t, p, err)
		})
		if fetchErr != nil {
			return nil, fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			p := checker.Partition{Topic: r.Topic, Partition: r.Partition}
			end := ends[p]
			if r.Offset >= end || r.Offset < next[p] {
				return
			}
			next[p] = r.Offset + 1
			if next[p] >= end {
				remaining--
			}
			if !r.Attrs.IsControl() {
				reads[p] = append(reads[p], checker.Record{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	return reads, nil
}

// waitStable waits until, for every partition, the last stable offset equals
// the high watermark, and returns those offsets.
func waitStable(ctx context.Context, adm *kadm.Client, partitions []checker.Partition) (map[checker.Partition]int64, error) {
	topicSet := make(map[string]bool)
	for _, p := range partitions {
		topicSet[p.Topic] = true
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var lastErr error
	stable := make(map[checker.Partition]int64)
	hw := make(map[checker.Partition]int64)
	for {
		lastErr = nil
		lso, err := adm.ListCommittedOffsets(ctx, topics...)
		if err == nil {
			err = lso.Error()
		}
		var hwm kadm.ListedOffsets
		if err == nil {
			hwm, err = adm.ListEndOffsets(ctx, topics...)
		}
		if err == nil {
			err = hwm.Error()
		}
		if err != nil {
			lastErr = err
		} else {
			done := true
			for _, p := range partitions {
				l, okL := lso.Lookup(p.Topic, p.Partition)
				h, okH := hwm.Lookup(p.Topic, p.Partition)
				if !okL || !okH {
					lastErr = fmt.Errorf("workload: partition %s not listed", p)
					done = false
					continue
				}
				stable[p], hw[p] = l.Offset, h.Offset
				if l.Offset != h.Offset {
					done = false
				}
			}
			if done {
				return stable, nil
			}
		}
		select {
		case <-ctx.Done():
			var lag []string
			for _, p := range partitions {
				if stable[p] != hw[p] {
					lag = append(lag, fmt.Sprintf("%s lso=%d hwm=%d", p, stable[p], hw[p]))
				}
			}
			return nil, fmt.Errorf("workload: transactions still open at read time (%s; last error %v): %w", strings.Join(lag, ", "), lastErr, ctx.Err())
		case <-time.After(stablePoll):
		}
	}
}

func lagging(partitions []checker.Partition, ends, next map[checker.Partition]int64) string {
	var out []string
	for _, p := range partitions {
		if next[p] < ends[p] {
			out = append(out, fmt.Sprintf("%s at %d of %d", p, next[p], ends[p]))
		}
	}
	return strings.Join(out, ", ")
}
