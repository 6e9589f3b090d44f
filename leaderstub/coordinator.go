package leaderstub

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// CoordinatorClient is how a leader talks to the transaction coordinator,
// over the Kafka protocol as a real broker does. Tests use an in-memory twin.
type CoordinatorClient interface {
	// AddPartitionsToTxn sends a broker-to-coordinator request (v4/v5 batched form, VerifyOnly per transaction).
	AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
	// InitProducerID forwards an idempotent (null transactional id) InitProducerId.
	InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error)
}

// DialCoordinator returns a CoordinatorClient over wire.Client to addr that
// (re)connects lazily, does ApiVersions on each connect and sends each
// request at min(kmsg max, the coordinator's advertised max).
func DialCoordinator(addr string, log zerolog.Logger) CoordinatorClient {
	return DialCoordinatorWith(addr, wire.DialConfig{}, log)
}

// DialCoordinatorWith is DialCoordinator over TLS and SASL as dc says: with
// security on, leaders authenticate to the coordinator as the cluster
// principal, which AddPartitionsToTxn v4+ requires.
func DialCoordinatorWith(addr string, dc wire.DialConfig, log zerolog.Logger) CoordinatorClient {
	return &dialedCoordinator{addr: addr, dial: dc, log: log.With().Str("coordinator", addr).Logger()}
}

// CoordinatorFunc returns a CoordinatorClient over do, a function that
// sends a request to the coordinator at the version it negotiates itself
// (wire.LocalClient.Do: the embedded cluster's in-process path). Like
// DialCoordinator it learns the coordinator's versions with an ApiVersions
// sent through do (again after any error, as a reconnect renegotiates) and
// refuses, without sending it, an AddPartitionsToTxn the coordinator cannot
// take at v4+ (the broker-to-coordinator form). Errors from do reach the
// registrar and the InitProducerId forward as a dial error would: retriable.
func CoordinatorFunc(do func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)) CoordinatorClient {
	return &funcCoordinator{do: do}
}

type funcCoordinator struct {
	do       func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	versions atomic.Pointer[map[int16][2]int16] // nil until ApiVersions answered
}

// requestsAreCheap tells the registrar a request costs no round trip
// (see registrar.perTxn).
func (f *funcCoordinator) requestsAreCheap() bool { return true }

func (f *funcCoordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp, err := f.send(ctx, req, 4)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AddPartitionsToTxnResponse), nil
}

func (f *funcCoordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	resp, err := f.send(ctx, req, 0)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.InitProducerIDResponse), nil
}

func (f *funcCoordinator) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	resp, err := f.send(ctx, req, findCoordinatorBatchedVersion)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FindCoordinatorResponse), nil
}

// coordinatorFinder is the optional method of a CoordinatorClient that
// Routed needs to learn which coordinator owns a transactional id; both
// clients of this package have it. req is in the batched form
// (CoordinatorKeys), sent at v4 or above.
type coordinatorFinder interface {
	findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error)
}

// findCoordinatorBatchedVersion is the first FindCoordinator version with
// CoordinatorKeys (KIP-699).
const findCoordinatorBatchedVersion = 4

func (f *funcCoordinator) send(ctx context.Context, req kmsg.Request, minVersion int16) (kmsg.Response, error) {
	versions := f.versions.Load()
	if versions == nil {
		raw, err := f.do(ctx, kmsg.NewPtrApiVersionsRequest())
		if err != nil {
			return nil, fmt.Errorf("leaderstub: coordinator ApiVersions: %w", err)
		}
		av, ok := raw.(*kmsg.ApiVersionsResponse)
		if !ok || av.ErrorCode != 0 {
			return nil, fmt.Errorf("leaderstub: coordinator ApiVersions: unexpected answer %v", raw)
		}
		m := make(map[int16][2]int16, len(av.ApiKeys))
		for _, k := range av.ApiKeys {
			m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		versions = &m
		f.versions.Store(versions)
	}
	rng, ok := (*versions)[req.Key()]
	if !ok || min(req.MaxVersion(), rng[1]) < max(rng[0], minVersion) {
		return nil, fmt.Errorf("leaderstub: coordinator does not support %s v%d+: %w", kmsg.NameForKey(req.Key()), minVersion, kerr.UnsupportedVersion)
	}
	resp, err := f.do(ctx, req)
	if err != nil {
		f.versions.CompareAndSwap(versions, nil)
		return nil, err
	}
	if resp == nil || resp.Key() != req.Key() || req.GetVersion() < minVersion {
		return nil, fmt.Errorf("leaderstub: coordinator answered %s v%d with %v", kmsg.NameForKey(req.Key()), req.GetVersion(), resp)
	}
	return resp, nil
}

// dialedCoordinator keeps a small pool of connections: wire.Client runs one
// request at a time, and the registrar keeps several AddPartitionsToTxn in
// flight (one batch waiting for a previous transaction's markers must not
// hold up the registrations queued behind it).
type dialedCoordinator struct {
	addr string
	dial wire.DialConfig
	log  zerolog.Logger

	mu     sync.Mutex
	idle   []*coordConn
	closed bool // set by Close: no new connection, none kept
}

// coordConn is one connection and the versions its ApiVersions advertised.
type coordConn struct {
	cl       *wire.Client
	versions map[int16][2]int16
}

// maxIdleCoordConns bounds the idle pool; connections beyond it are closed.
const maxIdleCoordConns = DefaultRegistrationsInFlight

func (d *dialedCoordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	// v4 is the first broker-to-coordinator (batched) version.
	resp, err := d.do(ctx, req, 4)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AddPartitionsToTxnResponse), nil
}

