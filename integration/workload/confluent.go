package workload

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/txncoord/txncoord/integration/checker"
)

// Confluent runs the workload with confluent-kafka-go (librdkafka 2.11.1
// inside, built with cgo): TV0 transactions (AddPartitionsToTxn v0, EndTxn
// v1).
func Confluent(ctx context.Context, cfg Config) (checker.History, error) {
	return run(ctx, cfg, "confluent", newConfluent)
}

type confluentClient struct {
	p      *kafka.Producer
	events sync.WaitGroup // the goroutine draining p.Events()
}

func newConfluent(ctx context.Context, cfg Config) (txnClient, error) {
	conf := kafka.ConfigMap{
		"bootstrap.servers":      strings.Join(cfg.Bootstrap, ","),
		"client.id":              "txncoord-workload-confluent",
		"transactional.id":       cfg.TransactionalID,
		"enable.idempotence":     true,
		"acks":                   "all",
		"transaction.timeout.ms": int(cfg.TxnTimeout.Milliseconds()),
		"message.timeout.ms":     int(cfg.OpTimeout.Milliseconds()),
		"socket.timeout.ms":      int(cfg.OpTimeout.Milliseconds()),
		// librdkafka's own log lines go to the events channel, which
		// is drained below, instead of stderr.
		"go.logs.channel.enable": true,
		"log_level":              4,
	}
	if err := cfg.Security.applyConfluent(conf); err != nil {
		return nil, err
	}
	p, err := kafka.NewProducer(&conf)
	if err != nil {
		return nil, err
	}
	c := &confluentClient{p: p}
	c.events.Add(2)
	// Producer-level events (errors, stats) and logs must be read or
	// librdkafka's queues fill; both channels close in p.Close.
	go func() {
		defer c.events.Done()
		for ev := range p.Events() {
			if e, ok := ev.(kafka.Error); ok {
				cfg.Log.Warn().Str("client", "confluent").Str("txn_id", cfg.TransactionalID).Err(e).Msg("librdkafka error event")
			}
		}
	}()
	go func() {
		defer c.events.Done()
		for range p.Logs() {
		}
	}()
	if err := p.InitTransactions(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *confluentClient) begin(context.Context) error { return c.p.BeginTransaction() }

func (c *confluentClient) produce(ctx context.Context, writes []checker.Write) error {
	delivered := make(chan kafka.Event, len(writes))
	for _, w := range writes {
		topic := w.Partition.Topic
		msg := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: w.Partition.Partition},
			Value:          []byte(w.Value),
		}
		if err := c.p.Produce(msg, delivered); err != nil {
			return err
		}
	}
	for range writes {
		select {
		case ev := <-delivered:
			m, ok := ev.(*kafka.Message)
			if !ok {
				return fmt.Errorf("workload: unexpected delivery event %v", ev)
			}
			if m.TopicPartition.Error != nil {
				return m.TopicPartition.Error
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *confluentClient) commit(ctx context.Context) error { return c.p.CommitTransaction(ctx) }
func (c *confluentClient) abort(ctx context.Context) error  { return c.p.AbortTransaction(ctx) }

func (c *confluentClient) close() {
	c.p.Close()
	c.events.Wait()
}
