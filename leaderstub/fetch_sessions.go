package leaderstub

// Fetch sessions (KIP-227), as Kafka's FetchManager and FetchSessionCache
// keep them.
//
// A Fetch v7+ with SessionEpoch 0 is a full fetch: the leader answers
// every listed partition and creates a session holding them (a fresh
// random SessionID in the answer; 0 when the cache is full and nothing can
// be evicted), its next epoch 1. Each later request of that session is
// incremental: it names the SessionID and the epoch the leader expects,
// lists only the partitions that are new or whose fetch offset or max
// bytes changed, and ForgottenTopics for those to drop; the leader fetches
// every partition of the session and answers only those with something to
// say: records, a new high watermark or log start offset, or an error.
// Partitions that returned records move to the back of the session, so a
// byte limit does not starve the ones behind them.
//
//   - SessionEpoch -1 (FINAL) with a SessionID closes that session; with or
//     without one, the request is answered sessionless (SessionID 0);
//   - SessionEpoch 0 with a SessionID drops that session first (a client
//     resets its session this way);
//   - an unknown SessionID is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
//     INVALID_FETCH_SESSION_EPOCH, a session created with topic ids (v13+)
//     asked at v≤12 or the other way round FETCH_SESSION_TOPIC_ID_ERROR:
//     a top-level error, no partitions, SessionID 0, and the client starts
//     over with a full fetch;
//   - an incremental fetch that leaves the session empty removes it and is
//     answered sessionless;
//   - two requests racing on one epoch: the one answered second gets
//     INVALID_FETCH_SESSION_EPOCH (Kafka checks the epoch again when it
//     builds the answer).
//
// The cache holds fetchSessionSlots sessions (Kafka's
// max.incremental.fetch.session.cache.slots, 1000). When it is full, a
// new session evicts the least recently used one if that was idle for
// fetchSessionEvictAfter (Kafka's 120 s); else the smallest session older
// than that, if the new one has more partitions; else no session is
// created and the client keeps sending full fetches. Sessions live in
// memory only: after a restart every SessionID is unknown and clients
// start over, as with a Kafka broker restart.

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	fetchSessionSlots      = 1000
	fetchSessionEvictAfter = 120 * time.Second

	epochInitial = 0  // a full fetch that may create a session
	epochFinal   = -1 // a full fetch that closes the session, if any
)

// nextEpoch is FetchMetadata.nextEpoch: FINAL stays FINAL, and the epoch
// wraps to 1, never to 0 (which would mean a full fetch).
func nextEpoch(e int32) int32 {
	switch {
	case e < 0:
		return epochFinal
	case e == math.MaxInt32:
		return 1
	default:
		return e + 1
	}
}

// sessionKey identifies a partition in a session: by topic id in a v13+
// session, by name below.
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sessionPart is one partition of a session: what the client asked for,
// and what the last answer told it (a partition is answered again only
// when that changed).
type sessionPart struct {
	key      sessionKey
	offset   int64
	maxBytes int32
	hw       int64
	logStart int64
}

type fetchSession struct {
	id    int32
	epoch int32 // the epoch the next request must carry
	byID  bool  // created at v13+: partitions by topic id
	parts []*sessionPart
	index map[sessionKey]*sessionPart

	created, used time.Time
}

// fetchSessionCache is a leader's sessions. One mutex: sessions are
// touched once per Fetch, and their partition lists are small.
type fetchSessionCache struct {
	mu         sync.Mutex
	slots      int
	evictAfter time.Duration
	now        func() time.Time
	sessions   map[int32]*fetchSession
	evictions  int // for tests
}

func newFetchSessionCache(now func() time.Time) *fetchSessionCache {
	return &fetchSessionCache{slots: fetchSessionSlots, evictAfter: fetchSessionEvictAfter, now: now,
		sessions: map[int32]*fetchSession{}}
}

// fetchTarget is one partition a Fetch reads.
type fetchTarget struct {
	key      sessionKey
	offset   int64
	maxBytes int32
}

