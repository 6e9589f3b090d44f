package coordclient

// Routed: a Client over several coordinators.
//
// Each transactional id belongs to one __transaction_state partition
// (cluster.TransactionPartitionFor), owned by one coordinator at a time
// through etcd; any coordinator answers FindCoordinator (key type 1) with
// the current owner. Routed keeps the owner of each partition it has seen,
// learns unknown ones with one batched FindCoordinator, and follows moves:
// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a transport error make it
// forget what it knew and ask again.
//
// Where it differs from Kafka's AddPartitionsToTxnManager, and why:
//   - Kafka's manager answers NOT_COORDINATOR to the producer at once and
//     refreshes its metadata in the background; Routed retries a part
//     itself a few times (routedAttempts, with a short backoff, bounded by
//     the caller's ctx) first, since a takeover is usually visible in
//     FindCoordinator within a lease TTL and a retry here is cheaper than
//     the producer's. What still fails is answered with the last code, a
//     retriable one for the producer (a leader answers it NOT_ENOUGH_REPLICAS).
//   - With one coordinator it is that coordinator's client, unchanged (no
//     FindCoordinator, no retries), so a single-coordinator cluster behaves
//     as before.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// RoutedConfig configures NewRouted.
type RoutedConfig struct {
	Coordinators map[int32]Client // one client per coordinator node id (0..C-1)
	Partitions   int32            // transaction_state_partitions (<= 0: the default, 50)
	Log          zerolog.Logger
}

// Routed is a Client that sends each transactional id's
// AddPartitionsToTxn to the coordinator owning its partition, and an
// idempotent InitProducerId to any coordinator that answers.
type Routed struct {
	clients    map[int32]Client
	nodes      []int32 // the node ids of clients, ascending
	partitions int32
	log        zerolog.Logger
	next       atomic.Uint32 // round robin start of FindCoordinator and InitProducerID

	mu     sync.Mutex
	owners map[int32]int32 // __transaction_state partition → owning node, as last learned
	// suspect: node → until when it goes last in FindCoordinator and InitProducerID
	// (a transport error), so a dead coordinator does not cost every
	// request a failed dial first.
	suspect map[int32]time.Time
	// groups is the node coordinating each __consumer_offsets partition
	// as a FindCoordinator for its probe key last answered (absent:
	// unknown); probes maps each probe key to its partition. See
	// FollowGroupCoordinator.
	groups map[int32]int32
	probes map[string]int32

	done    context.Context // ends at Close: FollowGroupCoordinator stops
	close   context.CancelFunc
	follows sync.WaitGroup
}

const (
	// routedAttempts bounds the sends of one part of an
	// AddPartitionsToTxn (the first one included).
	routedAttempts = 5
	// routedBackoff is the wait before the second attempt; it doubles
	// after each (20, 40, 80, 160 ms: 300 ms in all).
	routedBackoff = 20 * time.Millisecond
	// suspectFor is how long a node that failed at the transport level
	// is tried after the others.
	suspectFor = 5 * time.Second
	// routedAttemptTimeout bounds one send of a part to one coordinator.
	// A coordinator that stopped answering (a paused process keeps its
	// connections open) would otherwise hold the registration until the
	// Registrar's own timeout, long after its partitions moved; past this
	// the node is treated as unreachable, its partitions forgotten, and
	// the owners asked again. A live coordinator answers well within it:
	// it waits at most 2 s on a concurrent transaction, plus its write.
	routedAttemptTimeout = 4 * time.Second
	// routedFindTimeout bounds FindCoordinator to one coordinator. A
	// coordinator holds the answer for a partition that is moving (its
	// owner's process gone, its lease not yet expired) up to 6 s
	// (txnrouter's maxFindHold) and then names the new owner, so the
	// bound is above that: a registration waits for the new owner instead
	// of failing to the producer, whose retry backoff grows.
	routedFindTimeout = 7 * time.Second
	// routedFindHedge is how long FindCoordinator waits for a coordinator's answer
	// before it asks the next one as well (the first answer wins): a
	// paused coordinator, whose connections stay open, costs this much,
	// not routedFindTimeout.
	routedFindHedge = 2 * time.Second
)

