package faultproxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/wire"
)

// ioTimeout bounds every wait of a test so a bug fails instead of hanging;
// no test waits for it to pass.
const ioTimeout = 10 * time.Second

// markerLeader is a tiny WriteTxnMarkers target: it accepts a marker the
// first time it sees (pid, epoch, result) and answers INVALID_PRODUCER_EPOCH
// to the same marker again, like a TV2 leader that already applied it. It
// records the connection of every call.
type markerLeader struct {
	mu      sync.Mutex
	applied map[[3]int64]bool
	conns   []uint64
}

func (l *markerLeader) handle(_ context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := body.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns = append(l.conns, req.ConnID)
	for _, m := range body.Markers {
		k := [3]int64{m.ProducerID, int64(m.ProducerEpoch), 0}
		if m.Committed {
			k[2] = 1
		}
		code := int16(0)
		if l.applied[k] {
			code = kerr.InvalidProducerEpoch.Code
		}
		l.applied[k] = true
		rm := kmsg.WriteTxnMarkersResponseMarker{ProducerID: m.ProducerID}
		for _, t := range m.Topics {
			rt := kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: code})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return wire.Now(resp)
}

func (l *markerLeader) calls() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.conns...)
}

type fixture struct {
	leader *markerLeader
	server *wire.Server
	proxy  *faultproxy.Proxy
}

func start(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{leader: &markerLeader{applied: make(map[[3]int64]bool)}}
	reg := wire.NewRegistry()
	reg.Register(27, 1, 2, f.leader.handle)
	var err error
	if f.server, err = wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		f.server.Shutdown(ctx)
	})
	if f.proxy, err = faultproxy.Start(faultproxy.Config{Target: f.server.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.proxy.Close() })
	return f
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	return c
}

