package leaderstub

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/shares"
	"github.com/txncoord/txncoord/storage"
)

// Share partitions (KIP-932): the state of every share group on every
// partition this leader leads, kept by package shares' state machine,
// and the share sessions of the members fetching here.
//
// Durability: a share partition's snapshot (shares.Partition.Encode) is
// appended to the process log under shareMu after every change that must
// survive a restart (its creation, acknowledgements, releases, expired
// locks, an admin reset); acquisitions are not written (a restart makes
// acquired records available again). ShareAcknowledge, and a ShareFetch
// that carried acknowledgements, are answered only once the snapshots
// they changed are durable.
//
// Record, version shareStateVersion (big endian; n is a uvarint):
//
//	u8 version, n + group, n + topic, i32 partition,
//	u8 deleted (1: forget the share partition), [snapshot]
//
// bbolt: shares/<group>\x00<topic>\x00<partition> → snapshot.
const shareStateVersion = 3

var bucketShares = []byte("shares")

// shareKey names one share partition.
type shareKey struct {
	group, topic string
	partition    int32
}

func (k shareKey) bytes() []byte {
	return fmt.Appendf(nil, "%s\x00%s\x00%d", k.group, k.topic, k.partition)
}

func parseShareKey(b []byte) (shareKey, error) {
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 {
		return shareKey{}, fmt.Errorf("leaderstub: bad share key %q", b)
	}
	var p int32
	if _, err := fmt.Sscan(parts[2], &p); err != nil {
		return shareKey{}, fmt.Errorf("leaderstub: bad share key %q", b)
	}
	return shareKey{parts[0], parts[1], p}, nil
}

// shareSessionKey names a share session: one per member at each leader.
type shareSessionKey struct{ group, member string }

// shareSession is a member's share session at this leader (KIP-932):
// its epoch and the partitions it fetches.
type shareSession struct {
	// conn is the connection that opened the session (wire's ConnID):
	// when it ends the session ends, as in Kafka, whose share session
	// cache releases a member's records when the client disconnects.
	conn       uint64
	epoch      int32
	partitions map[topicPartitionID]bool // true: must appear in the next answer
	lastUsed   time.Time
}

type topicPartitionID struct {
	id        [16]byte
	partition int32
}

// shareState is the leader's share partitions and sessions, under mu.
type shareState struct {
	mu       sync.Mutex
	parts    map[shareKey]*shares.Partition
	sessions map[shareSessionKey]*shareSession
}

func newShareState() *shareState {
	return &shareState{parts: map[shareKey]*shares.Partition{}, sessions: map[shareSessionKey]*shareSession{}}
}

// maxShareSessions bounds the share sessions of one leader (Kafka's
// group.share.max.share.sessions default).
const maxShareSessions = 2000

// roomForSession reports whether a new share session fits: below the
// limit, or once the least recently used session, unused for longer than
// any member's session may last (its member is gone: fenced by the
// coordinator, which releases its records), is evicted. A session also
// ends with its connection (connectionEnded), as in Kafka; this covers
// those opened by in-process callers, which have no connection to end.
// The caller holds mu.
func (s *shareState) roomForSession(now time.Time) bool {
	if len(s.sessions) < maxShareSessions {
		return true
	}
	var oldest shareSessionKey
	var at time.Time
	for k, sess := range s.sessions {
		if at.IsZero() || sess.lastUsed.Before(at) {
			oldest, at = k, sess.lastUsed
		}
	}
	if now.Sub(at) <= shares.MaxSessionTimeout {
		return false
	}
	delete(s.sessions, oldest)
	return true
}

func encodeShareState(k shareKey, p *shares.Partition) []byte {
	out := []byte{shareStateVersion}
	out = appendBytes(out, []byte(k.group))
	out = appendBytes(out, []byte(k.topic))
	out = binary.BigEndian.AppendUint32(out, uint32(k.partition))
	if p == nil {
		return append(out, 1)
	}
	out = append(out, 0)
	return append(out, p.Encode()...)
}

