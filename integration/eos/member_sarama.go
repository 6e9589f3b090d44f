package eos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// runSarama is sarama's EOS loop: a consumer group (read_committed, no
// auto-commit) and a transactional producer (TV1: AddPartitionsToTxn,
// EndTxn v3); each transaction produces the batch of one claim and adds the
// claim's next offset with AddMessageToTxnWithGroupMetadata
// (AddOffsetsToTxn + TxnOffsetCommit v3 with the session's generation and
// member id), then CommitTxn.
//
// Sarama cannot rewind a claim: after an abort the session is ended (its
// context canceled) and joined again, so the group's committed offset,
// fetched with RequireStable, is where consumption resumes. That is a
// rebalance per abort, so sarama runs with few aborts.
func runSarama(ctx context.Context, m *member) error {
	c := sarama.NewConfig()
	c.ClientID = "eos-" + m.cfg.Name
	c.Version = sarama.V3_6_0_0
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Group.Session.Timeout = m.cfg.SessionTimeout
	c.Consumer.Group.Heartbeat.Interval = time.Second
	c.Consumer.Group.Rebalance.Timeout = 15 * time.Second
	c.Consumer.MaxWaitTime = 500 * time.Millisecond
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Transaction.ID = m.cfg.TxnID
	c.Producer.Transaction.Timeout = m.cfg.TxnTimeout
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Net.MaxOpenRequests = 1
	c.Metadata.AllowAutoTopicCreation = false

	producer, err := sarama.NewSyncProducer(m.cfg.Bootstrap, c)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer producer.Close()
	group, err := sarama.NewConsumerGroup(m.cfg.Bootstrap, m.cfg.Group, c)
	if err != nil {
		return fmt.Errorf("consumer group: %w", err)
	}
	defer group.Close()
	go func() {
		for err := range group.Errors() {
			fmt.Fprintf(os.Stderr, "sarama group: %v\n", err)
		}
	}()
	h := &saramaHandler{m: m, producer: producer}
	for ctx.Err() == nil {
		sessCtx, cancel := context.WithCancel(ctx)
		h.cancel = cancel
		err := group.Consume(sessCtx, []string{m.cfg.From}, h)
		cancel()
		if h.fatal != nil {
			return h.fatal
		}
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return err
			}
			fmt.Fprintf(os.Stderr, "consume: %v\n", err)
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

type saramaHandler struct {
	m        *member
	producer sarama.SyncProducer
	cancel   context.CancelFunc
	mu       sync.Mutex // one transaction at a time across claims
	fatal    error
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.m.assigned(s.GenerationID(), s.Claims()[h.m.cfg.From])
	return nil
}

func (h *saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	h.m.revoked(s.Claims()[h.m.cfg.From])
	return nil
}

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		var batch []*sarama.ConsumerMessage
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, msg)
		case <-s.Context().Done():
			return nil
		}
	fill:
		for len(batch) < h.m.cfg.BatchMax {
			select {
			case msg, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				batch = append(batch, msg)
			case <-time.After(20 * time.Millisecond):
				break fill
			}
		}
		if s.Context().Err() != nil {
			return nil // revoked while batching: nothing was produced
		}
		if !h.transact(s, batch) {
			h.cancel() // rewind by joining again
			return nil
		}
	}
}

// transact runs one transaction for a batch of one claim; false means it
// did not commit and the session must end so consumption rewinds.
func (h *saramaHandler) transact(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fatal != nil {
		return false
	}
	m := h.m
	if err := h.producer.BeginTxn(); err != nil {
		h.fatal = fmt.Errorf("begin: %w", err)
		return false
	}
	id := m.nextID()
	in := make([]Consumed, len(batch))
	for i, msg := range batch {
		in[i] = Consumed{P: msg.Partition, O: msg.Offset, V: string(msg.Value)}
	}
	out, err := m.begin(id, in)
	if err != nil {
		h.fatal = err
		return false
	}
	msgs := make([]*sarama.ProducerMessage, len(out))
	for i, o := range out {
		msgs[i] = &sarama.ProducerMessage{Topic: m.cfg.To, Partition: o.P, Value: sarama.StringEncoder(o.V)}
	}
	err = h.producer.SendMessages(msgs)
	if err == nil {
		meta := &sarama.ConsumerGroupMetadata{GroupID: m.cfg.Group, GenerationID: s.GenerationID(), MemberID: s.MemberID()}
		err = h.producer.AddMessageToTxnWithGroupMetadata(batch[len(batch)-1], meta, nil)
	}
	if err != nil || m.abortNow() {
		abortErr := h.producer.AbortTxn()
		m.end(id, "aborted", err)
		if abortErr != nil {
			h.fatal = fmt.Errorf("abort: %w", abortErr)
		}
		return false
	}
	if err := m.committing(id); err != nil {
		h.fatal = err
		return false
	}
	if err := h.producer.CommitTxn(); err != nil {
		m.end(id, "unknown", err)
		h.fatal = fmt.Errorf("commit: %w", err)
		return false
	}
	m.end(id, "committed", nil)
	return true
}
