package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/txncoord/txncoord/integration/checker"
)

// Sarama runs the workload with IBM/sarama's transactional producer (TV0:
// AddPartitionsToTxn v3, EndTxn v3, no epoch bump per transaction). Sarama
// takes no contexts: its operations are bounded by its own Net and Producer
// timeouts, set from OpTimeout, and the driver stops waiting for one when
// its ctx ends (bounded): sarama's own retries (50 AddPartitionsToTxn tries
// within a SendMessages, each up to a read timeout) can outlast a test's
// stop by minutes.
//
// In a binary built with -race, sarama runs in a child process built
// without it (saramachild.go): sarama itself has a data race on
// transactional retries (IBM/sarama#2913), which would fail our tests.
func Sarama(ctx context.Context, cfg Config) (checker.History, error) {
	if raceEnabled {
		return saramaChild(ctx, cfg)
	}
	return saramaInProcess(ctx, cfg)
}

// saramaInProcess is the sarama driver in this process.
func saramaInProcess(ctx context.Context, cfg Config) (checker.History, error) {
	return run(ctx, cfg, "sarama", newSarama)
}

type saramaClient struct{ p sarama.SyncProducer }

func newSarama(_ context.Context, cfg Config) (txnClient, error) {
	c := sarama.NewConfig()
	c.ClientID = "txncoord-workload-sarama"
	c.Version = sarama.V3_6_0_0
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Transaction.ID = cfg.TransactionalID
	c.Producer.Transaction.Timeout = cfg.TxnTimeout
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Timeout = cfg.OpTimeout
	c.Net.DialTimeout = cfg.OpTimeout
	c.Net.ReadTimeout = cfg.OpTimeout
	c.Net.WriteTimeout = cfg.OpTimeout
	c.Metadata.AllowAutoTopicCreation = false
	if err := cfg.Security.applySarama(c); err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(cfg.Bootstrap, c)
	if err != nil {
		return nil, err
	}
	return &saramaClient{p: p}, nil
}

func (s *saramaClient) begin(ctx context.Context) error {
	return bounded(ctx, "BeginTxn", s.p.BeginTxn)
}

// bounded runs f, a sarama call that takes no context, and returns when f
// does or when ctx ends; then f goes on in the background and the
// workload drops the client (close), so nothing waits for it. A commit
// given up on is recorded with an unknown outcome, a produce given up on
// is followed by an abort, as after any failure.
func bounded(ctx context.Context, what string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sarama %s given up on: %w", what, context.Cause(ctx))
	}
}

// closeTimeout bounds how long close waits for sarama's Close, which
// waits for a call still running.
const closeTimeout = 5 * time.Second

func (s *saramaClient) produce(ctx context.Context, writes []checker.Write) error {
	return bounded(ctx, "SendMessages", func() error { return s.send(writes) })
}

func (s *saramaClient) send(writes []checker.Write) error {
	msgs := make([]*sarama.ProducerMessage, len(writes))
	for i, w := range writes {
		msgs[i] = &sarama.ProducerMessage{Topic: w.Partition.Topic, Partition: w.Partition.Partition, Value: sarama.StringEncoder(w.Value)}
	}
	err := s.p.SendMessages(msgs)
	var errs sarama.ProducerErrors
	if errors.As(err, &errs) && len(errs) > 0 {
		return errs[0].Err
	}
	return err
}

func (s *saramaClient) commit(ctx context.Context) error {
	return bounded(ctx, "CommitTxn", s.p.CommitTxn)
}

func (s *saramaClient) abort(ctx context.Context) error {
	return bounded(ctx, "AbortTxn", s.p.AbortTxn)
}

func (s *saramaClient) close() {
	closed := make(chan struct{})
	go func() { s.p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(closeTimeout):
	}
}
