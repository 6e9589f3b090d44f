package leaderstub

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// sessionFetch is a Fetch v12 of the given session for partitions of
// topics t and u (offset 0), answered at once.
func sessionFetch(id, epoch int32, topics []string, forget []string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionID, req.SessionEpoch = 1<<20, id, epoch
	for _, name := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = name
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	for _, name := range forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = name, []int32{0}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answered lists a response's partitions as "topic/p".
func answered(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
		}
	}
	return out
}

// TestFetchSessionLifecycle walks KIP-227 through the handler: a full
// fetch creates a session; an incremental fetch answers only partitions
// that changed; a replayed epoch, an unknown id and a change of topic
// addressing are the top-level errors Kafka gives; forgetting every
// partition, epoch -1 and a new full fetch with the old id end a session.
func TestFetchSessionLifecycle(t *testing.T) {
	f := newFixture(t)
	if _, err := f.view.EnsureTopic("u"); err != nil {
		t.Fatal(err)
	}
	fetch := func(req *kmsg.FetchRequest, v int16) *kmsg.FetchResponse {
		t.Helper()
		return f.call(f.l.handleFetch, req, v).(*kmsg.FetchResponse)
	}
	full := fetch(sessionFetch(0, 0, []string{"t", "u"}, nil), 12)
	id := full.SessionID
	if full.ErrorCode != 0 || id == 0 || len(answered(full)) != 2 {
		t.Fatalf("full fetch: error %d session %d partitions %v", full.ErrorCode, id, answered(full))
	}
	// Nothing changed: an incremental fetch answers no partition.
	inc := fetch(sessionFetch(id, 1, nil, nil), 12)
	if inc.ErrorCode != 0 || inc.SessionID != id || len(inc.Topics) != 0 {
		t.Fatalf("incremental, nothing new: error %d session %d partitions %v", inc.ErrorCode, inc.SessionID, answered(inc))
	}
	// A record on u/0: only u/0 is answered, with it.
	f.call(f.l.handleProduce, produceReq("u", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1}.bytes()), 9)
	inc = fetch(sessionFetch(id, 2, nil, nil), 12)
	if got := answered(inc); inc.ErrorCode != 0 || len(got) != 1 || got[0] != "u/0" ||
		len(inc.Topics[0].Partitions[0].RecordBatches) == 0 || inc.Topics[0].Partitions[0].HighWatermark != 1 {
		t.Fatalf("incremental after a produce to u/0: error %d partitions %v", inc.ErrorCode, got)
	}
	// The same epoch again (a duplicate request): rejected.
	if r := fetch(sessionFetch(id, 2, nil, nil), 12); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(r.Topics) != 0 {
		t.Fatalf("replayed epoch: error %d, want %d", r.ErrorCode, kerr.InvalidFetchSessionEpoch.Code)
	}
	if r := fetch(sessionFetch(id+1, 1, nil, nil), 12); r.ErrorCode != kerr.FetchSessionIDNotFound.Code || r.SessionID != 0 {
		t.Fatalf("unknown session: error %d session %d", r.ErrorCode, r.SessionID)
	}
	if r := fetch(sessionFetch(id, 3, nil, nil), 13); r.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("a v12 session asked at v13: error %d, want %d", r.ErrorCode, kerr.FetchSessionTopicIDError.Code)
	}
	// u/0's new fetch offset is sent; the session's record of its
	// high watermark is unchanged, so it is not answered again.
	req := sessionFetch(id, 3, nil, nil)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "u"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if r := fetch(req, 12); r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("incremental with a new offset, nothing new: error %d partitions %v", r.ErrorCode, answered(r))
	}
	// Forgetting t/0 keeps u/0; forgetting u/0 too ends the session.
	if r := fetch(sessionFetch(id, 4, nil, []string{"t"}), 12); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("forget t/0: error %d session %d", r.ErrorCode, r.SessionID)
	}
	if r := fetch(sessionFetch(id, 5, nil, []string{"u"}), 12); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("forget the last partition: error %d session %d, want sessionless", r.ErrorCode, r.SessionID)
	}
	if f.l.sessions.len() != 0 {
		t.Fatalf("%d sessions left, want 0", f.l.sessions.len())
	}

	// v13: a session by topic id; epoch -1 closes it and is sessionless.
	topic, _ := f.view.Topic("t")
	req13 := sessionFetch(0, 0, nil, nil)
	rt13 := kmsg.NewFetchRequestTopic()
	rt13.TopicID = topic.ID
	rp13 := kmsg.NewFetchRequestTopicPartition()
	rp13.PartitionMaxBytes = 1 << 20
	rt13.Partitions = append(rt13.Partitions, rp13)
	req13.Topics = append(req13.Topics, rt13)
	r13 := fetch(req13, 13)
	if r13.SessionID == 0 || len(r13.Topics) != 1 || r13.Topics[0].TopicID != topic.ID {
		t.Fatalf("v13 full fetch: session %d topics %+v", r13.SessionID, r13.Topics)
	}
	if r := fetch(sessionFetch(r13.SessionID, 1, nil, nil), 13); r.ErrorCode != 0 || r.SessionID != r13.SessionID {
		t.Fatalf("v13 incremental: error %d session %d", r.ErrorCode, r.SessionID)
	}
	if r := fetch(sessionFetch(r13.SessionID, epochFinal, []string{"t"}, nil), 12); r.SessionID != 0 || len(r.Topics) != 1 {
		t.Fatalf("epoch -1: session %d partitions %v, want sessionless with t/0", r.SessionID, answered(r))
	}
	if f.l.sessions.len() != 0 {
		t.Fatal("epoch -1 did not close the session")
	}
	// A full fetch naming an old session replaces it.
	a := fetch(sessionFetch(0, 0, []string{"t"}, nil), 12).SessionID
	b := fetch(sessionFetch(a, 0, []string{"t"}, nil), 12).SessionID
	if a == 0 || b == 0 || a == b || f.l.sessions.len() != 1 {
		t.Fatalf("full fetch with session %d: new session %d, %d sessions", a, b, f.l.sessions.len())
	}
	// Below v7 there are no sessions.
	if r := fetch(sessionFetch(0, 0, []string{"t"}, nil), 6); r.SessionID != 0 || f.l.sessions.len() != 1 {
		t.Fatalf("v6: session %d", r.SessionID)
	}
}

