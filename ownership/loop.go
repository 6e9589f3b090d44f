package ownership

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/txnetcd"
)

// run is the member's loop: it renews its standing (lease, member key)
// and rebalances on every change it is poked about, every interval, and
// at the moment its lease may expire.
func (m *Member) run() {
	defer m.wg.Done()
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		m.step()
		m.mu.Lock()
		wait := time.Hour
		if m.lease != 0 {
			wait = max(time.Until(m.validUntil), time.Millisecond)
		}
		m.mu.Unlock()
		expiry.Reset(wait)
		select {
		case <-m.ctx.Done():
			return
		case <-m.poke:
		case <-tick.C:
		case <-expiry.C:
		}
	}
}

func (m *Member) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(m.ctx, max(m.interval, 500*time.Millisecond))
}

func (m *Member) setNotReady(err error) {
	m.mu.Lock()
	m.notReady = err
	m.mu.Unlock()
}

func (m *Member) step() {
	if m.paused.Load() {
		return
	}
	now := time.Now()
	m.mu.Lock()
	if m.lease != 0 && !m.validLocked(now) {
		// The lease may be gone at the server: another member may own our
		// partitions already. Forget them, and start over with a new lease
		// (revoking the old one, in case it was only slow keepalives, so
		// its keys do not linger).
		m.dropAllLocked(m.leaseErrLocked().Error())
		old := m.lease
		m.lease, m.registered = 0, false
		m.notReady = m.leaseErrLocked()
		go m.revoke(old)
	}
	lease := m.lease
	m.mu.Unlock()

	if lease == 0 {
		ctx, cancel := m.opCtx()
		start := time.Now()
		resp, err := m.cfg.Client.Grant(ctx, int64(m.ttl/time.Second))
		cancel()
		if err != nil {
			m.setNotReady(fmt.Errorf("ownership: etcd lease grant: %w", err))
			return
		}
		m.mu.Lock()
		m.lease = resp.ID
		m.validUntil = start.Add(time.Duration(resp.TTL) * time.Second)
		m.kaErr = nil
		lease = resp.ID
		m.mu.Unlock()
		m.log.Info().Int64("lease", int64(resp.ID)).Int64("ttl_s", resp.TTL).Msg("ownership: lease granted")
	}

	m.mu.Lock()
	registered := m.registered
	m.mu.Unlock()
	if !registered {
		ctx, cancel := m.opCtx()
		_, err := m.cfg.Client.Put(ctx, m.memberKey(), fmt.Sprintf(`{"node_id":%d}`, m.cfg.NodeID), clientv3.WithLease(lease))
		cancel()
		if err != nil {
			m.setNotReady(fmt.Errorf("ownership: etcd member key: %w", err))
			return
		}
		m.mu.Lock()
		m.registered, m.joinedAt = true, time.Now()
		m.mu.Unlock()
	}

	m.mu.Lock()
	switch {
	case !m.ownersSynced || !m.membersSynced:
		m.notReady = errors.New("ownership: etcd watch not in sync (no etcd leader?)")
	default:
		m.notReady = nil
	}
	ready := m.notReady == nil && m.validLocked(time.Now())
	settled := time.Since(m.joinedAt) >= m.cfg.Settle
	m.mu.Unlock()
	if ready && settled {
		m.rebalance(lease)
	}
}

func (m *Member) revoke(lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.cfg.Client.Revoke(ctx, lease)
}

// share is how many partitions a member may hold: ceil(partitions/live).
func share(partitions int32, live int) int {
	live = max(live, 1)
	return (int(partitions) + live - 1) / live
}

// rebalance releases partitions above this member's share, or claims free
// ones up to it. Members scan the free partitions from different starting
// points (by node id) so that they rarely race for the same one.
func (m *Member) rebalance(lease clientv3.LeaseID) {
	m.mu.Lock()
	live := len(m.members)
	if _, ok := m.members[m.cfg.NodeID]; !ok {
		live++
	}
	want := share(m.cfg.Partitions, live)
	var release, free, strays []int32
	for p, e := range m.owners {
		if _, mine := m.owned[p]; e.owner.NodeID == m.cfg.NodeID && !mine {
			strays = append(strays, p)
		}
	}
	if n := len(m.owned); n > want {
		// Release the highest-numbered extras (any choice balances; this
		// one is deterministic).
		for p := m.cfg.Partitions - 1; p >= 0 && len(release) < n-want; p-- {
			if _, ok := m.owned[p]; ok {
				release = append(release, p)
			}
		}
	} else if n < want {
		P := m.cfg.Partitions
		start := int32((int64(m.cfg.NodeID) * int64(P) / int64(max(live, 1))) % int64(P))
		if start < 0 {
			start += P
		}
		for i := range P {
			p := (start + i) % P
			if _, taken := m.owners[p]; !taken {
				free = append(free, p)
			}
		}
		if len(free) > want-n {
			free = free[:want-n]
		}
	}
	m.mu.Unlock()

	for _, p := range strays {
		m.deleteStray(p)
	}
	for _, p := range release {
		m.release(p)
	}
	for _, p := range free {
		if m.ctx.Err() != nil {
			return
		}
		m.acquire(lease, p)
	}
}

