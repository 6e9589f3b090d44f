package coordclient

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/groupby"
)

// Registration is one partition a Produce needs registered (VerifyOnly
// false, KIP-890 part 2) or verified (VerifyOnly true, part 1).
type Registration struct {
	TxnID      string
	PID        int64
	Epoch      int16
	VerifyOnly bool
	Topic      string
	Partition  int32
	// Code is the coordinator's answer, set by Register:
	// NOT_ENOUGH_REPLICAS when the coordinator could not be reached or
	// the Registrar is closed, REQUEST_TIMED_OUT when Register's ctx
	// ended first.
	Code   int16
	result chan int16
}

func (reg *Registration) key() txnKey {
	return txnKey{reg.TxnID, reg.PID, reg.Epoch, reg.VerifyOnly}
}

type txnKey struct {
	txnID      string
	pid        int64
	epoch      int16
	verifyOnly bool
}

// Registrar batches concurrent registrations into one AddPartitionsToTxn:
// one request is in flight at a time, and everything queued meanwhile goes
// into the next one (as Kafka's AddPartitionsToTxnManager does per
// coordinator node).
//
// Up to maxInFlight requests are in flight at once. The coordinator answers
// a batch only when every transaction in it is registered, and one of them
// may wait for its previous transaction's markers: with a single request
// in flight, every registration queued behind it would wait too (a convoy
// that cost 64 producers 40 ms per transaction).
//
// When requests cost no round trip (Client.Local: the in-process coordinator of
// `txncoord up`), each transaction goes in a request of its own (perTxn), sent by
// the Produce handler's goroutine itself: batching saves nothing there, and
// a batch is answered only when its slowest transaction is registered,
// which at 64 producers held registrations 4 ms (p90 17 ms) behind others.
type Registrar struct {
	coord       Client
	log         zerolog.Logger
	maxInFlight int
	perTxn      bool
	mu          sync.Mutex
	queue       []*Registration
	inFlight    int
	wake        chan struct{}
	stop        chan struct{} // closed (under mu) by close
	stopped     chan struct{}
	senders     sync.WaitGroup
	// ctx bounds every request; close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
}

// DefaultRegistrationsInFlight is the in-flight bound NewRegistrar takes
// for maxInFlight <= 0.
const DefaultRegistrationsInFlight = 16