func dial(t testing.TB, addr string) *wire.Client {
	t.Helper()
	c, err := wire.Dial(ctx(t), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func marker(version int16, pid int64, epoch int16) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(version)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch, true, 3, 2
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	return req
}

// errorCodes flattens a WriteTxnMarkers response.
func errorCodes(t *testing.T, resp kmsg.Response) []int16 {
	t.Helper()
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		t.Fatalf("response %T", resp)
	}
	var codes []int16
	for _, m := range r.Markers {
		for _, tp := range m.Topics {
			for _, p := range tp.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	}
	return codes
}

func TestPassThrough(t *testing.T) {
	f := start(t)
	c := dial(t, f.proxy.Addr())
	if _, err := c.ApiVersions(ctx(t)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(ctx(t), marker(2, 7, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := errorCodes(t, resp); len(got) != 2 || got[0] != 0 || got[1] != 0 {
		t.Fatalf("codes %v", got)
	}
	if n := f.proxy.Counts(27); n.Requests != 1 || n.Forwarded != 1 || n.Responses != 1 {
		t.Fatalf("counts %+v", n)
	}
	if len(f.proxy.Captured(27)) != 0 {
		t.Fatal("a pass-through key without Capture must not be recorded")
	}
}

// TestHoldRelease: a held marker reaches the leader only on Release, the
// captured copy shows version and TV, and a request pipelined behind it on
// the same connection is answered after it, in order.
func TestHoldRelease(t *testing.T) {
	f := start(t)
	f.proxy.Hold(27)
	c := dial(t, f.proxy.Addr())
	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.Do(ctx(t), marker(2, 7, 1))
		done <- result{resp, err}
	}()
	got, err := f.proxy.WaitCaptured(ctx(t), 27, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy captures before it would forward, and a held request is
	// not forwarded: the leader cannot have seen it yet.
	if n := len(f.leader.calls()); n != 0 {
		t.Fatalf("leader saw %d markers while held", n)
	}
	held := got[0]
	req, ok := held.Request.(*kmsg.WriteTxnMarkersRequest)
	if !ok || held.Version != 2 || held.Fault != "hold" || req.Markers[0].TransactionVersion != 2 || req.Markers[0].ProducerEpoch != 1 {
		t.Fatalf("captured %+v (decode err %v)", held, held.DecodeErr)
	}
	if n := f.proxy.Counts(27); n.Held != 1 || n.Forwarded != 0 {
		t.Fatalf("counts while held %+v", n)
	}
	f.proxy.Release(27)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if codes := errorCodes(t, r.resp); codes[0] != 0 {
		t.Fatalf("codes %v", codes)
	}
	if n := f.proxy.Counts(27); n.Released != 1 || n.Forwarded != 1 || n.Responses != 1 {
		t.Fatalf("counts after release %+v", n)
	}
}

// TestHoldKeepsOrder pipelines a held marker and an ApiVersions request on
// one raw connection: both answers arrive after the release, in order.
func TestHoldKeepsOrder(t *testing.T) {
	f := start(t)
	f.proxy.Hold(27)
	nc, err := net.Dial("tcp", f.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(ioTimeout))
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	// AppendRequest sizes the whole slice, so each frame is built alone.
	buf := append(fm.AppendRequest(nil, marker(1, 7, 1), 100), fm.AppendRequest(nil, av, 101)...)
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := f.proxy.WaitCaptured(ctx(t), 27, 1); err != nil {
		t.Fatal(err)
	}
	if n := f.proxy.Counts(18); n.Requests != 0 {
		t.Fatalf("ApiVersions behind a held request was read early: %+v", n)
	}
	f.proxy.Release(27)
	for _, want := range []int32{100, 101} {
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatal(err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(nc, frame); err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != want {
			t.Fatalf("correlation id %d, want %d", got, want)
		}
	}
}

// TestDuplicate: the leader gets the marker twice, the client one answer;
// the swallowed second answer shows what the leader said to the copy.
func TestDuplicate(t *testing.T) {
	f := start(t)
	f.proxy.Duplicate(27)
	c := dial(t, f.proxy.Addr())
	resp, err := c.Do(ctx(t), marker(2, 9, 4))
	if err != nil {
		t.Fatal(err)
	}
	if codes := errorCodes(t, resp); codes[0] != 0 {
		t.Fatalf("client saw %v, want the first answer (NONE)", codes)
	}
	if err := f.proxy.WaitFor(ctx(t), func() bool { return f.proxy.Counts(27).Swallowed == 1 }); err != nil {
		t.Fatal(err)
	}
	sw := f.proxy.Swallowed(27)
	if len(sw) != 1 || sw[0].DecodeErr != nil {
		t.Fatalf("swallowed %+v", sw)
	}
	if codes := errorCodes(t, sw[0].Response); codes[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("second copy got %v, want 47", codes)
	}
	if n := len(f.leader.calls()); n != 2 {
		t.Fatalf("leader saw %d markers, want 2", n)
	}
	// The connection stays in step: the next request gets its own answer.
	f.proxy.Clear(27)
	resp, err = c.Do(ctx(t), marker(2, 10, 0))
	if err != nil {
		t.Fatal(err)
	}
	if codes := errorCodes(t, resp); codes[0] != 0 {
		t.Fatalf("next request got %v", codes)
	}
}

// TestReplay delivers a captured marker again, later, on a new connection
// straight to the leader: the late-marker scenario.
func TestReplay(t *testing.T) {
	f := start(t)
	f.proxy.Capture(27)
	c := dial(t, f.proxy.Addr())
	if _, err := c.Do(ctx(t), marker(2, 11, 5)); err != nil {
		t.Fatal(err)
	}
	got := f.proxy.Captured(27)
	if len(got) != 1 || got[0].Fault != "" {
		t.Fatalf("captured %+v", got)
	}
	resp, err := f.proxy.Replay(ctx(t), got[0])
	if err != nil {
		t.Fatal(err)
	}
	if codes := errorCodes(t, resp); codes[0] != kerr.InvalidProducerEpoch.Code || resp.GetVersion() != 2 {
		t.Fatalf("replayed marker got %v at v%d, want 47 at v2", codes, resp.GetVersion())
	}
	calls := f.leader.calls()
	if len(calls) != 2 || calls[0] == calls[1] {
		t.Fatalf("leader calls on connections %v: the replay must use a new connection", calls)
	}
	if n := f.proxy.Counts(27); n.Requests != 1 {
		t.Fatalf("a replay bypasses the proxy: %+v", n)
	}
}

// TestReplayPart replays one producer's markers of a captured request of
// two: the leader sees only that producer's, under the captured header.
func TestReplayPart(t *testing.T) {
	f := start(t)
	f.proxy.Capture(27)
	c := dial(t, f.proxy.Addr())
	two := marker(2, 11, 5)
	two.Markers = append(two.Markers, marker(2, 12, 7).Markers...)
	if _, err := c.Do(ctx(t), two); err != nil {
		t.Fatal(err)
	}
	got := f.proxy.Captured(27)
	if len(got) != 1 {
		t.Fatalf("captured %+v", got)
	}
	only := *got[0].Request.(*kmsg.WriteTxnMarkersRequest)
	only.Markers = only.Markers[1:]
	part, err := got[0].WithRequest(&only)
	if err != nil {
		t.Fatal(err)
	}
	if part.CorrelationID != got[0].CorrelationID || part.Version != 2 {
		t.Fatalf("the part's header changed: %+v", part)
	}
	resp, err := f.proxy.Replay(ctx(t), part)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.WriteTxnMarkersResponse)
	if len(r.Markers) != 1 || r.Markers[0].ProducerID != 12 || errorCodes(t, resp)[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("replayed part answered %+v, want producer 12 alone, 47 (already applied)", r.Markers)
	}
	if _, err := got[0].WithRequest(kmsg.NewPtrProduceRequest()); err == nil {
		t.Fatal("WithRequest took a request of another key")
	}
}

// TestHoldIf holds only the requests its predicate picks: the others pass
// (on connections of their own), the held one waits for Release.
func TestHoldIf(t *testing.T) {
	f := start(t)
	f.proxy.HoldIf(27, func(r kmsg.Request) bool {
		for _, m := range r.(*kmsg.WriteTxnMarkersRequest).Markers {
			if m.ProducerID == 12 {
				return true
			}
		}
		return false
	})
	passing := dial(t, f.proxy.Addr())
	if _, err := passing.Do(ctx(t), marker(2, 11, 5)); err != nil {
		t.Fatalf("a request the predicate does not pick: %v", err)
	}
	held := dial(t, f.proxy.Addr())
	answered := make(chan error, 1)
	go func() {
		_, err := held.Do(ctx(t), marker(2, 12, 5))
		answered <- err
	}()
	got, err := f.proxy.WaitCaptured(ctx(t), 27, 1)
	if err != nil || got[0].Fault != "hold" || got[0].Request.(*kmsg.WriteTxnMarkersRequest).Markers[0].ProducerID != 12 {
		t.Fatalf("captured %+v, %v: want pid 12's request held", got, err)
	}
	select {
	case err := <-answered:
		t.Fatalf("the held request was answered (%v) before Release", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.proxy.Release(27)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if n := f.proxy.Counts(27); n.Requests != 2 || n.Held != 1 {
		t.Fatalf("counts %+v, want 2 requests, 1 held", n)
	}
}

func TestDropAndDelay(t *testing.T) {
	f := start(t)
	f.proxy.Drop(27)
	c := dial(t, f.proxy.Addr())
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// wire.Client's socket deadline may fire just before ctx reports
	// done, so either timeout error is the caller's timeout.
	if _, err := c.Do(short, marker(1, 12, 0)); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("dropped request: err %v, want the caller's timeout", err)
	}
	if n := f.proxy.Counts(27); n.Dropped != 1 || n.Forwarded != 0 || len(f.leader.calls()) != 0 {
		t.Fatalf("counts %+v, leader calls %d", n, len(f.leader.calls()))
	}

	f.proxy.Delay(27, 20*time.Millisecond)
	c2 := dial(t, f.proxy.Addr())
	if _, err := c2.Do(ctx(t), marker(1, 13, 0)); err != nil {
		t.Fatal(err)
	}
	if n := f.proxy.Counts(27); n.Delayed != 1 || n.Forwarded != 1 {
		t.Fatalf("counts %+v", n)
	}
}

func TestCut(t *testing.T) {
	f := start(t)
	c := dial(t, f.proxy.Addr())
	if _, err := c.Do(ctx(t), marker(2, 14, 0)); err != nil {
		t.Fatal(err)
	}
	if n := f.proxy.CutConnections(); n != 1 {
		t.Fatalf("cut %d connections, want 1", n)
	}
	if _, err := c.Do(ctx(t), marker(2, 14, 1)); err == nil {
		t.Fatal("request on a cut connection succeeded")
	}
	if err := f.proxy.WaitFor(ctx(t), func() bool { return f.proxy.Connections() == 0 }); err != nil {
		t.Fatal(err)
	}

	f.proxy.CutOnKey(27)
	c2 := dial(t, f.proxy.Addr())
	if _, err := c2.ApiVersions(ctx(t)); err != nil {
		t.Fatalf("other keys pass: %v", err)
	}
	if _, err := c2.Do(ctx(t), marker(2, 15, 0)); err == nil {
		t.Fatal("CutOnKey request succeeded")
	}
	if n := f.proxy.Counts(27); n.Cut != 1 || n.Forwarded != 1 {
		t.Fatalf("counts %+v", n)
	}
	if got := f.proxy.Captured(27); len(got) != 1 || got[0].Fault != "cut" {
		t.Fatalf("captured %+v", got)
	}
	// New connections still work once the fault is cleared.
	f.proxy.Clear(27)
	if _, err := dial(t, f.proxy.Addr()).Do(ctx(t), marker(2, 16, 0)); err != nil {
		t.Fatal(err)
	}
}

// TestBadFrames: garbage from a client closes that connection; the proxy
// keeps serving others and never panics.
func TestBadFrames(t *testing.T) {
	f := start(t)
	for _, frame := range [][]byte{
		{0x7f, 0xff, 0xff, 0xff},                // size beyond the limit
		{0, 0, 0, 2, 0, 0},                      // too small for a header
		{0, 0, 0, 8, 0x7f, 0, 0, 0, 0, 0, 0, 1}, // unknown api key, captured undecoded
	} {
		f.proxy.Capture(0x7f00)
		nc, err := net.Dial("tcp", f.proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(ioTimeout))
		nc.Write(frame)
		if len(frame) > 4 && frame[4] == 0x7f {
			// The target (wire) closes on an unknown key; the proxy
			// passes the close on.
			got, err := f.proxy.WaitCaptured(ctx(t), 0x7f00, 1)
			if err != nil || got[0].DecodeErr == nil {
				t.Fatalf("unknown key captured %+v, %v", got, err)
			}
		}
		if _, err := io.ReadAll(nc); err != nil {
			t.Fatalf("connection not closed cleanly: %v", err)
		}
		nc.Close()
	}
	if _, err := dial(t, f.proxy.Addr()).Do(ctx(t), marker(2, 17, 0)); err != nil {
		t.Fatal(err)
	}
}

// TestCloseStopsEverything: Close with a held request and open
// connections returns, fails the waiting client, and leaves no goroutine.
func TestCloseStopsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	f := start(t)
	f.proxy.Hold(27)
	c := dial(t, f.proxy.Addr())
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx(t), marker(2, 18, 0))
		done <- err
	}()
	if _, err := f.proxy.WaitCaptured(ctx(t), 27, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("held request answered after Close")
	}
	if f.proxy.Connections() != 0 {
		t.Fatal("connections left after Close")
	}
	if _, err := net.Dial("tcp", f.proxy.Addr()); err == nil {
		t.Fatal("proxy still accepts after Close")
	}
	ctxShut, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	f.server.Shutdown(ctxShut)
	c.Close()
	deadline := time.Now().Add(ioTimeout)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
