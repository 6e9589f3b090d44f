package ownership

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/txnetcd"
)

// Defaults of Config.
const (
	DefaultLeaseTTL = 5 * time.Second
	DefaultSettle   = 500 * time.Millisecond
)

// Config configures a Member.
type Config struct {
	Client *clientv3.Client // not closed by the Member
	Layout txnetcd.Layout
	NodeID int32
	// Partitions is transaction_state_partitions (default 50).
	Partitions int32
	// LeaseTTL is the lease's time to live: how long a dead member keeps
	// its partitions. etcd counts it in whole seconds; it is rounded up,
	// and is at least 1 s (default 5 s).
	LeaseTTL time.Duration
	// Settle is how long a member waits after listing itself before it
	// claims partitions, so members started together see each other
	// first and do not take everything and hand it back (default 500 ms).
	Settle time.Duration
	Log    zerolog.Logger
}

// Event is a change of this member's ownership of one partition.
type Event struct {
	Partition int32
	Epoch     int32
	// Acquired is true when the member took the partition with Epoch,
	// false when it lost it (released it, another member or an expired
	// lease took it, or its lease may have expired).
	Acquired bool
}

func (e Event) String() string {
	if e.Acquired {
		return fmt.Sprintf("acquired %d@%d", e.Partition, e.Epoch)
	}
	return fmt.Sprintf("lost %d@%d", e.Partition, e.Epoch)
}

// owned is a partition this member holds: its owner record and the etcd
// revision that put it (watch events older than that are about a previous
// owner and are ignored).
type owned struct {
	owner txnetcd.Owner
	rev   int64
	// fence is the partition's fence for owner, made once: Fence is
	// asked on every request routed to the partition.
	fence txnetcd.Fence
}

type ownerEntry struct {
	owner txnetcd.Owner
	rev   int64
}

type epochEntry struct {
	value int32
	rev   int64 // mod revision; 0 when the key does not exist
}

// Member claims and holds partitions for one coordinator node.
type Member struct {
	cfg      Config
	ttl      time.Duration
	interval time.Duration // keepalive and rebalance period
	log      zerolog.Logger
	events   *queue

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	poke   chan struct{}

	// paused stops the keepalives and the loop without telling anyone,
	// as SIGSTOP would (tests: a zombie). Owned and Fence still answer,
	// as a paused process's memory would after SIGCONT.
	paused atomic.Bool

	mu            sync.Mutex
	lease         clientv3.LeaseID
	validUntil    time.Time // the lease may have expired from then on
	registered    bool      // member key put with the current lease
	joinedAt      time.Time
	kaErr         error // the last keepalive failure
	owned         map[int32]owned
	owners        map[int32]ownerEntry
	epochs        map[int32]epochEntry
	ownersSynced  bool
	members       map[int32]int64 // node -> mod revision
	membersSynced bool
	notReady      error
	closed        bool
}

// Start starts a member: it grants its lease, lists itself, and claims
// partitions in the background. It returns at once; Ready tells when it
// holds a lease and a current view.
func Start(cfg Config) (*Member, error) {
	if cfg.Client == nil {
		return nil, errors.New("ownership: no etcd client")
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = txnetcd.DefaultPartitions
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	ttl := max(time.Second, cfg.LeaseTTL.Round(time.Second))
	if ttl < cfg.LeaseTTL {
		ttl += time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{
		cfg:      cfg,
		ttl:      ttl,
		interval: ttl / 4,
		log:      cfg.Log.With().Str("component", "ownership").Int32("node_id", cfg.NodeID).Logger(),
		events:   newQueue(),
		ctx:      ctx,
		cancel:   cancel,
		poke:     make(chan struct{}, 1),
		owned:    map[int32]owned{},
		owners:   map[int32]ownerEntry{},
		epochs:   map[int32]epochEntry{},
		members:  map[int32]int64{},
		notReady: errors.New("ownership: starting"),
	}
	m.wg.Add(4)
	go m.run()
	go m.keepalive()
	go m.watch(m.partitionsPrefix(), &m.ownersSynced, m.resetPartitions, m.applyPartition)
	go m.watch(m.membersPrefix(), &m.membersSynced, m.resetMembers, m.applyMember)
	return m, nil
}

func (m *Member) base() string { return strings.TrimRight(m.cfg.Layout.Prefix, "/") }

func (m *Member) partitionsPrefix() string { return m.base() + "/txn/partitions/" }

func (m *Member) membersPrefix() string { return m.base() + "/members/" }

func (m *Member) memberKey() string {
	return m.membersPrefix() + strconv.Itoa(int(m.cfg.NodeID))
}

// Events delivers this member's acquisitions and losses in order. It is
// closed after Close; the consumer should read it until then (undelivered
// events are kept, never dropped).
func (m *Member) Events() <-chan Event { return m.events.out }

// SetPaused stops (true) or resumes the member's keepalives and loop
// without telling anyone, as SIGSTOP and SIGCONT would: its lease lapses
// and the others take its partitions over, while Owned and Fence still
// answer from what it knew (a paused process's memory); resumed, it finds
// its lease expired and starts over (fault injection: a paused node).
func (m *Member) SetPaused(paused bool) {
	m.paused.Store(paused)
	if !paused {
		m.wake()
	}
}

// NodeID is the member's node id.
func (m *Member) NodeID() int32 { return m.cfg.NodeID }

// LeaseTTL is the lease TTL in use (rounded up to whole seconds).
func (m *Member) LeaseTTL() time.Duration { return m.ttl }

// validLocked reports whether the lease is certainly still alive.
func (m *Member) validLocked(now time.Time) bool {
	return m.lease != 0 && now.Before(m.validUntil)
}

// Owned is the partitions this member owns, with their epochs. It is empty
// once the lease may have expired, whether or not the loop has noticed.
func (m *Member) Owned() map[int32]int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]int32{}
	if !m.validLocked(time.Now()) {
		return out
	}
	for p, o := range m.owned {
		out[p] = o.owner.Epoch
	}
	return out
}