// NewRouted returns a Routed over cfg.Coordinators.
func NewRouted(cfg RoutedConfig) *Routed {
	r := &Routed{
		clients:    make(map[int32]Client, len(cfg.Coordinators)),
		partitions: cfg.Partitions,
		log:        cfg.Log,
		owners:     map[int32]int32{},
		suspect:    map[int32]time.Time{},
		groups:     map[int32]int32{},
	}
	r.done, r.close = context.WithCancel(context.Background())
	for node, cl := range cfg.Coordinators {
		r.clients[node] = cl
		r.nodes = append(r.nodes, node)
	}
	slices.Sort(r.nodes)
	return r
}

// single is the only coordinator's client, or nil when there are several
// (or none).
func (r *Routed) single() Client {
	if len(r.nodes) == 1 {
		return r.clients[r.nodes[0]]
	}
	return nil
}

// Local reports whether every coordinator's client is: requests then cost
// no round trip whichever coordinator they go to.
func (r *Routed) Local() bool {
	for _, cl := range r.clients {
		if !cl.Local() {
			return false
		}
	}
	return len(r.clients) > 0
}

// Close stops FollowGroupCoordinator and closes every coordinator's
// client.
func (r *Routed) Close() error {
	r.close()
	r.follows.Wait()
	var errs []error
	for _, node := range r.nodes {
		if err := r.clients[node].Close(); err != nil {
			errs = append(errs, fmt.Errorf("coordinator %d: %w", node, err))
		}
	}
	return errors.Join(errs...)
}

// partitionOf is the __transaction_state partition of a transactional id.
func (r *Routed) partitionOf(transactionalID string) int32 {
	return cluster.TransactionPartitionFor(transactionalID, r.partitions)
}

// order is every node, starting at the next one in round robin, with the
// suspects after the others.
func (r *Routed) order() []int32 {
	n := len(r.nodes)
	if n == 0 {
		return nil
	}
	start := int(r.next.Add(1) % uint32(n))
	now := time.Now()
	var healthy, suspects []int32
	r.mu.Lock()
	for i := range n {
		node := r.nodes[(start+i)%n]
		if now.Before(r.suspect[node]) {
			suspects = append(suspects, node)
		} else {
			healthy = append(healthy, node)
		}
	}
	r.mu.Unlock()
	return append(healthy, suspects...)
}

// Owner is the coordinator owning transactionalID's partition as last
// learned (the Registrar queues registrations per owner with it).
func (r *Routed) Owner(transactionalID string) (node int32, known bool) {
	p := r.partitionOf(transactionalID)
	r.mu.Lock()
	defer r.mu.Unlock()
	node, known = r.owners[p]
	return node, known
}

// failed records a transport error of node: it becomes a suspect and
// every partition it owned is forgotten (it may be dead, and its
// partitions taken over).
func (r *Routed) failed(node int32, err error) {
	r.log.Warn().Err(err).Int32("coordinator_id", node).Msg("coordinator unreachable")
	r.mu.Lock()
	r.suspect[node] = time.Now().Add(suspectFor)
	for p, owner := range r.owners {
		if owner == node {
			delete(r.owners, p)
		}
	}
	r.mu.Unlock()
}

// answered records that node answered: it is no longer a suspect.
func (r *Routed) answered(node int32) {
	r.mu.Lock()
	delete(r.suspect, node)
	r.mu.Unlock()
}

// forget drops the cached owner of partition p if it is still node.
func (r *Routed) forget(p, node int32) {
	r.mu.Lock()
	if owner, ok := r.owners[p]; ok && owner == node {
		delete(r.owners, p)
	}
	r.mu.Unlock()
}