// fetchContext is what a Fetch request means given the session cache,
// decided when the request is handled (in connection order) and used
// again when its answer is built.
type fetchContext struct {
	cache    *fetchSessionCache
	version  int16
	errCode  int16         // a session error: answered with no partitions
	session  *fetchSession // incremental
	create   bool          // full fetch: create a session when answering
	reqEpoch int32
	targets  []fetchTarget
}

// requestTargets lists a request's partitions in request order.
func requestTargets(req *kmsg.FetchRequest, byID bool) []fetchTarget {
	var out []fetchTarget
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := sessionKey{partition: rp.Partition}
			if byID {
				k.id = rt.TopicID
			} else {
				k.topic = rt.Topic
			}
			out = append(out, fetchTarget{key: k, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes})
		}
	}
	return out
}

// newContext is FetchManager.newContext.
func (c *fetchSessionCache) newContext(req *kmsg.FetchRequest, version int16) *fetchContext {
	byID := version >= 13
	fc := &fetchContext{cache: c, version: version, reqEpoch: req.SessionEpoch}
	if version < 7 { // no sessions before v7
		fc.targets = requestTargets(req, byID)
		return fc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.SessionEpoch == epochInitial || req.SessionEpoch == epochFinal {
		if req.SessionID != 0 {
			delete(c.sessions, req.SessionID)
		}
		fc.create = req.SessionEpoch == epochInitial
		fc.targets = requestTargets(req, byID)
		return fc
	}
	s, ok := c.sessions[req.SessionID]
	switch {
	case !ok:
		fc.errCode = kerr.FetchSessionIDNotFound.Code
		return fc
	case s.epoch != req.SessionEpoch:
		fc.errCode = kerr.InvalidFetchSessionEpoch.Code
		return fc
	case s.byID != byID:
		fc.errCode = kerr.FetchSessionTopicIDError.Code
		return fc
	}
	for _, t := range requestTargets(req, byID) {
		if p, ok := s.index[t.key]; ok {
			p.offset, p.maxBytes = t.offset, t.maxBytes
			continue
		}
		p := &sessionPart{key: t.key, offset: t.offset, maxBytes: t.maxBytes, hw: -1, logStart: -1}
		s.parts = append(s.parts, p)
		s.index[t.key] = p
	}
	for _, ft := range req.ForgottenTopics {
		for _, partition := range ft.Partitions {
			k := sessionKey{partition: partition}
			if byID {
				k.id = ft.TopicID
			} else {
				k.topic = ft.Topic
			}
			if _, ok := s.index[k]; ok {
				delete(s.index, k)
				s.parts = removePart(s.parts, k)
			}
		}
	}
	if len(s.parts) == 0 {
		delete(c.sessions, s.id)
		fc.targets = requestTargets(req, byID)
		return fc
	}
	s.used = c.now()
	s.epoch = nextEpoch(s.epoch)
	fc.session = s
	for _, p := range s.parts {
		fc.targets = append(fc.targets, fetchTarget{key: p.key, offset: p.offset, maxBytes: p.maxBytes})
	}
	return fc
}

func removePart(parts []*sessionPart, k sessionKey) []*sessionPart {
	for i, p := range parts {
		if p.key == k {
			return append(parts[:i], parts[i+1:]...)
		}
	}
	return parts
}

// fetchResult is one target's answer.
type fetchResult struct {
	target fetchTarget
	fp     kmsg.FetchResponseTopicPartition
}

// respond builds the Fetch response from the partitions' answers:
// everything for a full or sessionless fetch (creating the session of a
// full one), what changed for an incremental one.
func (fc *fetchContext) respond(resp *kmsg.FetchResponse, results []fetchResult) {
	if fc.errCode != 0 {
		resp.ErrorCode = fc.errCode
		return
	}
	switch {
	case fc.session != nil:
		var ok bool
		if results, ok = fc.cache.incremental(fc, results); !ok {
			resp.ErrorCode, resp.SessionID = kerr.InvalidFetchSessionEpoch.Code, fc.session.id
			return
		}
		resp.SessionID = fc.session.id
	case fc.create:
		resp.SessionID = fc.cache.create(fc.version >= 13, results)
	}
	var t *kmsg.FetchResponseTopic
	for _, r := range results {
		if t == nil || t.Topic != r.target.key.topic || t.TopicID != r.target.key.id {
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			t = &resp.Topics[len(resp.Topics)-1]
			t.Topic, t.TopicID = r.target.key.topic, r.target.key.id
		}
		t.Partitions = append(t.Partitions, r.fp)
	}
}

// incremental keeps what must be answered and updates the session (false:
// another request of the session was handled meanwhile).
func (c *fetchSessionCache) incremental(fc *fetchContext, results []fetchResult) ([]fetchResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fc.session
	if s.epoch != nextEpoch(fc.reqEpoch) {
		return nil, false
	}
	var out []fetchResult
	var moved []*sessionPart
	for _, r := range results {
		p, ok := s.index[r.target.key]
		if !ok {
			continue
		}
		must := len(r.fp.RecordBatches) > 0 || r.fp.ErrorCode != 0 ||
			p.hw != r.fp.HighWatermark || p.logStart != r.fp.LogStartOffset
		p.hw, p.logStart = r.fp.HighWatermark, r.fp.LogStartOffset
		if r.fp.ErrorCode != 0 {
			p.hw = -1
		}
		if len(r.fp.RecordBatches) > 0 {
			moved = append(moved, p)
		}
		if must {
			out = append(out, r)
		}
	}
	for _, p := range moved { // to the back, in the order they were read
		s.parts = append(removePart(s.parts, p.key), p)
	}
	return out, true
}

// create adds a session for a full fetch's partitions and returns its id
// (0: no room).
func (c *fetchSessionCache) create(byID bool, results []fetchResult) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.sessions) >= c.slots && !c.evictLocked(now, len(results)) {
		return 0
	}
	s := &fetchSession{epoch: nextEpoch(epochInitial), byID: byID, index: map[sessionKey]*sessionPart{}, created: now, used: now}
	for {
		s.id = rand.Int32N(math.MaxInt32-1) + 1
		if _, taken := c.sessions[s.id]; !taken {
			break
		}
	}
	for _, r := range results {
		if _, dup := s.index[r.target.key]; dup {
			continue
		}
		p := &sessionPart{key: r.target.key, offset: r.target.offset, maxBytes: r.target.maxBytes,
			hw: r.fp.HighWatermark, logStart: r.fp.LogStartOffset}
		if r.fp.ErrorCode != 0 {
			p.hw = -1
		}
		s.parts = append(s.parts, p)
		s.index[p.key] = p
	}
	c.sessions[s.id] = s
	return s.id
}

// evictLocked makes room for a session of size partitions, as Kafka's
// FetchSessionCacheShard.tryEvict does for unprivileged (consumer)
// sessions.
func (c *fetchSessionCache) evictLocked(now time.Time, size int) bool {
	var lru, smallest *fetchSession
	for _, s := range c.sessions {
		if lru == nil || s.used.Before(lru.used) || (s.used.Equal(lru.used) && s.id < lru.id) {
			lru = s
		}
		if now.Sub(s.created) > c.evictAfter &&
			(smallest == nil || len(s.parts) < len(smallest.parts) || (len(s.parts) == len(smallest.parts) && s.id < smallest.id)) {
			smallest = s
		}
	}
	switch {
	case lru == nil:
		return false
	case now.Sub(lru.used) > c.evictAfter:
		delete(c.sessions, lru.id)
	case smallest != nil && size > len(smallest.parts):
		delete(c.sessions, smallest.id)
	default:
		return false
	}
	c.evictions++
	return true
}

// len is the number of sessions (tests, metrics).
func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}
