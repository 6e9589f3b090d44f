package eos

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sessionLog watches kgo's log for the line in which a
// GroupTransactSession decides whether to send EndTxn as a commit: End
// returns committed=false both when it aborted without asking to commit
// (a rebalance: the attempt can never be visible) and when a commit it
// sent came back with an error it then retried as an abort (the commit
// may have happened), and only this line tells the two apart.
type sessionLog struct {
	willTryCommit atomic.Bool
	verbose       bool
}

func (l *sessionLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *sessionLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if msg == "transaction session ending" {
		for i := 0; i+1 < len(keyvals); i += 2 {
			if keyvals[i] == "will_try_commit" {
				b, _ := keyvals[i+1].(bool)
				l.willTryCommit.Store(b)
			}
		}
	}
	if level <= kgo.LogLevelWarn || l.verbose {
		fmt.Fprintln(os.Stderr, append([]any{time.Now().Format("15:04:05.000"), level, msg}, keyvals...)...)
	}
}

// runKgo is franz-go's EOS loop: a GroupTransactSession consumes in the
// group with read_committed, and End commits the consumed offsets in the
// transaction (TxnOffsetCommit with the group's generation and member, KIP-447)
// or aborts when the group rebalanced since the transaction began.
func runKgo(ctx context.Context, m *member) error {
	log := &sessionLog{verbose: os.Getenv("EOS_VERBOSE") != ""}
	var sess *kgo.GroupTransactSession
	groupGen := func(cl *kgo.Client) int32 {
		_, gen := cl.GroupMetadata()
		return gen
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(m.cfg.Bootstrap...),
		kgo.ClientID("eos-"+m.cfg.Name),
		kgo.TransactionalID(m.cfg.TxnID),
		kgo.TransactionTimeout(m.cfg.TxnTimeout),
		kgo.ConsumerGroup(m.cfg.Group),
		kgo.ConsumeTopics(m.cfg.From),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SessionTimeout(m.cfg.SessionTimeout),
		kgo.HeartbeatInterval(time.Second),
		kgo.RebalanceTimeout(15*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.WithLogger(log),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, a map[string][]int32) {
			m.assigned(groupGen(cl), a[m.cfg.From])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.revoked(r[m.cfg.From])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.revoked(r[m.cfg.From])
		}),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	// Produce and End must not be cut short by the stop signal: a
	// canceled End leaves the client in an invalid state. Only the poll
	// watches ctx; each operation has its own bound.
	opCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	}
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollRecords(pollCtx, m.cfg.BatchMax)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil && err != context.DeadlineExceeded && err != context.Canceled {
				fmt.Fprintf(os.Stderr, "fetch %s/%d: %v\n", t, p, err)
			}
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		id := m.nextID()
		in := make([]Consumed, len(recs))
		for i, r := range recs {
			in[i] = Consumed{P: r.Partition, O: r.Offset, V: string(r.Value)}
		}
		out, err := m.begin(id, in)
		if err != nil {
			return err
		}
		octx, cancel := opCtx()
		outRecs := make([]*kgo.Record, len(out))
		for i, o := range out {
			outRecs[i] = &kgo.Record{Topic: m.cfg.To, Partition: o.P, Value: []byte(o.V)}
		}
		produceErr := sess.ProduceSync(octx, outRecs...).FirstErr()
		if produceErr != nil || m.abortNow() {
			// Never asked to commit: whatever End does, this
			// attempt must stay invisible.
			_, err := sess.End(octx, kgo.TryAbort)
			cancel()
			m.end(id, "aborted", produceErr)
			if err != nil {
				return fmt.Errorf("abort: %w", err)
			}
			continue
		}
		if err := m.committing(id); err != nil {
			cancel()
			return err
		}
		log.willTryCommit.Store(false)
		committed, err := sess.End(octx, kgo.TryCommit)
		cancel()
		switch {
		case committed && err == nil:
			m.end(id, "committed", nil)
		case err == nil && !log.willTryCommit.Load():
			m.end(id, "aborted", nil) // rebalanced: aborted without asking to commit
		default:
			m.end(id, "unknown", err)
			if err != nil {
				return fmt.Errorf("end: %w", err)
			}
		}
	}
	return nil
}