func (d *dialedCoordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	resp, err := d.do(ctx, req, 0)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.InitProducerIDResponse), nil
}

func (d *dialedCoordinator) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	resp, err := d.do(ctx, req, findCoordinatorBatchedVersion)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FindCoordinatorResponse), nil
}

// Close closes the idle connections; a connection in use is closed when
// its request ends, and later requests fail without dialing.
func (d *dialedCoordinator) Close() error {
	d.mu.Lock()
	idle := d.idle
	d.idle, d.closed = nil, true
	d.mu.Unlock()
	for _, cc := range idle {
		cc.cl.Close()
	}
	return nil
}

func (d *dialedCoordinator) do(ctx context.Context, req kmsg.Request, minVersion int16) (kmsg.Response, error) {
	cc, err := d.get(ctx)
	if err != nil {
		return nil, err
	}
	rng, ok := cc.versions[req.Key()]
	version := min(req.MaxVersion(), rng[1])
	if !ok || version < max(rng[0], minVersion) {
		d.put(cc)
		return nil, fmt.Errorf("leaderstub: coordinator does not support %s v%d+: %w", kmsg.NameForKey(req.Key()), minVersion, kerr.UnsupportedVersion)
	}
	req.SetVersion(version)
	resp, err := cc.cl.Do(ctx, req)
	if err != nil {
		// This connection is dropped; the next request dials again and
		// renegotiates.
		cc.cl.Close()
		return nil, err
	}
	d.put(cc)
	return resp, nil
}

// get takes an idle connection or dials a new one (ApiVersions first).
func (d *dialedCoordinator) get(ctx context.Context) (*coordConn, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("leaderstub: coordinator client %s closed", d.addr)
	}
	if n := len(d.idle); n > 0 {
		cc := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		return cc, nil
	}
	d.mu.Unlock()
	cl, err := wire.DialWith(ctx, d.addr, cluster.LeaderClientID, d.dial)
	if err != nil {
		return nil, fmt.Errorf("leaderstub: dial coordinator %s: %w", d.addr, err)
	}
	av, err := cl.ApiVersions(ctx)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("leaderstub: coordinator ApiVersions: %w", err)
	}
	cc := &coordConn{cl: cl, versions: map[int16][2]int16{}}
	for _, k := range av.ApiKeys {
		cc.versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	d.log.Debug().Msg("connected to coordinator")
	return cc, nil
}

func (d *dialedCoordinator) put(cc *coordConn) {
	d.mu.Lock()
	if !d.closed && len(d.idle) < maxIdleCoordConns {
		d.idle = append(d.idle, cc)
		cc = nil
	}
	d.mu.Unlock()
	if cc != nil {
		cc.cl.Close()
	}
}

// registration is one partition a Produce needs registered (VerifyOnly
// false, KIP-890 part 2) or verified (VerifyOnly true, part 1).
type registration struct {
	txnID      string
	pid        int64
	epoch      int16
	verifyOnly bool
	topic      string
	partition  int32
	result     chan int16
	code       int16 // the coordinator's answer, set by register
}

type txnKey struct {
	txnID      string
	pid        int64
	epoch      int16
	verifyOnly bool
}

// registrar batches concurrent registrations into one AddPartitionsToTxn:
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
// When requests cost no round trip (the in-process coordinator of `txncoord
// up`), each transaction goes in a request of its own (perTxn), sent by
// the Produce handler's goroutine itself: batching saves nothing there, and
// a batch is answered only when its slowest transaction is registered,
// which at 64 producers held registrations 4 ms (p90 17 ms) behind others.
type registrar struct {
	coord       CoordinatorClient
	log         zerolog.Logger
	maxInFlight int
	perTxn      bool
	mu          sync.Mutex
	queue       []*registration
	inFlight    int
	wake        chan struct{}
	stop        chan struct{} // closed (under mu) by close
	stopped     chan struct{}
	senders     sync.WaitGroup
	// ctx bounds every request; close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// requests counts AddPartitionsToTxn requests sent (tests).
	requests int
}

// DefaultRegistrationsInFlight is the default of Config.RegistrationsInFlight.
const DefaultRegistrationsInFlight = 16