// acquire takes free partition p: one Txn that puts epoch+1 and the owner
// key with the lease, if the owner key is missing and the epoch key is as
// this member last saw it.
func (m *Member) acquire(lease clientv3.LeaseID, p int32) {
	l := m.cfg.Layout
	m.mu.Lock()
	if !m.validLocked(time.Now()) || m.lease != lease {
		m.mu.Unlock()
		return
	}
	ep := m.epochs[p]
	m.mu.Unlock()
	owner := txnetcd.Owner{NodeID: m.cfg.NodeID, Epoch: ep.value + 1}
	ctx, cancel := m.opCtx()
	resp, err := m.cfg.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(l.OwnerKey(p)), "=", 0),
		clientv3.Compare(clientv3.ModRevision(l.EpochKey(p)), "=", ep.rev),
	).Then(
		clientv3.OpPut(l.EpochKey(p), strconv.Itoa(int(owner.Epoch))),
		clientv3.OpPut(l.OwnerKey(p), owner.Value(), clientv3.WithLease(lease)),
	).Commit()
	cancel()
	if err != nil {
		// Unknown outcome: if it was applied, the watch shows an owner
		// value of ours that we do not hold, and rebalance deletes it.
		m.log.Debug().Err(err).Int32("partition", p).Msg("ownership: acquire failed")
		return
	}
	if !resp.Succeeded {
		return // another member was first; the watch brings its record
	}
	rev := resp.Header.Revision
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease != lease {
		return // the lease was given up meanwhile; its keys go with it
	}
	m.owners[p] = ownerEntry{owner: owner, rev: rev}
	m.epochs[p] = epochEntry{value: owner.Epoch, rev: rev}
	if _, ok := m.owned[p]; !ok {
		m.owned[p] = owned{owner: owner, rev: rev, fence: txnetcd.NewFence(p, owner)}
		m.events.push(Event{Partition: p, Epoch: owner.Epoch, Acquired: true})
		// Debug: a start acquires every partition at once; the node's
		// summary line counts them (txncoord up), a loss stays at info.
		m.log.Debug().Int32("partition", p).Int32("epoch", owner.Epoch).Msg("ownership: acquired partition")
	}
}

// release gives partition p up: it is reported lost first (the
// coordinator stops writing to it), then its owner key is deleted if it is
// still ours.
func (m *Member) release(p int32) {
	m.mu.Lock()
	o, ok := m.owned[p]
	if ok {
		m.loseLocked(p, "released to balance")
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	key := m.cfg.Layout.OwnerKey(p)
	ctx, cancel := m.opCtx()
	defer cancel()
	if _, err := m.cfg.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(key), "=", o.owner.Value()),
	).Then(clientv3.OpDelete(key)).Commit(); err != nil {
		// The key stays until the lease expires; nobody else can take p
		// meanwhile, which delays the move but is safe.
		m.log.Warn().Err(err).Int32("partition", p).Msg("ownership: release failed")
	}
}

// deleteStray deletes an owner key of this node that the member does not
// hold: an acquisition whose answer was lost, or a key of a lease it gave
// up. Adopting it instead could resurrect an ownership the member already
// reported lost; deleting it frees p for a fresh acquisition with a higher
// epoch.
func (m *Member) deleteStray(p int32) {
	m.mu.Lock()
	e, ok := m.owners[p]
	_, mine := m.owned[p]
	m.mu.Unlock()
	if !ok || mine || e.owner.NodeID != m.cfg.NodeID {
		return
	}
	key := m.cfg.Layout.OwnerKey(p)
	ctx, cancel := m.opCtx()
	defer cancel()
	m.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", e.owner.Value())).
		Then(clientv3.OpDelete(key)).Commit()
}

// keepalive renews the lease every interval. Each success extends the
// local validity to the send time plus the TTL: the server renewed the
// lease on receipt, after the send, so it expires no earlier.
func (m *Member) keepalive() {
	defer m.wg.Done()
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		if m.paused.Load() {
			continue
		}
		m.mu.Lock()
		lease := m.lease
		m.mu.Unlock()
		if lease == 0 {
			continue
		}
		start := time.Now()
		ctx, cancel := m.opCtx()
		resp, err := m.cfg.Client.KeepAliveOnce(ctx, lease)
		cancel()
		m.mu.Lock()
		if m.lease != lease {
			m.mu.Unlock()
			continue
		}
		switch {
		case err == nil && resp.TTL > 0:
			if until := start.Add(time.Duration(resp.TTL) * time.Second); until.After(m.validUntil) {
				m.validUntil = until
			}
			m.kaErr = nil
		case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
			// The lease is gone at the server: nothing is ours any more.
			m.kaErr = errors.New("lease not found at the server")
			m.validUntil = time.Now()
			m.wake()
		default:
			if m.ctx.Err() == nil {
				m.kaErr = err
			}
		}
		m.mu.Unlock()
	}
}