// TestFetchSessionEviction: with the cache full, a new session evicts one
// idle for longer than the eviction time, else the smallest one older than
// it if the new session is larger, else gets no session (SessionID 0).
func TestFetchSessionEviction(t *testing.T) {
	f := newFixture(t)
	if _, err := f.view.EnsureTopic("u"); err != nil {
		t.Fatal(err)
	}
	f.l.sessions.slots = 1
	newSession := func(topics ...string) int32 {
		return f.call(f.l.handleFetch, sessionFetch(0, 0, topics, nil), 12).(*kmsg.FetchResponse).SessionID
	}
	a := newSession("t")
	if a == 0 {
		t.Fatal("no first session")
	}
	if b := newSession("t", "u"); b != 0 {
		t.Fatalf("cache full of a fresh session: got session %d, want none", b)
	}
	// a is used again just before it is old enough; then it is not idle,
	// but old: a larger session evicts it, a same-sized one does not.
	f.now = f.now.Add(fetchSessionEvictAfter - time.Second)
	f.call(f.l.handleFetch, sessionFetch(a, 1, nil, nil), 12)
	f.now = f.now.Add(2 * time.Second)
	if c := newSession("u"); c != 0 {
		t.Fatalf("same-sized session evicted an old one: session %d", c)
	}
	c := newSession("t", "u")
	if c == 0 || c == a {
		t.Fatalf("larger session: got %d, want a new one evicting %d", c, a)
	}
	if r := f.call(f.l.handleFetch, sessionFetch(a, 2, nil, nil), 12).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session: error %d", r.ErrorCode)
	}
	// Idle for longer than the eviction time: any new session evicts it.
	f.now = f.now.Add(fetchSessionEvictAfter + time.Second)
	if d := newSession("t"); d == 0 {
		t.Fatal("an idle session was not evicted")
	}
	if f.l.sessions.evictions != 2 {
		t.Fatalf("evictions %d, want 2", f.l.sessions.evictions)
	}
}

// seenFetch is one Fetch as the server saw it.
type seenFetch struct {
	id, epoch    int32
	partitions   int
	respID       int32
	respErr      int16
	respAnswered int
}