// FindCoordinator sends req (batched form: CoordinatorKeys, sent at v4+)
// to one coordinator, and to the next as well whenever the send fails or has not
// been answered within routedFindHedge; the first answer is returned. For
// transactional ids (key type 1) the owners it answers are remembered.
func (r *Routed) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	type answer struct {
		node int32
		resp *kmsg.FindCoordinatorResponse
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the slower sends end with the first answer
	order := r.order()
	answers := make(chan answer, len(order))
	var errs []error
	next, running := 0, 0
	ask := func() {
		node := order[next]
		next++
		running++
		own := *req // each send sets its version
		go func() {
			fctx, cancel := context.WithTimeout(ctx, routedFindTimeout)
			defer cancel()
			resp, err := r.clients[node].FindCoordinator(fctx, &own)
			answers <- answer{node, resp, err}
		}()
	}
	hedge := time.NewTimer(routedFindHedge)
	defer hedge.Stop()
	for {
		for running == 0 && next < len(order) && ctx.Err() == nil {
			ask()
		}
		if running == 0 {
			break
		}
		select {
		case a := <-answers:
			running--
			if a.err != nil {
				if ctx.Err() == nil {
					r.failed(a.node, a.err)
				}
				errs = append(errs, fmt.Errorf("coordinator %d: %w", a.node, a.err))
				continue
			}
			r.answered(a.node)
			switch req.CoordinatorType {
			case 1:
				r.learn(a.resp)
			case 0:
				r.learnGroups(a.resp)
			}
			return a.resp, nil
		case <-hedge.C:
			if next < len(order) {
				ask()
			}
			hedge.Reset(routedFindHedge)
		}
	}
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("coordclient: no coordinator to send FindCoordinator to")
	}
	return nil, fmt.Errorf("coordclient: FindCoordinator: %w", errors.Join(errs...))
}

// learn caches the owners a FindCoordinator for transactional ids
// answered.
func (r *Routed) learn(resp *kmsg.FindCoordinatorResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range resp.Coordinators {
		if _, known := r.clients[c.NodeID]; c.ErrorCode == 0 && known {
			r.owners[r.partitionOf(c.Key)] = c.NodeID
		}
	}
}

// learnGroups keeps the node coordinating each __consumer_offsets
// partition a FindCoordinator for the probe keys answered (a group's
// coordinator is its partition's owner); a partition whose answer is an
// error has none known.
func (r *Routed) learnGroups(resp *kmsg.FindCoordinatorResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range resp.Coordinators {
		p, probe := r.probes[c.Key]
		if !probe {
			continue
		}
		if c.ErrorCode == 0 {
			r.groups[p] = c.NodeID
		} else {
			delete(r.groups, p)
		}
	}
}

// GroupCoordinatorOf is the node coordinating the groups of
// __consumer_offsets partition p, as last learned.
func (r *Routed) GroupCoordinatorOf(p int32) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.groups[p]
	return n, ok
}

// groupProbeKey starts the groups FindCoordinator asks
// FollowGroupCoordinator sends: groupProbeKey-<i>, one key hashed to each
// __consumer_offsets partition.
const groupProbeKey = "txncoord-leader-group-probe"

// probeKeys is one group id per partition of __consumer_offsets of n
// partitions, each hashed to its partition.
func probeKeys(n int32) map[string]int32 {
	keys := map[string]int32{}
	found := map[int32]bool{}
	for i := 0; int32(len(found)) < n; i++ {
		k := fmt.Sprintf("%s-%d", groupProbeKey, i)
		if p := cluster.OffsetsPartitionFor(k, n); !found[p] {
			found[p] = true
			keys[k] = p
		}
	}
	return keys
}

// FollowGroupCoordinator asks the coordinators for the coordinator of
// each of the offsetsPartitions partitions of __consumer_offsets every
// interval until Close (one FindCoordinator, a key per partition), so that
// GroupCoordinatorOf stays current on a leader process, which has no etcd
// client (its Metadata names those nodes as the partitions' leaders, as
// the coordinators' does).
func (r *Routed) FollowGroupCoordinator(interval time.Duration, offsetsPartitions int32) {
	probes := probeKeys(offsetsPartitions)
	keys := make([]string, 0, len(probes))
	for k := range probes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	r.mu.Lock()
	r.probes = probes
	r.mu.Unlock()
	r.follows.Go(func() {
		for {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKeys = 0, keys
			if _, err := r.FindCoordinator(r.done, req); err != nil {
				r.mu.Lock()
				clear(r.groups)
				r.mu.Unlock()
			}
			t := time.NewTimer(interval)
			select {
			case <-t.C:
			case <-r.done.Done():
				t.Stop()
				return
			}
		}
	})
}