func applyShareState(root storage.Root, raw []byte) error {
	r := recordio.NewReader(raw[1:], errBadRecord)
	k := shareKey{group: string(r.Bytes()), topic: string(r.Bytes())}
	k.partition = int32(r.Uint32())
	deleted := r.Flag()
	snap := r.Take(r.Len())
	if r.Err() != nil {
		return r.Err()
	}
	b, err := root.CreateBucketIfNotExists(bucketShares)
	if err != nil {
		return err
	}
	if deleted {
		return b.Delete(k.bytes())
	}
	if _, err := shares.Decode(snap); err != nil {
		return err
	}
	return b.Put(k.bytes(), bytes.Clone(snap))
}

// recoverShares loads every share partition's snapshot.
func (l *Leader) recoverShares(r storage.Root) error {
	b := r.Bucket(bucketShares)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		key, err := parseShareKey(k)
		if err != nil {
			return err
		}
		p, err := shares.Decode(v)
		if err != nil {
			return fmt.Errorf("leaderstub: share partition %s/%s/%d: %w", key.group, key.topic, key.partition, err)
		}
		l.shares.parts[key] = p
		return nil
	})
}

// persistShare appends a share partition's snapshot (nil: its deletion).
// The caller holds shares.mu, so snapshots are in the log in the order of
// the changes.
func (l *Leader) persistShare(k shareKey, p *shares.Partition) <-chan error {
	_, done := l.space.Submit(encodeShareState(k, p), nil)
	return done
}

// shareConfig is a group's effective share configuration.
func (l *Leader) shareConfig(group string) shares.Config {
	return shares.ConfigOf(l.cfg.View.GroupConfigs(group))
}

// sharePartition returns (creating and persisting it) the share
// partition of group on p; the caller holds shares.mu. A new one starts
// where share.auto.offset.reset says: the high watermark (latest), else
// the log start.
func (l *Leader) sharePartition(k shareKey, p *partition, cfg shares.Config, waits *[]<-chan error) *shares.Partition {
	sp, ok := l.shares.parts[k]
	p.mu.RLock()
	logStart, hw := p.logStart, p.hw
	p.mu.RUnlock()
	if ok {
		sp.Truncate(logStart)
		return sp
	}
	start := hw
	if cfg.AutoOffsetReset != "latest" {
		start = logStart
	}
	sp = shares.New(start)
	l.shares.parts[k] = sp
	*waits = append(*waits, l.persistShare(k, sp))
	return sp
}

// shareSpans reads the log from offset from up to the high watermark (the
// last stable offset under read_committed) as spans for Acquire: control
// batches, and aborted transactions' batches under read_committed, are
// spans to skip. It stops once the data spans hold want offsets.
func (p *partition) shareSpans(from int64, readCommitted bool, want int) []shares.Span {
	p.mu.RLock()
	defer p.mu.RUnlock()
	bound := p.hw
	if readCommitted {
		bound = p.lso()
	}
	var out []shares.Span
	n := 0
	for i := p.findBatch(from); i < len(p.batches) && p.batches[i].Base < bound && n < want; i++ {
		b := p.batches[i]
		skip := b.Control || (readCommitted && b.Transactional && p.abortedBatch(b))
		out = append(out, shares.Span{First: b.Base, Last: b.Last, Skip: skip})
		if !skip {
			n += int(b.Last - max(b.Base, from) + 1)
		}
	}
	return out
}

// abortedBatch reports whether a transactional batch belongs to an
// aborted transaction. The caller holds mu.
func (p *partition) abortedBatch(b batchIndex) bool {
	for _, a := range p.aborted {
		if a.ProducerID == b.ProducerID && a.FirstOffset <= b.Base && b.Base < a.LastOffset {
			return true
		}
	}
	return false
}

// readRange returns the stored batches that hold offsets first..last.
func (l *Leader) readRange(p *partition, first, last int64) ([]byte, error) {
	p.mu.RLock()
	var refs []fetchedBatch
	for i := p.findBatch(first); i < len(p.batches) && p.batches[i].Base <= last; i++ {
		refs = append(refs, fetchedBatch{base: p.batches[i].Base, raw: p.batches[i].raw})
	}
	p.mu.RUnlock()
	raws, err := l.readBatches(p, refs)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, raw := range raws {
		if raw == nil {
			break // dropped by retention meanwhile
		}
		out = append(out, raw...)
	}
	return out, nil
}

