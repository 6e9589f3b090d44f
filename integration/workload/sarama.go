package workload

import (
	"context"
	"errors"

	"github.com/IBM/sarama"

	"github.com/txncoord/txncoord/integration/checker"
)

// Sarama runs the workload with IBM/sarama's transactional producer (TV0:
// AddPartitionsToTxn v3, EndTxn v3, no epoch bump per transaction). Sarama
// takes no contexts: its operations are bounded by its own Net and Producer
// timeouts, set from OpTimeout.
func Sarama(ctx context.Context, cfg Config) (checker.History, error) {
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

func (s *saramaClient) begin(context.Context) error { return s.p.BeginTxn() }

func (s *saramaClient) produce(_ context.Context, writes []checker.Write) error {
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

func (s *saramaClient) commit(context.Context) error { return s.p.CommitTxn() }
func (s *saramaClient) abort(context.Context) error  { return s.p.AbortTxn() }
func (s *saramaClient) close()                       { s.p.Close() }