// ownersOf returns the owner of each partition of ids: cached, or asked
// for in one FindCoordinator (one key per unknown partition). A partition
// without an owner gets the code to answer (or retry) with instead.
func (r *Routed) ownersOf(ctx context.Context, ids []string) (owners map[int32]int32, codes map[int32]int16) {
	owners, codes = map[int32]int32{}, map[int32]int16{}
	keyOf := map[int32]string{} // unknown partition → an id of it
	var keys []string
	r.mu.Lock()
	for _, id := range ids {
		p := r.partitionOf(id)
		if owner, ok := r.owners[p]; ok {
			owners[p] = owner
		} else if _, asked := keyOf[p]; !asked {
			keyOf[p] = id
			keys = append(keys, id)
		}
	}
	r.mu.Unlock()
	if len(keys) == 0 {
		return owners, codes
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = 1, keys
	resp, err := r.FindCoordinator(ctx, req)
	if err != nil {
		for p := range keyOf {
			codes[p] = kerr.CoordinatorNotAvailable.Code
		}
		return owners, codes
	}
	answered := map[string]kmsg.FindCoordinatorResponseCoordinator{}
	for _, c := range resp.Coordinators {
		answered[c.Key] = c
	}
	for p, key := range keyOf {
		c, ok := answered[key]
		switch {
		case !ok: // left out
			codes[p] = kerr.CoordinatorNotAvailable.Code
		case c.ErrorCode != 0:
			codes[p] = c.ErrorCode
		case r.clients[c.NodeID] == nil: // a node this leader has no client for
			codes[p] = kerr.CoordinatorNotAvailable.Code
		default:
			owners[p] = c.NodeID
		}
	}
	return owners, codes
}

// retriable reports whether a coordinator's code means "ask again,
// perhaps elsewhere", and whether the owner known for the id is then to
// be forgotten (not while a partition loads: its owner is right).
func retriable(code int16) (retry, forgetOwner bool) {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		return true, true
	case kerr.CoordinatorLoadInProgress.Code:
		return true, false
	}
	return false, false
}

// AddPartitionsToTxn splits req's transactions by the coordinator owning
// each one's partition, sends the parts concurrently and merges the
// answers in request order (see the file comment for retries).
func (r *Routed) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	if only := r.single(); only != nil {
		return only.AddPartitionsToTxn(ctx, req)
	}
	add := &routedAdd{r: r, req: req,
		answers: make([]*kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions)),
		codes:   make([]int16, len(req.Transactions))}
	pending := make([]int, len(req.Transactions))
	for i := range pending {
		pending[i] = i
	}
	backoff := routedBackoff
	for attempt := 1; len(pending) > 0; attempt++ {
		pending = add.attempt(ctx, pending)
		if len(pending) == 0 || attempt == routedAttempts {
			break
		}
		wait := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-wait.C:
		}
		wait.Stop()
		if ctx.Err() != nil {
			break
		}
		backoff *= 2
	}
	for _, i := range pending { // still failing: the last code, retriable for the Registrar
		t := failedTransaction(req.Transactions[i], add.codes[i])
		add.answers[i] = &t
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.SetVersion(add.version)
	resp.ThrottleMillis = add.throttle
	for _, t := range add.answers {
		if t != nil { // nil: its coordinator left it out (the Registrar reports that)
			resp.Transactions = append(resp.Transactions, *t)
		}
	}
	return resp, nil
}