// NewRegistrar returns a Registrar sending to coord with at most
// maxInFlight requests in flight; Close stops it.
func NewRegistrar(coord Client, maxInFlight int, log zerolog.Logger) *Registrar {
	if maxInFlight <= 0 {
		maxInFlight = DefaultRegistrationsInFlight
	}
	r := &Registrar{coord: coord, log: log, maxInFlight: maxInFlight, perTxn: coord.Local(), wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.loop()
	return r
}

// Register queues regs and waits for their coordinator error codes
// (reg.Code). It does not retry: every answer, retriable or not, is
// the caller's.
func (r *Registrar) Register(ctx context.Context, regs []*Registration) {
	r.mu.Lock()
	for _, reg := range regs {
		reg.result = make(chan int16, 1)
	}
	select {
	case <-r.stop: // closed: nobody would answer
		r.mu.Unlock()
		for _, reg := range regs {
			reg.Code = kerr.NotEnoughReplicas.Code
		}
		return
	default:
	}
	if r.perTxn {
		// Counted before close can wait (both under mu).
		r.senders.Add(1)
		r.mu.Unlock()
		r.sendNow(ctx, regs)
		r.senders.Done()
	} else {
		r.queue = append(r.queue, regs...)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	for _, reg := range regs {
		select {
		case reg.Code = <-reg.result:
		case <-ctx.Done():
			reg.Code = kerr.RequestTimedOut.Code
		}
	}
}

// loop starts a sender for the queue whenever one is free; senders wake it
// when they finish, so what queued meanwhile goes out as the next batch.
func (r *Registrar) loop() {
	defer close(r.stopped)
	for {
		select {
		case <-r.stop:
			r.senders.Wait()
			r.mu.Lock()
			for _, reg := range r.queue {
				reg.result <- kerr.NotEnoughReplicas.Code
			}
			r.queue = nil
			r.mu.Unlock()
			return
		case <-r.wake:
		}
		for {
			batch := r.take()
			if batch == nil {
				break
			}
			r.senders.Add(1)
			go func() {
				defer r.senders.Done()
				r.send(r.ctx, batch)
				r.mu.Lock()
				r.inFlight--
				r.mu.Unlock()
				select {
				case r.wake <- struct{}{}:
				default:
				}
			}()
		}
	}
}

// sendNow sends regs from the caller's goroutine, one request per
// transaction (perTxn); each reg gets its answer on reg.result. ctx is the
// Produce request's: the coordinator's wait for a previous transaction's
// markers (wire.CallerDone) ends with it, and the Registrar's Close comes
// only after the leader's server has drained its Produce handlers.
func (r *Registrar) sendNow(ctx context.Context, regs []*Registration) {
	var byKey groupby.Ordered[txnKey, *Registration]
	for _, reg := range regs {
		byKey.Add(reg.key(), reg)
	}
	for k, regs := range byKey.All() {
		b := &pendingBatch{keyOf: map[string]txnKey{k.txnID: k}}
		b.byKey.Add(k, regs...)
		r.send(ctx, b)
	}
}

// pendingBatch is one request's registrations, grouped per transaction in
// the order they came.
type pendingBatch struct {
	byKey groupby.Ordered[txnKey, *Registration]
	keyOf map[string]txnKey
}

// take removes the next batch from the queue, or returns nil when the
// queue is empty or every sender is busy. A transactional id already in
// the batch with another (pid, epoch, VerifyOnly) waits for the next
// request, since the coordinator answers per transactional id.
func (r *Registrar) take() *pendingBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 || r.inFlight >= r.maxInFlight {
		return nil
	}
	b := &pendingBatch{keyOf: map[string]txnKey{}}
	var later []*Registration
	for _, reg := range r.queue {
		k := reg.key()
		if prev, ok := b.keyOf[reg.TxnID]; ok && prev != k {
			later = append(later, reg)
			continue
		}
		b.keyOf[reg.TxnID] = k
		b.byKey.Add(k, reg)
	}
	r.queue = later
	r.inFlight++
	return b
}

// send sends one batch and answers each registration; parent bounds the
// request (the registrar's context, or the Produce request's for sendNow).
func (r *Registrar) send(parent context.Context, b *pendingBatch) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	for k, regs := range b.byKey.All() {
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = k.txnID, k.pid, k.epoch, k.verifyOnly
		var topics groupby.Ordered[string, int32]
		for _, reg := range regs {
			topics.Add(reg.Topic, reg.Partition)
		}
		for topic, partitions := range topics.All() {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic, rt.Partitions = topic, partitions
			t.Topics = append(t.Topics, rt)
		}
		req.Transactions = append(req.Transactions, t)
	}
	ctx, cancel := context.WithTimeout(parent, 15*time.Second)
	resp, err := r.coord.AddPartitionsToTxn(ctx, req)
	cancel()
	codes := map[txnKey]map[string]map[int32]int16{}
	topLevel := int16(0)
	switch {
	case err != nil:
		r.log.Warn().Err(err).Msg("AddPartitionsToTxn to the coordinator failed")
		topLevel = kerr.NotEnoughReplicas.Code
	case resp.ErrorCode != 0:
		topLevel = resp.ErrorCode
	default:
		for _, t := range resp.Transactions {
			k, ok := b.keyOf[t.TransactionalID]
			if !ok {
				continue
			}
			m := map[string]map[int32]int16{}
			for _, tt := range t.Topics {
				pm := map[int32]int16{}
				for _, p := range tt.Partitions {
					pm[p.Partition] = p.ErrorCode
				}
				m[tt.Topic] = pm
			}
			codes[k] = m
		}
	}
	for k, regs := range b.byKey.All() {
		for _, reg := range regs {
			code := topLevel
			if code == 0 {
				c, ok := codes[k][reg.Topic][reg.Partition]
				if !ok {
					c = kerr.UnknownServerError.Code // the coordinator left the partition out
				}
				code = c
			}
			reg.result <- code
		}
	}
}

// Queued is how many registrations wait for a free sender.
func (r *Registrar) Queued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// Close answers what is queued NOT_ENOUGH_REPLICAS once the requests in
// flight have ended (their context is cancelled), and refuses later
// registrations the same way.
func (r *Registrar) Close() {
	r.mu.Lock()
	close(r.stop)
	r.mu.Unlock()
	r.cancel()
	<-r.stopped
}
