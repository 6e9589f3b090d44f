package groups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wal"
	"github.com/txncoord/txncoord/wire"
)

// SpaceName is the group coordinator's space in the process store.
const SpaceName = "groups"

// Config configures a Coordinator.
type Config struct {
	NodeID int32
	View   *cluster.View
	// Store is the process store; the coordinator opens its space
	// SpaceName (records of storage.KindGroup) in it, unless Records is
	// set.
	Store *storage.Store
	// Records, optional, is a log of the coordinator's own (etcd) used
	// instead of Store's space; the Coordinator closes it.
	Records RecordLog
	// TxnCoordinator sends a request to the transaction coordinator of
	// this process (its wire server's LocalClient.Do): TxnOffsetCommit
	// verifies or adds its __consumer_offsets partition with
	// AddPartitionsToTxn v4+ through it, as a leader does. Nil: every
	// TxnOffsetCommit is answered COORDINATOR_NOT_AVAILABLE.
	TxnCoordinator func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// Shares reaches the share partitions at the leaders (share groups:
	// releasing a departed member's records, the share-group offset
	// APIs). Nil: those APIs answer COORDINATOR_NOT_AVAILABLE.
	Shares ShareState
	// Now is the clock (time.Now when nil). Tests that set it drive time
	// with Tick.
	Now      func() time.Time
	Timeouts Timeouts
	// TickInterval is how often timeouts are checked while anything can
	// time out (100 ms when 0; a negative value starts no ticker: the
	// test calls Tick). With no member and no pending join the ticker
	// sleeps until the next step or offset expiry check.
	TickInterval time.Duration
	Log          zerolog.Logger
	Metrics      prometheus.Registerer // may be nil
	// SharedMetrics, when set, are the series to count in instead of
	// registering new ones in Metrics: a node that opens a new
	// Coordinator each time it becomes the group coordinator (etcd mode)
	// registers its series once (NewMetrics).
	SharedMetrics *Metrics
}

// Coordinator is the group coordinator: the pure core (core.go,
// offsets.go) behind one lock, its records in the process log, and the
// answers of waiting requests.
type Coordinator struct {
	cfg   Config
	space RecordLog
	log   zerolog.Logger
	m     *Metrics

	mu        sync.Mutex
	core      *Core
	waiters   map[uint64]*waiter
	nextToken uint64
	lastPos   wal.Pos // position of the last record appended
	lastExp   time.Time

	// parked: the ticker sleeps, nothing in the core timing out; the
	// next step that may have changed that wakes it through wake.
	parked atomic.Bool
	wake   chan struct{}

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// waiter is a JoinGroup or SyncGroup waiting for its answer.
type waiter struct {
	done   chan struct{}
	answer Answer
	pos    wal.Pos // the answer is given once this is durable
	// conn is the request's connection (0 in-process).
	conn uint64
	// unanswered: a later request of the member took its place on
	// another connection; Kafka never answers it (errNoAnswer).
	unanswered bool
	// followers are earlier requests of the member on the same
	// connection that this one took the place of: they get its answer.
	followers []*waiter
}

// errNoAnswer: the request gets no response (Answer.SupersededBy).
var errNoAnswer = errors.New("groups: superseded request: no answer")

// ErrClosed answers appends after Close.
var ErrClosed = errors.New("groups: closed")

// Open opens the space, loads every group, offset and producer state
// from bbolt (the store replayed its log before), and starts the ticker.
func Open(cfg Config) (*Coordinator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	space := cfg.Records
	if space == nil {
		sp, err := cfg.Store.Space(SpaceName, storage.KindGroup, storage.SpaceOptions{Closed: ErrClosed})
		if err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
		space = spaceLog{sp}
	}
	c := &Coordinator{cfg: cfg, space: space, log: cfg.Log.With().Str("component", "groups").Logger(),
		waiters: map[uint64]*waiter{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	t := cfg.Timeouts
	// The delay DescribeConfigs reports is the one applied.
	t.InitialRebalanceDelay = cfg.View.GroupInitialRebalanceDelay()
	c.core = NewCore(t, cfg.View.OffsetsPartitions(), newMemberSuffix)
	now := cfg.Now()
	if err := space.Load(func(each func([]byte, func(k, v []byte) error) error) error { return c.core.load(each, now) }); err != nil {
		space.Close()
		return nil, fmt.Errorf("groups: load: %w", err)
	}
	c.lastExp = now
	c.m = cfg.SharedMetrics
	if c.m == nil {
		c.m = NewMetrics(cfg.Metrics, func() *Coordinator { return c })
	}
	c.log.Info().Int("groups", len(c.core.groups)).Msg("group coordinator loaded")
	if cfg.TickInterval > 0 {
		go c.ticker()
	} else {
		close(c.stopped)
	}
	return c, nil
}

// newMemberSuffix is the random part of a member id (Kafka: a UUID).
func newMemberSuffix() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", hex.EncodeToString(b[:4]), hex.EncodeToString(b[4:6]), hex.EncodeToString(b[6:8]),
		hex.EncodeToString(b[8:10]), hex.EncodeToString(b[10:]))
}

// Close stops the ticker, answers every waiting request with
// REBALANCE_IN_PROGRESS... (they are abandoned as on a coordinator
// failover: clients find the coordinator again) and closes the space.
func (c *Coordinator) Close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		<-c.stopped
		err = c.space.Close()
	})
	return err
}