// Fence is the owner value to condition writes to partition p on, while
// this member owns it and its lease is certainly alive.
func (m *Member) Fence(p int32) (txnetcd.Fence, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.owned[p]
	if !ok || !m.validLocked(time.Now()) {
		return txnetcd.Fence{}, false
	}
	return o.fence, true
}

// Owner is partition p's owner as this member last saw it in etcd.
func (m *Member) Owner(p int32) (node, epoch int32, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.owners[p]
	return e.owner.NodeID, e.owner.Epoch, ok
}

// Owners is every owned partition's owner as this member last saw them.
func (m *Member) Owners() map[int32]txnetcd.Owner {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int32]txnetcd.Owner, len(m.owners))
	for p, e := range m.owners {
		out[p] = e.owner
	}
	return out
}

// Members is the node ids of the live members (those whose lease holds
// their member key), sorted.
func (m *Member) Members() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int32, 0, len(m.members))
	for n := range m.members {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Ready reports whether the member holds a lease that is certainly alive
// and a current view of owners and members.
func (m *Member) Ready() bool { return m.Err() == nil }

// Err is why the member is not ready (nil when it is): for /readyz.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("ownership: closed")
	}
	if m.notReady != nil {
		return m.notReady
	}
	if !m.validLocked(time.Now()) {
		return m.leaseErrLocked()
	}
	return nil
}

func (m *Member) leaseErrLocked() error {
	if m.kaErr != nil {
		return fmt.Errorf("ownership: etcd lease may have expired (no successful keepalive within %v): %w", m.ttl, m.kaErr)
	}
	return fmt.Errorf("ownership: etcd lease may have expired (no successful keepalive within %v)", m.ttl)
}

// Close releases every partition at once (by revoking the lease, which
// deletes the owner keys and the member key) and stops the member.
func (m *Member) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()

	m.mu.Lock()
	lease := m.lease
	m.lease = 0
	m.dropAllLocked("closed")
	m.mu.Unlock()
	var err error
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = m.cfg.Client.Revoke(ctx, lease)
		cancel()
	}
	m.events.close()
	return err
}

// kill stops the member without revoking its lease, as a crash would: its
// partitions stay owned in etcd until the lease expires (tests).
func (m *Member) kill() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	m.events.close()
}

func (m *Member) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// dropAllLocked reports every owned partition lost and forgets them.
func (m *Member) dropAllLocked(reason string) {
	if len(m.owned) == 0 {
		return
	}
	ps := make([]int32, 0, len(m.owned))
	for p := range m.owned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		m.events.push(Event{Partition: p, Epoch: m.owned[p].owner.Epoch})
		delete(m.owned, p)
	}
	m.log.Warn().Str("reason", reason).Int("partitions", len(ps)).Msg("ownership: dropped every partition")
}

// loseLocked reports partition p lost.
func (m *Member) loseLocked(p int32, reason string) {
	o, ok := m.owned[p]
	if !ok {
		return
	}
	delete(m.owned, p)
	m.events.push(Event{Partition: p, Epoch: o.owner.Epoch})
	m.log.Info().Int32("partition", p).Int32("epoch", o.owner.Epoch).Str("reason", reason).Msg("ownership: lost partition")
}