// watch keeps a cache of every key under prefix: a linearizable read, then
// a watch from the revision after it (requiring an etcd leader, so a
// member cut off from the quorum notices); on any failure it starts over.
func (m *Member) watch(prefix string, synced *bool, reset func([]*mvccpb.KeyValue, int64), apply func(*clientv3.Event)) {
	defer m.wg.Done()
	for m.ctx.Err() == nil {
		ctx, cancel := m.opCtx()
		resp, err := m.cfg.Client.Get(ctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		m.mu.Lock()
		reset(resp.Kvs, resp.Header.Revision)
		*synced = true
		m.mu.Unlock()
		m.wake()

		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(m.ctx))
		for wr := range m.cfg.Client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil || wr.Canceled {
				break
			}
			m.mu.Lock()
			for _, ev := range wr.Events {
				apply(ev)
			}
			m.mu.Unlock()
			m.wake()
		}
		wcancel()
		m.mu.Lock()
		*synced = false
		m.mu.Unlock()
		m.wake()
	}
}

// partitionKey parses <prefix>/txn/partitions/<p>/<kind>.
func (m *Member) partitionKey(key []byte) (p int32, kind string, ok bool) {
	rest, found := strings.CutPrefix(string(key), m.partitionsPrefix())
	if !found {
		return 0, "", false
	}
	ps, kind, found := strings.Cut(rest, "/")
	if !found {
		return 0, "", false
	}
	n, err := strconv.ParseInt(ps, 10, 32)
	if err != nil || n < 0 || n >= int64(m.cfg.Partitions) {
		return 0, "", false
	}
	return int32(n), kind, true
}

func (m *Member) resetPartitions(kvs []*mvccpb.KeyValue, rev int64) {
	owners := map[int32]ownerEntry{}
	epochs := map[int32]epochEntry{}
	for _, kv := range kvs {
		p, kind, ok := m.partitionKey(kv.Key)
		if !ok {
			continue
		}
		switch kind {
		case "owner":
			if o, err := txnetcd.ParseOwner(kv.Value); err == nil {
				owners[p] = ownerEntry{owner: o, rev: kv.ModRevision}
			}
		case "epoch":
			if e, err := strconv.ParseInt(string(kv.Value), 10, 32); err == nil {
				epochs[p] = epochEntry{value: int32(e), rev: kv.ModRevision}
			}
		}
	}
	// Entries written by our own acquisitions after this read stay.
	for p, e := range m.owners {
		if e.rev > rev {
			owners[p] = e
		}
	}
	for p, e := range m.epochs {
		if e.rev > rev {
			epochs[p] = e
		}
	}
	m.owners, m.epochs = owners, epochs
	for p, o := range m.owned {
		if o.rev > rev {
			continue
		}
		if e, ok := owners[p]; !ok || e.owner != o.owner {
			m.loseLocked(p, "owner key changed")
		}
	}
}

func (m *Member) applyPartition(ev *clientv3.Event) {
	p, kind, ok := m.partitionKey(ev.Kv.Key)
	if !ok {
		return
	}
	rev := ev.Kv.ModRevision
	switch kind {
	case "owner":
		if cur, ok := m.owners[p]; ok && cur.rev > rev {
			return // older than what we wrote ourselves
		}
		if ev.Type == clientv3.EventTypeDelete {
			delete(m.owners, p)
		} else if o, err := txnetcd.ParseOwner(ev.Kv.Value); err == nil {
			m.owners[p] = ownerEntry{owner: o, rev: rev}
		}
		if o, mine := m.owned[p]; mine && rev > o.rev {
			if e, ok := m.owners[p]; !ok || e.owner != o.owner {
				m.loseLocked(p, "owner key changed")
			}
		}
	case "epoch":
		if cur, ok := m.epochs[p]; ok && cur.rev > rev {
			return
		}
		if ev.Type == clientv3.EventTypeDelete {
			delete(m.epochs, p)
		} else if e, err := strconv.ParseInt(string(ev.Kv.Value), 10, 32); err == nil {
			m.epochs[p] = epochEntry{value: int32(e), rev: rev}
		}
	}
}

func (m *Member) memberID(key []byte) (int32, bool) {
	rest, found := strings.CutPrefix(string(key), m.membersPrefix())
	if !found {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	return int32(n), err == nil
}

func (m *Member) resetMembers(kvs []*mvccpb.KeyValue, _ int64) {
	m.members = map[int32]int64{}
	for _, kv := range kvs {
		if n, ok := m.memberID(kv.Key); ok {
			m.members[n] = kv.ModRevision
		}
	}
}

func (m *Member) applyMember(ev *clientv3.Event) {
	n, ok := m.memberID(ev.Kv.Key)
	if !ok {
		return
	}
	if ev.Type == clientv3.EventTypeDelete {
		delete(m.members, n)
	} else {
		m.members[n] = ev.Kv.ModRevision
	}
}