// ticker runs Tick every TickInterval while something in the core can
// time out. A coordinator with nothing to time out (most of the
// __consumer_offsets partitions a process owns, most of the time) parks
// it instead of waking every interval: it sleeps until the next offset
// expiry check, or until a step wakes it.
func (c *Coordinator) ticker() {
	defer close(c.stopped)
	t := time.NewTimer(c.cfg.TickInterval)
	defer t.Stop()
	for {
		wait := c.cfg.TickInterval
		select {
		case <-c.stop:
			return
		case <-c.wake: // a step: tick from now on
		case <-t.C:
			if c.tick() {
				c.parked.Store(true)
				// A step that ran before the flag was set did not
				// wake the ticker: look again now that the next one
				// will.
				var idle bool
				if wait, idle = c.untilExpiryCheck(); !idle {
					c.parked.Store(false)
					wait = c.cfg.TickInterval
				}
			}
		}
		t.Reset(wait) // Go 1.23+: no stale tick survives a Reset
	}
}

// untilExpiryCheck reports whether nothing in the core can time out (no
// deadline, no share member's session), and how long until the next
// offset expiry check.
func (c *Coordinator) untilExpiryCheck() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idle := c.core.NextDeadline().IsZero() && !c.core.hasShareMembers()
	return max(c.lastExp.Add(expireEvery).Sub(c.cfg.Now()), c.cfg.TickInterval), idle
}