// routedAdd is one AddPartitionsToTxn through Routed: the answer of each
// transaction once final, and the last retriable code of those not yet.
type routedAdd struct {
	r        *Routed
	req      *kmsg.AddPartitionsToTxnRequest
	answers  []*kmsg.AddPartitionsToTxnResponseTransaction
	codes    []int16
	version  int16
	throttle int32
}

// routedPart is the transactions (indexes into the request) one
// coordinator gets in one attempt, and its answer.
type routedPart struct {
	node int32
	idx  []int
	req  *kmsg.AddPartitionsToTxnRequest
	resp *kmsg.AddPartitionsToTxnResponse
	err  error
}

// attempt routes and sends the pending transactions once, records the
// final answers and returns the transactions to try again.
func (a *routedAdd) attempt(ctx context.Context, pending []int) (retry []int) {
	txns := a.req.Transactions
	if len(pending) == 1 {
		// A leader's registration in-process names one transaction
		// (Registrar's perTxn): when its owner is known, it goes there
		// without the grouping below.
		if part := a.r.knownPart(txns, pending[0]); part != nil {
			a.send(ctx, part)
			return a.merge(part)
		}
	}
	ids := make([]string, len(pending))
	for j, i := range pending {
		ids[j] = txns[i].TransactionalID
	}
	owners, codes := a.r.ownersOf(ctx, ids)
	var parts []*routedPart
	byNode := map[int32]*routedPart{}
	for _, i := range pending {
		p := a.r.partitionOf(txns[i].TransactionalID)
		node, ok := owners[p]
		if !ok {
			if again, _ := retriable(codes[p]); again {
				a.codes[i] = codes[p]
				retry = append(retry, i)
			} else {
				t := failedTransaction(txns[i], codes[p])
				a.answers[i] = &t
			}
			continue
		}
		part := byNode[node]
		if part == nil {
			part = &routedPart{node: node, req: kmsg.NewPtrAddPartitionsToTxnRequest()}
			byNode[node] = part
			parts = append(parts, part)
		}
		part.idx = append(part.idx, i)
		part.req.Transactions = append(part.req.Transactions, txns[i])
	}
	if len(parts) == 1 {
		a.send(ctx, parts[0])
	} else {
		var wg sync.WaitGroup
		for _, part := range parts {
			wg.Go(func() { a.send(ctx, part) })
		}
		wg.Wait()
	}
	for _, part := range parts {
		retry = append(retry, a.merge(part)...)
	}
	slices.Sort(retry) // request order, for the next attempt's parts
	return retry
}

// send sends part to its coordinator, bounded by routedAttemptTimeout.
func (a *routedAdd) send(ctx context.Context, part *routedPart) {
	actx, cancel := context.WithTimeout(ctx, routedAttemptTimeout)
	defer cancel()
	part.resp, part.err = a.r.clients[part.node].AddPartitionsToTxn(actx, part.req)
}

// knownPart is transaction i of txns alone as a part for its partition's
// owner, or nil when the owner is not known.
func (r *Routed) knownPart(txns []kmsg.AddPartitionsToTxnRequestTransaction, i int) *routedPart {
	p := r.partitionOf(txns[i].TransactionalID)
	r.mu.Lock()
	node, ok := r.owners[p]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{txns[i]}
	return &routedPart{node: node, idx: []int{i}, req: req}
}

