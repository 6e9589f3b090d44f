package eos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// runConfluent is librdkafka's EOS loop (confluent-kafka-go): a consumer
// subscribed with an eager rebalance callback (read_committed, no
// auto-commit) and a transactional producer (TV1); each transaction
// produces a batch, SendOffsetsToTransaction with the consumer's group
// metadata (TxnOffsetCommit with generation and member id), then
// CommitTransaction. After an abort the consumer seeks back to the
// committed offsets, as librdkafka's transactions example does.
func runConfluent(ctx context.Context, m *member) error {
	boot := strings.Join(m.cfg.Bootstrap, ",")
	consumerConf := &kafka.ConfigMap{
		"bootstrap.servers":      boot,
		"client.id":              "eos-" + m.cfg.Name,
		"group.id":               m.cfg.Group,
		"auto.offset.reset":      "earliest",
		"enable.auto.commit":     false,
		"isolation.level":        "read_committed",
		"session.timeout.ms":     int(m.cfg.SessionTimeout.Milliseconds()),
		"heartbeat.interval.ms":  1000,
		"fetch.wait.max.ms":      500,
		"go.logs.channel.enable": true,
		"log_level":              4,
	}
	// EOS_RDKAFKA_DEBUG: librdkafka's debug contexts for the consumer
	// (e.g. cgrp,topic,fetch), every line to the member's log.
	rdDebug := os.Getenv("EOS_RDKAFKA_DEBUG")
	if rdDebug != "" {
		consumerConf.SetKey("debug", rdDebug)
		consumerConf.SetKey("log_level", 7)
	}
	consumer, err := kafka.NewConsumer(consumerConf)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	producer, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":      boot,
		"client.id":              "eos-" + m.cfg.Name,
		"transactional.id":       m.cfg.TxnID,
		"enable.idempotence":     true,
		"acks":                   "all",
		"transaction.timeout.ms": int(m.cfg.TxnTimeout.Milliseconds()),
		"go.logs.channel.enable": true,
		"log_level":              4,
	})
	if err != nil {
		consumer.Close()
		return fmt.Errorf("producer: %w", err)
	}
	drainLogs := func(name string, logs chan kafka.LogEvent) {
		for l := range logs {
			if os.Getenv("EOS_VERBOSE") != "" || rdDebug != "" || l.Level <= 4 {
				fmt.Fprintf(os.Stderr, "%s %s: %s\n", name, l.Tag, l.Message)
			}
		}
	}
	go drainLogs("consumer", consumer.Logs())
	go drainLogs("producer", producer.Logs())
	go func() {
		for ev := range producer.Events() {
			if e, ok := ev.(kafka.Error); ok {
				fmt.Fprintf(os.Stderr, "producer error event: %v\n", e)
			}
		}
	}()
	defer func() {
		producer.Close()
		consumer.Close()
	}()
	initCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = producer.InitTransactions(initCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("init transactions: %w", err)
	}

	rebalanced := false
	err = consumer.SubscribeTopics([]string{m.cfg.From}, func(c *kafka.Consumer, ev kafka.Event) error {
		rebalanced = true
		switch e := ev.(type) {
		case kafka.AssignedPartitions:
			m.assigned(-1, partitionsOf(e.Partitions))
			// Not c.Assign(e.Partitions): see confluent_offsets.go.
			return AssignCommitted(c, e.Partitions, committedTimeoutMs)
		case kafka.RevokedPartitions:
			m.revoked(partitionsOf(e.Partitions))
			return c.Unassign()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	rewind := func() error {
		parts, err := consumer.Assignment()
		if err != nil || len(parts) == 0 {
			return err
		}
		committed, err := CommittedPositions(consumer, parts, committedTimeoutMs)
		if err != nil {
			return err
		}
		for _, tp := range committed {
			if err := consumer.Seek(tp, -1); err != nil {
				return fmt.Errorf("seek %v: %w", tp, err)
			}
		}
		return nil
	}
	opCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	}
	for ctx.Err() == nil {
		// Collect a batch; a rebalance while collecting drops it (the
		// eager protocol re-fetches committed offsets on assignment).
		rebalanced = false
		var batch []*kafka.Message
		deadline := time.Now().Add(time.Second)
		for len(batch) < m.cfg.BatchMax && time.Now().Before(deadline) && ctx.Err() == nil {
			ev := consumer.Poll(100)
			switch e := ev.(type) {
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					fmt.Fprintf(os.Stderr, "consume: %v\n", e.TopicPartition.Error)
					continue
				}
				batch = append(batch, e)
			case kafka.Error:
				fmt.Fprintf(os.Stderr, "consumer error: %v\n", e)
			case nil:
				if len(batch) > 0 {
					deadline = time.Now() // drained what was fetched
				}
			}
			if rebalanced {
				batch = nil
				rebalanced = false
			}
		}
		if len(batch) == 0 || ctx.Err() != nil {
			continue
		}
		if err := producer.BeginTransaction(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		id := m.nextID()
		in := make([]Consumed, len(batch))
		next := map[int32]int64{}
		for i, msg := range batch {
			in[i] = Consumed{P: msg.TopicPartition.Partition, O: int64(msg.TopicPartition.Offset), V: string(msg.Value)}
			next[msg.TopicPartition.Partition] = int64(msg.TopicPartition.Offset) + 1
		}
		out, err := m.begin(id, in)
		if err != nil {
			return err
		}
		octx, cancel := opCtx()
		err = confluentProduce(octx, producer, m.cfg.To, out)
		if err == nil {
			var offsets []kafka.TopicPartition
			for p, o := range next {
				offsets = append(offsets, kafka.TopicPartition{Topic: &m.cfg.From, Partition: p, Offset: kafka.Offset(o)})
			}
			var meta *kafka.ConsumerGroupMetadata
			if meta, err = consumer.GetConsumerGroupMetadata(); err == nil {
				err = producer.SendOffsetsToTransaction(octx, offsets, meta)
			}
		}
		if err != nil || m.abortNow() {
			abortErr := producer.AbortTransaction(octx)
			cancel()
			m.end(id, "aborted", err)
			if abortErr != nil {
				return fmt.Errorf("abort: %w", abortErr)
			}
			if err := rewind(); err != nil {
				return err
			}
			continue
		}
		if err := m.committing(id); err != nil {
			cancel()
			return err
		}
		err = producer.CommitTransaction(octx)
		if err != nil {
			if ke, ok := err.(kafka.Error); ok && ke.TxnRequiresAbort() {
				// librdkafka wants an abort before anything else;
				// whether the commit reached the coordinator is
				// still unknown, so the outcome stays unknown.
				producer.AbortTransaction(octx)
			}
			cancel()
			m.end(id, "unknown", err)
			return fmt.Errorf("commit: %w", err)
		}
		cancel()
		m.end(id, "committed", nil)
	}
	return nil
}

// committedTimeoutMs bounds a wait for stable committed offsets: past the
// transaction timeout, by which a dead producer's pending offsets are
// aborted.
const committedTimeoutMs = 60_000

func partitionsOf(tps []kafka.TopicPartition) []int32 {
	out := make([]int32, len(tps))
	for i, tp := range tps {
		out[i] = tp.Partition
	}
	return out
}

func confluentProduce(ctx context.Context, p *kafka.Producer, topic string, out []Produced) error {
	delivered := make(chan kafka.Event, len(out))
	for _, o := range out {
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: o.P}, Value: []byte(o.V)}
		if err := p.Produce(msg, delivered); err != nil {
			return err
		}
	}
	for range out {
		select {
		case ev := <-delivered:
			if m, ok := ev.(*kafka.Message); !ok {
				return fmt.Errorf("unexpected delivery event %v", ev)
			} else if m.TopicPartition.Error != nil {
				return m.TopicPartition.Error
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