// TestFetchSessionsKgo: a real kgo consumer (sessions on by default)
// creates a session with its first fetch and then sends incremental
// fetches on it, epochs 1, 2, 3… with no partitions listed once nothing
// changes; when the session is lost (a restart, an eviction) it gets
// FETCH_SESSION_ID_NOT_FOUND, starts a new session, and reads on.
func TestFetchSessionsKgo(t *testing.T) {
	coordLn, leaderLn := listen(t), listen(t)
	f := testFile([]cluster.Node{{NodeID: 1, Addr: leaderLn.Addr().String(), KafkaVersion: "4.2"}}, map[string]int32{"t": 1, "u": 2})
	f.Coordinator.Addr = coordLn.Addr().String()
	view := cluster.NewView(f)
	startFakeCoordinator(t, coordLn, view, 5, 5)
	l, err := Open(Config{NodeID: 1, KafkaVersion: "4.2", View: view, DataDir: t.TempDir(),
		Coordinator: coordclient.Dial(coordLn.Addr().String(), zerolog.Nop()), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []seenFetch
	)
	reg := wire.NewRegistry()
	view.RegisterMetadata(reg)
	view.RegisterFindCoordinator(reg)
	reg.Register(0, produceAPI.Min, produceAPI.Max, produceAPI.Bind(l))
	reg.Register(2, listOffsetsAPI.Min, listOffsetsAPI.Max, listOffsetsAPI.Bind(l))
	reg.Register(1, fetchAPI.Min, fetchAPI.Max, func(ctx context.Context, r *wire.Request) wire.Reply {
		req := r.Body.(*kmsg.FetchRequest)
		s := seenFetch{id: req.SessionID, epoch: req.SessionEpoch}
		for _, rt := range req.Topics {
			s.partitions += len(rt.Partitions)
		}
		reply := l.handleFetch(ctx, r)
		return func() (kmsg.Response, error) {
			resp, err := reply()
			if fr, ok := resp.(*kmsg.FetchResponse); ok {
				s.respID, s.respErr, s.respAnswered = fr.SessionID, fr.ErrorCode, len(answered(fr))
			}
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
			return resp, err
		}
	})
	prof, _ := negotiation.Profile("4.2")
	srv, err := wire.Start(wire.Config{Listener: leaderLn, Registry: reg, Profile: prof, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(srv); l.Close() })
	addr := leaderLn.Addr().String()

	produce := func(vals ...string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("u"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, v := range vals {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v), Partition: 1}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("a", "b")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()},
			"u": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	consume := func(n int) {
		t.Helper()
		for len(got) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %v, want %d records", got, n)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
	}
	// waitIncremental waits for n incremental fetches of a session,
	// answered without error, that listed no partition.
	waitIncremental := func(n int) int32 {
		t.Helper()
		var id int32
		waitFor(t, "incremental fetches", func() bool {
			mu.Lock()
			defer mu.Unlock()
			count := 0
			for _, s := range seen {
				if s.id != 0 && s.epoch > 0 && s.partitions == 0 && s.respErr == 0 && s.respID == s.id {
					count, id = count+1, s.id
				}
			}
			return count >= n
		})
		return id
	}
	consume(2)
	first := waitIncremental(3)

	// A copy, so that a failure below does not hold mu: the server's
	// answers take it, and the cleanup's shutdown waits for them.
	mu.Lock()
	fetches := append([]seenFetch(nil), seen...)
	mu.Unlock()
	// The first fetch is full (no session yet) and creates the session;
	// the session's fetches then carry consecutive epochs from 1. kgo
	// lists a partition once its start offset is known, so under load its
	// first fetch may list some of the three and add the rest later.
	if s := fetches[0]; s.id != 0 || s.epoch != 0 || s.partitions < 1 || s.partitions > 3 || s.respID != first {
		t.Fatalf("first fetch %+v, want a full fetch of 1 to 3 partitions creating session %d", s, first)
	}
	var epochs []int32
	for _, s := range fetches {
		if s.id == first {
			epochs = append(epochs, s.epoch)
		}
	}
	for i, e := range epochs {
		if e != int32(i+1) {
			t.Fatalf("epochs of session %d: %v, want 1, 2, 3, …", first, epochs)
		}
	}

	// The session is lost: kgo is told, starts a new one and reads on.
	l.sessions.mu.Lock()
	clear(l.sessions.sessions)
	l.sessions.mu.Unlock()
	mu.Lock()
	mark := len(seen)
	mu.Unlock()
	waitFor(t, "a new session", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen[mark:] {
			if s.epoch == 0 && s.respID != 0 && s.respID != first {
				return true
			}
		}
		return false
	})
	produce("c")
	consume(3)
	mu.Lock()
	var codes []int16
	for _, s := range seen[mark:] {
		if s.respErr != 0 {
			codes = append(codes, s.respErr)
		}
	}
	mu.Unlock()
	sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	if len(codes) == 0 || codes[0] != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("after the session was lost: errors %v, want FETCH_SESSION_ID_NOT_FOUND", codes)
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("consumed %v", got)
	}
}