// expireShareLocks releases the records whose acquisition lock expired,
// persists the partitions that changed, and wakes waiting fetches.
func (l *Leader) expireShareLocks() (int, error) {
	now := l.cfg.Now()
	l.shares.mu.Lock()
	var waits []<-chan error
	for k, sp := range l.shares.parts {
		if sp.Expire(now, l.shareConfig(k.group)) {
			waits = append(waits, l.persistShare(k, sp))
		}
	}
	l.shares.mu.Unlock()
	if len(waits) == 0 {
		return 0, nil
	}
	l.notify()
	return len(waits), waitAll(waits)
}

func waitAll(waits []<-chan error) error {
	var err error
	for _, w := range waits {
		if e := <-w; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// ReleaseShareMember releases the records a member of group holds on
// this leader's partitions and drops its share session: the group
// coordinator calls it when the member leaves or is fenced (Kafka's
// share-group listener), so its records go to the other members before
// their locks expire.
func (l *Leader) ReleaseShareMember(group, member string) error {
	l.shares.mu.Lock()
	delete(l.shares.sessions, shareSessionKey{group, member})
	var waits []<-chan error
	for k, sp := range l.shares.parts {
		if k.group == group && sp.ReleaseMember(member, l.shareConfig(group)) {
			waits = append(waits, l.persistShare(k, sp))
		}
	}
	l.shares.mu.Unlock()
	if len(waits) > 0 {
		l.notify()
	}
	return waitAll(waits)
}

// SharePartitionInfo is one share partition as the admin views show it.
type SharePartitionInfo struct {
	Topic     string
	Partition int32
	// StartOffset is the share-partition start offset; EndOffset the
	// partition's high watermark; Lag the records from the start offset
	// to it not yet finished (Kafka's share-group lag, KIP-1226).
	StartOffset, EndOffset, Lag int64
	Acquired, Available         int
}

// ShareGroupPartitions lists group's share partitions on this leader.
func (l *Leader) ShareGroupPartitions(group string) []SharePartitionInfo {
	l.shares.mu.Lock()
	var out []SharePartitionInfo
	type item struct {
		k  shareKey
		sp *shares.Partition
	}
	var items []item
	for k, sp := range l.shares.parts {
		if k.group == group {
			acq, avail := sp.Counts()
			out = append(out, SharePartitionInfo{Topic: k.topic, Partition: k.partition, StartOffset: sp.Start(),
				Acquired: acq, Available: avail})
			items = append(items, item{k, sp})
		}
	}
	l.shares.mu.Unlock()
	for i := range out {
		p, kerrE := l.partitionFor(out[i].Topic, out[i].Partition)
		if kerrE != nil {
			out[i].EndOffset = -1
			continue
		}
		p.mu.RLock()
		out[i].EndOffset = p.hw
		p.mu.RUnlock()
		out[i].Lag = max(0, out[i].EndOffset-out[i].StartOffset)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// ShareGroups lists the groups with share partitions on this leader.
func (l *Leader) ShareGroups() []string {
	l.shares.mu.Lock()
	defer l.shares.mu.Unlock()
	var out []string
	for k := range l.shares.parts {
		if !slices.Contains(out, k.group) {
			out = append(out, k.group)
		}
	}
	sort.Strings(out)
	return out
}

// AlterShareOffset sets group's share-partition start offset on topic's
// partition (AlterShareGroupOffsets; the coordinator checked that the
// group has no members), creating the share partition if needed, and
// waits until it is durable. An offset past the high watermark is
// clamped to it; below the log start, to the log start.
func (l *Leader) AlterShareOffset(group, topic string, partition int32, offset int64) error {
	p, kerrE := l.partitionFor(topic, partition)
	if kerrE != nil {
		return kerrE
	}
	p.mu.RLock()
	offset = min(max(offset, p.logStart), p.hw)
	p.mu.RUnlock()
	k := shareKey{group, topic, partition}
	l.shares.mu.Lock()
	sp, ok := l.shares.parts[k]
	if !ok {
		sp = shares.New(offset)
		l.shares.parts[k] = sp
	}
	sp.Reset(offset)
	done := l.persistShare(k, sp)
	l.shares.mu.Unlock()
	return <-done
}

// DeleteShareState forgets group's share partitions of topic (all
// partitions when partition < 0; every topic when topic is ""), and waits
// until that is durable.
func (l *Leader) DeleteShareState(group, topic string, partition int32) error {
	l.shares.mu.Lock()
	var waits []<-chan error
	for k := range l.shares.parts {
		if k.group == group && (topic == "" || k.topic == topic) && (partition < 0 || k.partition == partition) {
			delete(l.shares.parts, k)
			waits = append(waits, l.persistShare(k, nil))
		}
	}
	l.shares.mu.Unlock()
	return waitAll(waits)
}

// dropShareTopic forgets every share partition of a deleted topic.
func (l *Leader) dropShareTopic(topic string) {
	l.shares.mu.Lock()
	for k := range l.shares.parts {
		if k.topic == topic {
			delete(l.shares.parts, k)
			l.persistShare(k, nil)
		}
	}
	l.shares.mu.Unlock()
}

// ackBatches converts request acknowledgement batches.
func ackBatches[B any](in []B, get func(B) (int64, int64, []int8)) []shares.AckBatch {
	out := make([]shares.AckBatch, 0, len(in))
	for _, b := range in {
		f, la, t := get(b)
		out = append(out, shares.AckBatch{First: f, Last: la, Types: t})
	}
	return out
}

// shareAck applies one partition's acknowledgements; the caller holds
// shares.mu. It returns the error code and appends the durable wait.
func (l *Leader) shareAck(now time.Time, group, member string, id [16]byte, partition int32, batches []shares.AckBatch,
	renew bool, waits *[]<-chan error) int16 {
	t, ok := l.cfg.View.TopicByID(id)
	if !ok {
		return kerr.UnknownTopicID.Code
	}
	p, kerrE := l.partitionFor(t.Name, partition)
	if kerrE != nil {
		return kerrE.Code
	}
	k := shareKey{group, t.Name, partition}
	cfg := l.shareConfig(group)
	sp := l.sharePartition(k, p, cfg, waits)
	if code := sp.Ack(now, member, batches, renew, cfg); code != 0 {
		return code
	}
	*waits = append(*waits, l.persistShare(k, sp))
	return 0
}

// validShareMember is Kafka's check of a ShareFetch/ShareAcknowledge
// member id: present and at most 36 characters (a UUID); membership is
// not checked at the leader.
func validShareMember(group, member *string) bool {
	return group != nil && *group != "" && member != nil && *member != "" && len(*member) <= 36
}

// hostPortOf splits a node address for a response's node endpoints.
func hostPortOf(addr string) (string, int32) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(port)
	return host, int32(n)
}

// closeShareSession ends a share session: the records its member holds
// on the session's partitions go back to the group now rather than when
// their locks expire. The caller holds shares.mu and waits for the
// returned writes.
func (l *Leader) closeShareSession(key shareSessionKey, sess *shareSession) []<-chan error {
	cfg := l.shareConfig(key.group)
	var waits []<-chan error
	for tp := range sess.partitions {
		if t, ok := l.cfg.View.TopicByID(tp.id); ok {
			k := shareKey{key.group, t.Name, tp.partition}
			if sp, ok := l.shares.parts[k]; ok && sp.ReleaseMember(key.member, cfg) {
				waits = append(waits, l.persistShare(k, sp))
			}
		}
	}
	delete(l.shares.sessions, key)
	return waits
}

// connectionEnded ends the share sessions the connection opened (Kafka's
// ShareSessionCache on a client's disconnect: the member is gone from
// this broker), releasing their members' records. A session opened again
// on another connection since is that connection's, and stays.
func (l *Leader) connectionEnded(conn uint64) {
	l.shares.mu.Lock()
	var waits []<-chan error
	for key, sess := range l.shares.sessions {
		if sess.conn == conn {
			waits = append(waits, l.closeShareSession(key, sess)...)
		}
	}
	l.shares.mu.Unlock()
	if len(waits) == 0 {
		return
	}
	l.notify()
	if err := waitAll(waits); err != nil && !l.stopped() { // closing: the next start finds them acquired, so available
		l.cfg.Log.Error().Err(err).Msg("records of a share session closed by its connection's end not released durably")
	}
}

// topicNameOf is the name of the topic with id.
func (l *Leader) topicNameOf(id [16]byte) (string, bool) {
	t, ok := l.cfg.View.TopicByID(id)
	return t.Name, ok
}

// shareStateErrCode is a share-state change's error as a Kafka code.
func shareStateErrCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	}
	return kerr.KafkaStorageError.Code
}