func newRegistrar(coord CoordinatorClient, maxInFlight int, log zerolog.Logger) *registrar {
	if maxInFlight <= 0 {
		maxInFlight = DefaultRegistrationsInFlight
	}
	cheap, _ := coord.(interface{ requestsAreCheap() bool })
	perTxn := cheap != nil && cheap.requestsAreCheap()
	r := &registrar{coord: coord, log: log, maxInFlight: maxInFlight, perTxn: perTxn, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.loop()
	return r
}

// register queues regs and waits for their coordinator error codes
// (reg.code).
func (r *registrar) register(ctx context.Context, regs []*registration) {
	r.mu.Lock()
	for _, reg := range regs {
		reg.result = make(chan int16, 1)
	}
	select {
	case <-r.stop: // closed: nobody would answer
		r.mu.Unlock()
		for _, reg := range regs {
			reg.code = kerr.NotEnoughReplicas.Code
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
		case reg.code = <-reg.result:
		case <-ctx.Done():
			reg.code = kerr.RequestTimedOut.Code
		}
	}
}

// loop starts a sender for the queue whenever one is free; senders wake it
// when they finish, so what queued meanwhile goes out as the next batch.
func (r *registrar) loop() {
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
// markers (wire.CallerDone) ends with it, and the registrar's close comes
// only after the leader's server has drained its Produce handlers.
func (r *registrar) sendNow(ctx context.Context, regs []*registration) {
	byKey := map[txnKey][]*registration{}
	var order []txnKey
	for _, reg := range regs {
		k := txnKey{reg.txnID, reg.pid, reg.epoch, reg.verifyOnly}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], reg)
	}
	for _, k := range order {
		r.mu.Lock()
		r.requests++
		r.mu.Unlock()
		r.send(ctx, &pendingBatch{byKey: map[txnKey][]*registration{k: byKey[k]}, keyOf: map[string]txnKey{k.txnID: k}, order: []txnKey{k}})
	}
}

// pendingBatch is one request's registrations, grouped per transaction.
type pendingBatch struct {
	byKey map[txnKey][]*registration
	keyOf map[string]txnKey
	order []txnKey
}

// take removes the next batch from the queue, or returns nil when the
// queue is empty or every sender is busy. A transactional id already in
// the batch with another (pid, epoch, VerifyOnly) waits for the next
// request, since the coordinator answers per transactional id.
func (r *registrar) take() *pendingBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 || r.inFlight >= r.maxInFlight {
		return nil
	}
	byKey := map[txnKey][]*registration{}
	keyOf := map[string]txnKey{}
	var order []txnKey
	var later []*registration
	for _, reg := range r.queue {
		k := txnKey{reg.txnID, reg.pid, reg.epoch, reg.verifyOnly}
		if prev, ok := keyOf[reg.txnID]; ok && prev != k {
			later = append(later, reg)
			continue
		}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
			keyOf[reg.txnID] = k
		}
		byKey[k] = append(byKey[k], reg)
	}
	r.queue = later
	r.requests++
	r.inFlight++
	return &pendingBatch{byKey: byKey, keyOf: keyOf, order: order}
}

// send sends one batch and answers each registration; parent bounds the
// request (the registrar's context, or the Produce request's for sendNow).
func (r *registrar) send(parent context.Context, b *pendingBatch) {
	byKey, keyOf, order := b.byKey, b.keyOf, b.order
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	for _, k := range order {
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = k.txnID, k.pid, k.epoch, k.verifyOnly
		topics := map[string]int{}
		for _, reg := range byKey[k] {
			i, ok := topics[reg.topic]
			if !ok {
				i = len(t.Topics)
				topics[reg.topic] = i
				rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
				rt.Topic = reg.topic
				t.Topics = append(t.Topics, rt)
			}
			t.Topics[i].Partitions = append(t.Topics[i].Partitions, reg.partition)
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
			k, ok := keyOf[t.TransactionalID]
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
	for k, regs := range byKey {
		for _, reg := range regs {
			code := topLevel
			if code == 0 {
				c, ok := codes[k][reg.topic][reg.partition]
				if !ok {
					c = kerr.UnknownServerError.Code // the coordinator left the partition out
				}
				code = c
			}
			reg.result <- code
		}
	}
}

func (r *registrar) close() {
	r.mu.Lock()
	close(r.stop)
	r.mu.Unlock()
	r.cancel()
	<-r.stopped
}

// verifyError maps a coordinator answer to the Produce partition error,
// as Kafka's AddPartitionsToTxnManager does: PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE is INVALID_TXN_STATE before
// Produce v11, and an unreachable or moving coordinator is the retriable
// NOT_ENOUGH_REPLICAS.
func verifyError(code int16, produceVersion int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		if produceVersion < 11 {
			return kerr.InvalidTxnState.Code
		}
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}