// wakeTicker wakes a parked ticker after a step, which may have given the
// core something that times out.
func (c *Coordinator) wakeTicker() {
	if c.parked.Load() && c.parked.CompareAndSwap(true, false) {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// expireEvery is how often offsets are checked for expiry (Kafka's
// offsets.retention.check.interval.ms, 10 minutes).
const expireEvery = 10 * time.Minute

// Tick runs the core's timeouts at the clock's now (the ticker calls it;
// tests with their own clock call it themselves).
func (c *Coordinator) Tick() { c.tick() }

// tick is Tick; idle reports that nothing in the core could time out
// (no deadline before it, no share member after it).
func (c *Coordinator) tick() (idle bool) {
	c.mu.Lock()
	now := c.cfg.Now()
	next := c.core.NextDeadline()
	if !next.IsZero() && !now.Before(next) {
		c.core.Tick(now)
	}
	if now.Sub(c.lastExp) >= expireEvery {
		c.lastExp = now
		if n := c.core.ExpireOffsets(now); n > 0 {
			c.m.expired.Add(float64(n))
		}
	}
	gone := c.core.ExpireShareMembers(now)
	idle = next.IsZero() && !c.core.hasShareMembers()
	c.flushLocked(false)
	c.mu.Unlock()
	// Released outside the lock: the leaders write.
	c.releaseShareMembers(gone)
	return idle
}

// step runs fn on the core under the lock and flushes what it produced:
// ops appended to the log (in the order of the steps, as the lock
// orders them), waiting answers released. It returns the position the
// caller's own answer must wait for (0: nothing written).
func (c *Coordinator) step(fn func(now time.Time)) (wal.Pos, error) {
	defer c.wakeTicker() // after the unlock
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.cfg.Now())
	return c.flushLocked(true)
}

// newWaiter registers a waiting request; call with c.mu held.
func (c *Coordinator) newWaiterLocked(r *wire.Request) (uint64, *waiter) {
	c.nextToken++
	w := &waiter{done: make(chan struct{})}
	if !r.InProcess() {
		w.conn = r.ConnID
	}
	c.waiters[c.nextToken] = w
	return c.nextToken, w
}

func (c *Coordinator) flushLocked(returnErr bool) (wal.Pos, error) {
	out := c.core.Take()
	var pos wal.Pos
	var err error
	if len(out.Ops) > 0 {
		pos, err = c.space.Append(encodeOps(out.Ops))
		if err != nil {
			// The store stopped (fail-stop) or the space closed: what the
			// core changed is not stored, and nothing it answers may be
			// acknowledged; waiting answers become errors below.
			c.log.Error().Err(err).Msg("group record not appended")
		} else {
			c.lastPos = pos
		}
	}
	for _, e := range out.Events {
		if e.Rebalance {
			c.m.rebalances.Inc()
			continue
		}
		if e.Info {
			c.log.Info().Str("group", e.Group).Msg(e.Msg)
		} else if c.log.GetLevel() <= zerolog.DebugLevel {
			c.log.Debug().Str("group", e.Group).Msg(e.Msg)
		}
	}
	for _, a := range out.Answers {
		w := c.waiters[a.Token]
		if w == nil {
			continue
		}
		delete(c.waiters, a.Token)
		if a.SupersededBy != 0 || (a.Join == nil && a.Sync == nil) {
			c.supersede(w, c.waiters[a.SupersededBy])
			continue
		}
		if err != nil {
			a = failedAnswer(a)
		}
		for _, f := range append([]*waiter{w}, w.followers...) {
			f.answer, f.pos = a, pos
			close(f.done)
		}
	}
	return pos, err
}

// supersede handles a waiting request whose member sent another one (nw)
// before it was answered. Kafka replaces the waiting future and never
// completes the earlier one: a client sends the same JoinGroup or
// SyncGroup again after its request timed out, on a new connection, so
// the earlier one is left without a response here too. On the same
// connection (pipelined: Kafka reads no request of a connection while one
// is waiting, so it would answer the earlier one first and then the
// later, which finds the same generation) both get the later one's
// answer, in order.
func (c *Coordinator) supersede(w, nw *waiter) {
	if nw != nil && w.conn != 0 && w.conn == nw.conn {
		nw.followers = append(append(nw.followers, w), w.followers...)
		return
	}
	for _, f := range append([]*waiter{w}, w.followers...) {
		f.unanswered = true
		close(f.done)
	}
}

func notCoordinator(a Answer) Answer {
	code := kerr.NotCoordinator.Code
	return Answer{Join: &JoinResult{Err: code, Generation: -1}, Sync: &SyncResult{Err: code}}
}

// failedAnswer turns an answer whose record could not be appended into
// the error a client retries: the coordinator is not available.
func failedAnswer(a Answer) Answer {
	code := kerr.CoordinatorNotAvailable.Code
	if a.Join != nil {
		a.Join = &JoinResult{Err: code, Generation: -1, MemberID: a.Join.MemberID}
	}
	if a.Sync != nil {
		a.Sync = &SyncResult{Err: code}
	}
	return a
}

// storeErrCode is the answer of a request whose record failed.
func storeErrCode(err error) int16 {
	if errors.Is(err, ErrClosed) {
		return kerr.NotCoordinator.Code
	}
	return kerr.KafkaStorageError.Code
}

// durable waits until pos is durable, unless the caller appends to the
// same log (whatever it appends next is durable only with this) or pos is
// 0.
func (c *Coordinator) durable(ctx context.Context, r *wire.Request, pos wal.Pos) error {
	if pos == 0 || durable.Shares(r.CallerLog(), c.space.Log()) {
		return nil
	}
	return c.space.Log().WaitDurable(ctx, pos)
}

// committed answers a commit the core took (OffsetCommit, TxnOffsetCommit)
// once its record (at pos, or its append error err) is durable, and
// counts its n offsets by kind.
func (c *Coordinator) committed(ctx context.Context, r *wire.Request, pos wal.Pos, err error, kind string, n int) int16 {
	if err == nil {
		err = c.durable(ctx, r, pos)
	}
	if err != nil {
		return storeErrCode(err)
	}
	c.m.commits.WithLabelValues(kind).Add(float64(n))
	return 0
}

// readable waits until every record appended so far is durable, so that
// a read answers only what a crash cannot take back.
func (c *Coordinator) readable(ctx context.Context) error {
	c.mu.Lock()
	pos := c.lastPos
	c.mu.Unlock()
	if pos == 0 || c.space.Log().Durable() >= pos {
		return nil
	}
	return c.space.Log().WaitDurable(ctx, pos)
}

// wait blocks a Reply until w is answered and durable. An error means no
// answer can be given (the server is stopping).
func (c *Coordinator) wait(ctx context.Context, r *wire.Request, w *waiter) (Answer, error) {
	select {
	case <-w.done:
		if w.unanswered {
			return Answer{}, errNoAnswer
		}
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-c.stop:
		return Answer{}, ErrClosed
	case <-r.Stopping:
		// The server is shutting down: the member finds the coordinator
		// again, as after Kafka unloads a group.
		return notCoordinator(w.answer), nil
	}
	if err := c.durable(ctx, r, w.pos); err != nil {
		return failedAnswer(w.answer), nil
	}
	return w.answer, nil
}

// waitingReply is the Reply of a request that may wait for its group
// (JoinGroup, SyncGroup): run does the core's step with the waiter's
// token and says whether the request waits; a waiting request gets the
// Answer (pick takes its result) or none if a later request of its
// member took its place; one answered at once gets its result once its
// record is durable, or failed's result with the store's error code.
func waitingReply[T any](c *Coordinator, ctx context.Context, r *wire.Request, run func(now time.Time, token uint64) (T, bool),
	pick func(Answer) T, failed func(res T, code int16) T, respond func(T) kmsg.Response) wire.Reply {
	var (
		res     T
		waiting bool
		w       *waiter
	)
	pos, err := c.step(func(now time.Time) {
		var token uint64
		token, w = c.newWaiterLocked(r)
		res, waiting = run(now, token)
		if !waiting {
			delete(c.waiters, token)
		}
	})
	return func() (kmsg.Response, error) {
		switch {
		case waiting:
			a, werr := c.wait(ctx, r, w)
			if errors.Is(werr, errNoAnswer) {
				return nil, nil // no response, as Kafka (Answer.SupersededBy)
			}
			if werr != nil {
				return nil, werr
			}
			res = pick(a)
		case err != nil:
			res = failed(res, storeErrCode(err))
		default:
			if derr := c.durable(ctx, r, pos); derr != nil {
				res = failed(res, storeErrCode(derr))
			}
		}
		return respond(res), nil
	}
}

// Register registers the group coordinator's handlers: the classic group
// protocol, offsets (plain and transactional), WriteTxnMarkers and
// DescribeProducers for __consumer_offsets, and the KIP-848 keys on a node
// whose version serves them.
func (c *Coordinator) Register(reg *wire.Registry) {
	if self, ok := c.cfg.View.Node(c.cfg.NodeID); ok {
		apisFor(self.KafkaVersion).Register(reg, c)
		return
	}
	apis.Register(reg, c)
}

// apis are the group coordinator's APIs but the KIP-848 ones, each
// declared in its handler file: Register, RegisterSwitch and the stand-ins
// of RegisterNotCoordinator read this list and consumerAPIs.
var apis = wire.APIs[*Coordinator]{offsetCommitAPI, offsetFetchAPI, joinGroupAPI, heartbeatAPI, leaveGroupAPI, syncGroupAPI,
	describeGroupsAPI, listGroupsAPI, writeTxnMarkersAPI, txnOffsetCommitAPI, deleteGroupsAPI, offsetDeleteAPI, describeProducersAPI}

// consumerAPIs are the KIP-848 keys. They are registered (and so
// advertised) only on a node whose Kafka version profile has
// ConsumerGroupHeartbeat v1, so that clients of an older profile keep the
// classic protocol (kgo's ServerSideBalancer falls back to it, the Java
// consumer fails with group.protocol=consumer, as against such a Kafka).
var consumerAPIs = wire.APIs[*Coordinator]{consumerGroupHeartbeatAPI, consumerGroupDescribeAPI}

// shareAPIs are the share-group keys (KIP-932), registered only on a node
// whose profile has ShareGroupHeartbeat v1 (Kafka 4.1+).
var shareAPIs = wire.APIs[*Coordinator]{shareGroupHeartbeatAPI, shareGroupDescribeAPI, describeShareGroupOffsetsAPI,
	alterShareGroupOffsetsAPI, deleteShareGroupOffsetsAPI}

// apisFor is the list a node of kafkaVersion serves.
func apisFor(kafkaVersion string) wire.APIs[*Coordinator] {
	out := apis
	if ServesConsumerProtocol(kafkaVersion) {
		out = append(slices.Clip(out), consumerAPIs...)
	}
	if ServesShareGroups(kafkaVersion) {
		out = append(slices.Clip(out), shareAPIs...)
	}
	return out
}

// ServesShareGroups reports whether a node of this Kafka version serves
// share groups (ShareGroupHeartbeat v1 in its profile: 4.1+).
func ServesShareGroups(kafkaVersion string) bool {
	return negotiation.MaxVersion(kafkaVersion, 76) >= 1
}

// Declared is every API the group coordinator may serve, the KIP-848 and
// share-group ones included (a node registers those only when its version
// serves them).
func Declared() wire.APIs[*Coordinator] {
	return append(append(slices.Clip(apis), consumerAPIs...), shareAPIs...)
}