// merge takes one part's answer: final answers into a.answers, the
// transactions to retry returned.
func (a *routedAdd) merge(part *routedPart) (retry []int) {
	txns := a.req.Transactions
	retryAll := func(code int16, forgetOwner bool) []int {
		for _, i := range part.idx {
			a.codes[i] = code
			if forgetOwner {
				a.r.forget(a.r.partitionOf(txns[i].TransactionalID), part.node)
			}
		}
		return part.idx
	}
	if part.err != nil {
		a.r.failed(part.node, part.err)
		return retryAll(kerr.CoordinatorNotAvailable.Code, true)
	}
	a.r.answered(part.node)
	resp := part.resp
	a.version = max(a.version, resp.GetVersion())
	a.throttle = max(a.throttle, resp.ThrottleMillis)
	if resp.ErrorCode != 0 {
		if again, forgetOwner := retriable(resp.ErrorCode); again {
			return retryAll(resp.ErrorCode, forgetOwner)
		}
		for _, i := range part.idx { // a top-level code applies to every partition of the part
			t := failedTransaction(txns[i], resp.ErrorCode)
			a.answers[i] = &t
		}
		return nil
	}
	if len(part.idx) == 1 { // one transaction: its answer is the first of its id
		i := part.idx[0]
		for j := range resp.Transactions {
			if t := &resp.Transactions[j]; t.TransactionalID == txns[i].TransactionalID {
				return a.answer(part.node, i, t)
			}
		}
		return nil // left out by the coordinator
	}
	// Answers are matched by id, in order, so an id sent twice gets its
	// two answers.
	byID := map[string][]int{}
	for j, t := range resp.Transactions {
		byID[t.TransactionalID] = append(byID[t.TransactionalID], j)
	}
	for _, i := range part.idx {
		id := txns[i].TransactionalID
		js := byID[id]
		if len(js) == 0 {
			continue // left out by the coordinator
		}
		byID[id] = js[1:]
		retry = append(retry, a.answer(part.node, i, &resp.Transactions[js[0]])...)
	}
	return retry
}

// answer takes node's answer t for transaction i: final, or i to retry
// (its last code kept, and its owner forgotten when the code says the
// owner moved).
func (a *routedAdd) answer(node int32, i int, t *kmsg.AddPartitionsToTxnResponseTransaction) (retry []int) {
	if code, again, forgetOwner := retriableIn(t); again {
		a.codes[i] = code
		if forgetOwner {
			a.r.forget(a.r.partitionOf(t.TransactionalID), node)
		}
		return []int{i}
	}
	a.answers[i] = t
	return nil
}

// retriableIn is the first retriable code among a transaction's
// partitions: the coordinator answers for the transaction as a whole
// (ownership is per id), so the whole transaction is retried.
func retriableIn(t *kmsg.AddPartitionsToTxnResponseTransaction) (code int16, retry, forgetOwner bool) {
	for _, tt := range t.Topics {
		for _, p := range tt.Partitions {
			if retry, forgetOwner = retriable(p.ErrorCode); retry {
				return p.ErrorCode, true, forgetOwner
			}
		}
	}
	return 0, false, false
}

// failedTransaction is t answered with code for every partition, as a
// coordinator answers a transaction-level error.
func failedTransaction(t kmsg.AddPartitionsToTxnRequestTransaction, code int16) kmsg.AddPartitionsToTxnResponseTransaction {
	one := kmsg.NewPtrAddPartitionsToTxnRequest()
	one.SetVersion(4) // the batched (per-transaction) shape
	one.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{t}
	return wire.ErrorResponse(one, code).(*kmsg.AddPartitionsToTxnResponse).Transactions[0]
}

// InitProducerID sends an idempotent InitProducerId (any coordinator
// allocates producer ids) to the coordinators in round robin, moving on to
// the next after a transport error or a coordinator that cannot serve it
// now. When none can, the last answer (or the errors) is returned.
func (r *Routed) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	if only := r.single(); only != nil {
		return only.InitProducerID(ctx, req)
	}
	var last *kmsg.InitProducerIDResponse
	var errs []error
	for _, node := range r.order() {
		actx, cancel := context.WithTimeout(ctx, routedAttemptTimeout)
		resp, err := r.clients[node].InitProducerID(actx, req)
		cancel()
		if err != nil {
			r.failed(node, err)
			errs = append(errs, fmt.Errorf("coordinator %d: %w", node, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		r.answered(node)
		if again, _ := retriable(resp.ErrorCode); again {
			last = resp
			continue
		}
		return resp, nil
	}
	if last != nil {
		return last, nil
	}
	if len(errs) == 0 {
		return nil, errors.New("coordclient: no coordinator to send InitProducerId to")
	}
	return nil, fmt.Errorf("coordclient: InitProducerId: %w", errors.Join(errs...))
}
