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

// Registrar batches concurrent registrations into one AddPartitionsToTxn
// per coordinator: a request is in flight, and everything queued meanwhile
// for the same coordinator goes into the next one (as Kafka's
// AddPartitionsToTxnManager queues per coordinator node).
//
// Registrations queue per owning coordinator (a lane), as the Client
// knows it when they are queued (ownerClient: Routed; ids whose owner is
// not known yet share a lane of their own), because a request is answered
// only when every coordinator in it has answered: with one queue for all,
// a dead or paused coordinator's ids would be in every request in flight
// and hold the other coordinators' registrations until its own were given
// up. Routed still routes each transaction of a request to its owner of
// the moment, so a lane named by a stale owner costs its registrations
// only that lane's wait.
//
// Up to maxInFlight requests are in flight at once per lane. The
// coordinator answers a batch only when every transaction in it is
// registered, and one of them may wait for its previous transaction's
// markers: with a single request in flight, every registration queued
// behind it would wait too (a convoy that cost 64 producers 40 ms per
// transaction).
//
// When requests cost no round trip (Client.Local: the in-process coordinator of
// `txncoord up`), each transaction goes in a request of its own (perTxn), sent by
// the Produce handler's goroutine itself: batching saves nothing there, and
// a batch is answered only when its slowest transaction is registered,
// which at 64 producers held registrations 4 ms (p90 17 ms) behind others.
type Registrar struct {
	coord       Client
	owners      ownerClient // nil: one lane
	log         zerolog.Logger
	maxInFlight int
	perTxn      bool
	mu          sync.Mutex
	lanes       map[int32]*lane // by owning coordinator (unknownOwner: not known yet)
	wake        chan struct{}
	stop        chan struct{} // closed (under mu) by close
	stopped     chan struct{}
	senders     sync.WaitGroup
	// ctx bounds every request; close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
}

// lane is the registrations queued for one coordinator and its requests
// in flight.
type lane struct {
	queue    []*Registration
	inFlight int
}

// ownerClient is a Client that knows which coordinator owns a
// transactional id (Routed), as far as it has learned.
type ownerClient interface {
	Owner(transactionalID string) (node int32, known bool)
}

// unknownOwner is the lane of the ids whose owner is not known (node ids
// are never negative).
const unknownOwner = -1

// DefaultRegistrationsInFlight is the in-flight bound per coordinator
// NewRegistrar takes for maxInFlight <= 0.
const DefaultRegistrationsInFlight = 16

// NewRegistrar returns a Registrar sending to coord with at most
// maxInFlight requests in flight per coordinator; Close stops it.
func NewRegistrar(coord Client, maxInFlight int, log zerolog.Logger) *Registrar {
	if maxInFlight <= 0 {
		maxInFlight = DefaultRegistrationsInFlight
	}
	r := &Registrar{coord: coord, log: log, maxInFlight: maxInFlight, perTxn: coord.Local(), lanes: map[int32]*lane{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	r.owners, _ = coord.(ownerClient)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.loop()
	return r
}

// Register queues regs and waits for their coordinator error codes
// (reg.Code). It does not retry: every answer, retriable or not, is
// the caller's.
func (r *Registrar) Register(ctx context.Context, regs []*Registration) {
	r.mu.Lock()
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
		// Counted before close can wait (both under mu). Answered on
		// this goroutine: sendNow sets reg.Code itself.
		r.senders.Add(1)
		r.mu.Unlock()
		r.sendNow(ctx, regs)
		r.senders.Done()
		return
	}
	for _, reg := range regs {
		reg.result = make(chan int16, 1)
		node := r.laneOf(reg.TxnID)
		l := r.lanes[node]
		if l == nil {
			l = &lane{}
			r.lanes[node] = l
		}
		l.queue = append(l.queue, reg)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
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
			for _, l := range r.lanes {
				for _, reg := range l.queue {
					reg.result <- kerr.NotEnoughReplicas.Code
				}
				l.queue = nil
			}
			r.mu.Unlock()
			return
		case <-r.wake:
		}
		for {
			l, batch := r.take()
			if batch == nil {
				break
			}
			r.senders.Add(1)
			go func() {
				defer r.senders.Done()
				ctx, cancel := context.WithTimeout(r.ctx, requestTimeout)
				r.send(ctx, batch)
				cancel()
				r.mu.Lock()
				l.inFlight--
				r.mu.Unlock()
				select {
				case r.wake <- struct{}{}:
				default:
				}
			}()
		}
	}
}

// requestTimeout bounds one queued request to a coordinator over TCP. An
// in-process request (perTxn) is bounded by its Produce's context instead:
// it is a call on the caller's goroutine, and the coordinator's own waits
// end with that context (wire.CallerDone).
const requestTimeout = 15 * time.Second

// sendNow sends regs from the caller's goroutine, one request per
// transaction (perTxn), and sets each reg.Code. ctx is the Produce
// request's: the coordinator's wait for a previous transaction's markers
// (wire.CallerDone) ends with it, and the Registrar's Close comes only
// after the leader's server has drained its Produce handlers.
func (r *Registrar) sendNow(ctx context.Context, regs []*Registration) {
	if len(regs) == 0 {
		return
	}
	// One Produce names one transaction: usually every reg has one key.
	k := regs[0].key()
	same := true
	for _, reg := range regs[1:] {
		if reg.key() != k {
			same = false
			break
		}
	}
	if same {
		r.send(ctx, pendingBatch{{key: k, regs: regs}})
		return
	}
	var byKey groupby.Ordered[txnKey, *Registration]
	for _, reg := range regs {
		byKey.Add(reg.key(), reg)
	}
	for k, regs := range byKey.All() {
		r.send(ctx, pendingBatch{{key: k, regs: regs}})
	}
}

// pendingBatch is one request's registrations, grouped per transaction in
// the order they came; each transactional id appears once.
type pendingBatch []regGroup

// regGroup is one transaction's registrations in a request.
type regGroup struct {
	key  txnKey
	regs []*Registration
}

// laneOf is the lane of a transactional id: its owner as the Client
// knows it now.
func (r *Registrar) laneOf(transactionalID string) int32 {
	if r.owners == nil {
		return unknownOwner
	}
	if node, ok := r.owners.Owner(transactionalID); ok {
		return node
	}
	return unknownOwner
}

// take removes the next batch from a lane with registrations queued and a
// request free, or returns nil when there is none. A transactional id
// already in the batch with another (pid, epoch, VerifyOnly) waits for the
// next request, since the coordinator answers per transactional id.
func (r *Registrar) take() (*lane, pendingBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lanes {
		if len(l.queue) > 0 && l.inFlight < r.maxInFlight {
			return l, l.take()
		}
	}
	return nil, nil
}

// take removes the next batch from l's queue and counts it in flight
// (under the Registrar's mu).
func (l *lane) take() pendingBatch {
	var b pendingBatch
	at := map[string]int{} // transactional id → its group in b
	var later []*Registration
	for _, reg := range l.queue {
		k := reg.key()
		i, ok := at[reg.TxnID]
		switch {
		case ok && b[i].key != k:
			later = append(later, reg)
		case ok:
			b[i].regs = append(b[i].regs, reg)
		default:
			at[reg.TxnID] = len(b)
			b = append(b, regGroup{key: k, regs: []*Registration{reg}})
		}
	}
	l.queue = later
	l.inFlight++
	return b
}

// send sends one batch and answers each registration; ctx bounds the
// request.
func (r *Registrar) send(ctx context.Context, b pendingBatch) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Transactions = make([]kmsg.AddPartitionsToTxnRequestTransaction, len(b))
	for i, g := range b {
		t := &req.Transactions[i]
		t.Default()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = g.key.txnID, g.key.pid, g.key.epoch, g.key.verifyOnly
		for _, reg := range g.regs {
			t.Topics = addPartition(t.Topics, reg.Topic, reg.Partition)
		}
	}
	resp, err := r.coord.AddPartitionsToTxn(ctx, req)
	topLevel := int16(0)
	var answered map[string]*kmsg.AddPartitionsToTxnResponseTransaction // built for large batches only
	switch {
	case err != nil:
		r.log.Warn().Err(err).Msg("AddPartitionsToTxn to the coordinator failed")
		topLevel = kerr.NotEnoughReplicas.Code
	case resp.ErrorCode != 0:
		topLevel = resp.ErrorCode
	case len(resp.Transactions) > 8:
		answered = make(map[string]*kmsg.AddPartitionsToTxnResponseTransaction, len(resp.Transactions))
		for i := range resp.Transactions {
			answered[resp.Transactions[i].TransactionalID] = &resp.Transactions[i]
		}
	}
	for _, g := range b {
		var t *kmsg.AddPartitionsToTxnResponseTransaction
		if topLevel == 0 {
			if answered != nil {
				t = answered[g.key.txnID]
			} else {
				for i := range resp.Transactions {
					if resp.Transactions[i].TransactionalID == g.key.txnID {
						t = &resp.Transactions[i]
						break
					}
				}
			}
		}
		for _, reg := range g.regs {
			code := topLevel
			if code == 0 {
				code = partitionCode(t, reg.Topic, reg.Partition)
			}
			reg.answer(code)
		}
	}
}

// addPartition adds one partition to a request transaction's topics,
// keeping the topics in first-seen order.
func addPartition(topics []kmsg.AddPartitionsToTxnRequestTransactionTopic, topic string, partition int32) []kmsg.AddPartitionsToTxnRequestTransactionTopic {
	for i := range topics {
		if topics[i].Topic == topic {
			topics[i].Partitions = append(topics[i].Partitions, partition)
			return topics
		}
	}
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	return append(topics, rt)
}

// partitionCode is the coordinator's answer for one partition of t (nil:
// the transaction was left out), UNKNOWN_SERVER_ERROR when it left the
// partition out.
func partitionCode(t *kmsg.AddPartitionsToTxnResponseTransaction, topic string, partition int32) int16 {
	if t != nil {
		for _, tt := range t.Topics {
			if tt.Topic != topic {
				continue
			}
			for _, p := range tt.Partitions {
				if p.Partition == partition {
					return p.ErrorCode
				}
			}
		}
	}
	return kerr.UnknownServerError.Code
}

// answer gives reg its code: on its channel when it was queued, directly
// when its own goroutine sent it (sendNow).
func (reg *Registration) answer(code int16) {
	if reg.result != nil {
		reg.result <- code
		return
	}
	reg.Code = code
}

// Queued is how many registrations wait for a free sender.
func (r *Registrar) Queued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lanes {
		n += len(l.queue)
	}
	return n
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
