package wire_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/wire"
)

// localCtx bounds one in-process call of a test.
func localCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// sameEncoding fails unless a and b encode to the same bytes at their
// versions: what a client would decode from either is the same.
func sameEncoding(t *testing.T, what string, a, b kmsg.Response) {
	t.Helper()
	if a.GetVersion() != b.GetVersion() {
		t.Fatalf("%s: versions %d and %d", what, a.GetVersion(), b.GetVersion())
	}
	if ea, eb := a.AppendTo(nil), b.AppendTo(nil); !bytes.Equal(ea, eb) {
		t.Fatalf("%s v%d: in-process and TCP responses differ:\n%x\n%x", what, a.GetVersion(), ea, eb)
	}
}

// An in-process call gets what the same request gets over TCP, at the
// version a TCP client negotiates: the built-in ApiVersions, the View's
// Metadata, and a registered handler.
func TestLocalMatchesTCP(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{
		Topics: map[string]int32{"orders": 3},
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(22, 0, 5, func(_ context.Context, r *wire.Request) wire.Reply {
				req := r.Body.(*kmsg.InitProducerIDRequest)
				resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID, resp.ProducerEpoch = 1000+int64(req.TransactionTimeoutMillis), int16(r.Version)
				return wire.Now(resp)
			})
		},
	})
	coord := c.Coordinator()
	ctx := localCtx(t)
	local := coord.Server.Local("")
	cl := dialClient(t, coord.Addr)

	tcpAV, err := cl.ApiVersions(ctx) // v5, then v4 after the KIP-511 answer
	if err != nil {
		t.Fatal(err)
	}
	localAV, err := local.Do(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	sameEncoding(t, "ApiVersions", localAV, tcpAV)
	if tcpAV.GetVersion() != 4 {
		t.Fatalf("TCP ApiVersions at v%d, want v4 (Kafka 4.2)", tcpAV.GetVersion())
	}
	// The caller owns its answer: changing it leaves the server's intact.
	localAV.(*kmsg.ApiVersionsResponse).ApiKeys[0].MaxVersion = -7
	again, err := local.Do(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	sameEncoding(t, "ApiVersions after the caller changed its copy", again, tcpAV)

	maxOf := func(key int16) int16 {
		_, m, ok := coord.Server.Advertised(key)
		if !ok {
			t.Fatalf("key %d not advertised", key)
		}
		return m
	}
	for _, build := range []func() kmsg.Request{
		func() kmsg.Request {
			md := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr("orders")
			md.Topics = append(md.Topics, mt)
			return md
		},
		func() kmsg.Request {
			pid := kmsg.NewPtrInitProducerIDRequest()
			pid.TransactionalID, pid.TransactionTimeoutMillis = kmsg.StringPtr("t"), 42
			return pid
		},
	} {
		tcpReq, localReq := build(), build()
		tcpReq.SetVersion(maxOf(tcpReq.Key()))
		tcpResp, err := cl.Do(ctx, tcpReq)
		if err != nil {
			t.Fatal(err)
		}
		localResp, err := local.Do(ctx, localReq)
		if err != nil {
			t.Fatal(err)
		}
		if localReq.GetVersion() != tcpReq.GetVersion() {
			t.Fatalf("%s: in-process v%d, TCP v%d", kmsg.NameForKey(localReq.Key()), localReq.GetVersion(), tcpReq.GetVersion())
		}
		sameEncoding(t, kmsg.NameForKey(localReq.Key()), localResp, tcpResp)
	}
}

// versionLog records the versions handlers were called with.
type versionLog struct {
	mu   sync.Mutex
	seen map[int16][2]int16 // key → {Request.Version, Body.GetVersion()}
}

func (v *versionLog) record(r *wire.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen[r.Key] = [2]int16{r.Version, r.Body.GetVersion()}
}

func (v *versionLog) get(key int16) ([2]int16, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.seen[key]
	return got, ok
}

// The version is min(kmsg's max, the advertised max): a handler registered
// v0–v3 is called with v3, a 3.9 profile caps EndTxn (registered v0–v5) at
// v4, and ApiVersions (kmsg v5) comes back at the profile's v4.
func TestLocalVersionClamping(t *testing.T) {
	vl := &versionLog{seen: map[int16][2]int16{}}
	record := func(_ context.Context, r *wire.Request) wire.Reply {
		vl.record(r)
		return wire.Now(r.Body.ResponseKind())
	}
	c := clustertest.Start(t, clustertest.Options{
		CoordinatorVersion: "3.9",
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(22, 0, 3, record)
			reg.Register(26, 0, 5, record)
		},
	})
	local := c.Coordinator().Server.Local("")
	ctx := localCtx(t)
	for _, tc := range []struct {
		req  kmsg.Request
		want int16
	}{
		{kmsg.NewPtrInitProducerIDRequest(), 3}, // registry clamp
		{kmsg.NewPtrEndTxnRequest(), 4},         // 3.9 profile clamp
	} {
		resp, err := local.Do(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		name := kmsg.NameForKey(tc.req.Key())
		if got, ok := vl.get(tc.req.Key()); !ok || got != [2]int16{tc.want, tc.want} {
			t.Fatalf("%s handler saw (Version, Body version) %v (called %v), want v%d", name, got, ok, tc.want)
		}
		if tc.req.GetVersion() != tc.want || resp.GetVersion() != tc.want {
			t.Fatalf("%s: request v%d response v%d, want v%d", name, tc.req.GetVersion(), resp.GetVersion(), tc.want)
		}
	}
	av, err := local.Do(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if av.GetVersion() != 4 || av.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Fatalf("ApiVersions v%d error %d, want v4 error 0", av.GetVersion(), av.(*kmsg.ApiVersionsResponse).ErrorCode)
	}
}

// AtCallerVersion sends at the version set on the request, as Client.Do:
// the handler sees that version and a value of its own, decoded as a
// connection would (TransactionVersion is dropped below WriteTxnMarkers
// v2); a version outside the advertised range (a 4.1 profile advertises
// v0–v1) is ErrUnsupportedVersion and the handler never runs, where a
// connection would be closed. ApiVersions is still chosen by the client.
func TestLocalAtCallerVersion(t *testing.T) {
	vl := &versionLog{seen: map[int16][2]int16{}}
	var mu sync.Mutex
	var gotTV []int8
	c := clustertest.Start(t, clustertest.Options{
		CoordinatorVersion: "4.1",
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(27, 0, 2, func(_ context.Context, r *wire.Request) wire.Reply {
				vl.record(r)
				req := r.Body.(*kmsg.WriteTxnMarkersRequest)
				mu.Lock()
				gotTV = append(gotTV, req.Markers[0].TransactionVersion)
				mu.Unlock()
				req.Markers[0].ProducerID = -1 // the handler's own value
				return wire.Now(wire.ErrorResponse(req, 0))
			})
		},
	})
	local := c.Coordinator().Server.Local("").AtCallerVersion()
	ctx := localCtx(t)
	marker := func(version int16) *kmsg.WriteTxnMarkersRequest {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.TransactionVersion = 7, 3, 2
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "orders", []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		req.SetVersion(version)
		return req
	}
	for _, v := range []int16{0, 1} {
		req := marker(v)
		resp, err := local.Do(ctx, req)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if got, _ := vl.get(27); got != [2]int16{v, v} || resp.GetVersion() != v {
			t.Fatalf("sent v%d: handler saw %v, response v%d", v, got, resp.GetVersion())
		}
		if req.Markers[0].ProducerID != 7 {
			t.Fatalf("v%d: the handler changed the caller's request", v)
		}
	}
	mu.Lock()
	tvs := append([]int8(nil), gotTV...)
	mu.Unlock()
	if len(tvs) != 2 || tvs[0] != 0 || tvs[1] != 0 {
		t.Fatalf("TransactionVersion seen by the handler at v0/v1: %v, want [0 0] (dropped as over TCP)", tvs)
	}
	if _, err := local.Do(ctx, marker(2)); !errors.Is(err, wire.ErrUnsupportedVersion) {
		t.Fatalf("v2 to a 4.1 profile: %v, want ErrUnsupportedVersion", err)
	}
	mu.Lock()
	calls := len(gotTV)
	mu.Unlock()
	if calls != 2 {
		t.Fatalf("the handler ran for a refused version (%d calls)", calls)
	}
	av, err := local.ApiVersions(ctx)
	if err != nil || av.ErrorCode != 0 || av.GetVersion() != 4 {
		t.Fatalf("ApiVersions: %v, %+v", err, av)
	}
}

// A request the server does not advertise (no handler, or none in-process:
// the SASL exchange) is ErrNotAdvertised.
func TestLocalUnknownKey(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := localCtx(t)
	_, err := c.Coordinator().Server.Local("").Do(ctx, kmsg.NewPtrProduceRequest())
	if !errors.Is(err, wire.ErrNotAdvertised) {
		t.Fatalf("Produce to a node without a Produce handler: %v, want ErrNotAdvertised", err)
	}

	n := startSecure(t, nil)
	srv := n.cluster.Coordinator().Server
	if _, _, ok := srv.Advertised(17); !ok {
		t.Fatal("SASL on but SaslHandshake not advertised")
	}
	_, err = srv.Local("User:client").Do(ctx, kmsg.NewPtrSASLHandshakeRequest())
	if !errors.Is(err, wire.ErrNotAdvertised) {
		t.Fatalf("SaslHandshake in-process: %v, want ErrNotAdvertised", err)
	}
}

// A handler that panics, a Reply that panics or fails, a nil Reply and a
// response of the wrong key fail that call with an error and a log line;
// the server keeps serving, in-process and over TCP.
func TestLocalHandlerBugs(t *testing.T) {
	var logs logBuffer
	c := startInitPID(t, logs.logger(), buggyInitPID)
	addr := c.Coordinator().Addr
	local := c.Coordinator().Server.Local("")
	ctx := localCtx(t)
	initPID := func(txnID string) *kmsg.InitProducerIDRequest {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(txnID)
		return req
	}
	failed := map[string]any{"remote": "in-process", "level": "error", "message": "in-process request failed"}
	for i, txnID := range []string{"panic", "reply-panic", "reply-error", "wrong-type", "nil-reply"} {
		t.Run(txnID, func(t *testing.T) {
			resp, err := local.Do(ctx, initPID(txnID))
			if err == nil {
				t.Fatalf("got %v and no error", resp)
			}
			lines := logs.lines(failed)
			if len(lines) != i+1 || lines[i]["api_key"] != float64(22) {
				t.Fatalf("want log line %d with api_key 22 among %v", i+1, lines)
			}
			resp, err = local.Do(ctx, initPID("ok"))
			if err != nil || resp.(*kmsg.InitProducerIDResponse).ProducerID != 9 {
				t.Fatalf("in-process call after a %s: %v, %v", txnID, resp, err)
			}
			checkAlive(t, addr)
		})
	}
}

// With security on, the handler sees the LocalClient's principal, and the
// authorization helpers answer for it as for a TCP connection: the client
// user's WriteTxnMarkers and AddPartitionsToTxn v4+ get 31 without reaching
// the handler, the cluster principal's pass. Without security the
// principal is "", as on any connection.
func TestLocalAuthorization(t *testing.T) {
	n := startSecure(t, nil)
	srv := n.cluster.Coordinator().Server
	ctx := localCtx(t)
	client := srv.Local("User:" + n.local.ClientUser)
	clusterCl := srv.Local("User:" + security.LocalClusterUser)

	if _, err := client.Do(ctx, kmsg.NewPtrInitProducerIDRequest()); err != nil {
		t.Fatal(err)
	}
	if _, pid := n.calls.snapshot(); len(pid) != 1 || pid[0] != "User:"+n.local.ClientUser {
		t.Fatalf("InitProducerId handler saw %v, want [User:%s]", pid, n.local.ClientUser)
	}

	resp, err := client.Do(ctx, wtmRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got := wtmCodes(resp.(*kmsg.WriteTxnMarkersResponse)); len(got) != 2 || got[0] != 31 || got[1] != 31 {
		t.Fatalf("client user's WriteTxnMarkers: codes %v, want 31 on both partitions", got)
	}
	if wtm, _ := n.calls.snapshot(); len(wtm) != 0 {
		t.Fatalf("denied WriteTxnMarkers reached the handler: %v", wtm)
	}
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID = "t"
	apt.Transactions = append(apt.Transactions, tx)
	resp, err = client.Do(ctx, apt)
	if err != nil {
		t.Fatal(err)
	}
	if apt.GetVersion() < 4 || resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode != 31 {
		t.Fatalf("client user's AddPartitionsToTxn v%d: error %d, want v4+ and 31", apt.GetVersion(), resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode)
	}

	resp, err = clusterCl.Do(ctx, wtmRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got := wtmCodes(resp.(*kmsg.WriteTxnMarkersResponse)); got[0] != 0 || got[1] != 0 {
		t.Fatalf("cluster principal's WriteTxnMarkers: codes %v, want 0", got)
	}
	if wtm, _ := n.calls.snapshot(); len(wtm) != 1 || wtm[0] != "User:"+security.LocalClusterUser {
		t.Fatalf("WriteTxnMarkers handler saw %v, want the cluster principal once", wtm)
	}
	resp, err = clusterCl.Do(ctx, apt)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("cluster principal's AddPartitionsToTxn: error %d", code)
	}

	// No security: the principal asked for is not a connection's, "" is.
	var seen []string
	var mu sync.Mutex
	plain := clustertest.Start(t, clustertest.Options{Register: func(_ cluster.Node, reg *wire.Registry) {
		reg.Register(22, 0, 5, func(_ context.Context, r *wire.Request) wire.Reply {
			mu.Lock()
			seen = append(seen, r.Principal)
			mu.Unlock()
			return wire.Now(r.Body.ResponseKind())
		})
	}})
	if _, err := plain.Coordinator().Server.Local("User:someone").Do(ctx, kmsg.NewPtrInitProducerIDRequest()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "" {
		t.Fatalf("without security the handler saw principals %q, want [\"\"]", seen)
	}
}

// Shutdown waits for an in-process call in flight as for a connection's
// request, refuses new calls at once with ErrServerClosed, and the call in
// flight gets its response.
func TestLocalShutdown(t *testing.T) {
	slow := newSlowHandler()
	c := clustertest.Start(t, clustertest.Options{Register: slow.register})
	srv := c.Coordinator().Server
	local := srv.Local("")
	ctx := localCtx(t)

	type result struct {
		resp kmsg.Response
		err  error
	}
	inFlight := make(chan result, 1)
	go func() {
		resp, err := local.Do(ctx, initPIDReq())
		inFlight <- result{resp, err}
	}()
	waitEntered(t, slow)
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	// New calls are refused once Shutdown began.
	for attempt := 0; ; attempt++ {
		_, err := local.Do(ctx, kmsg.NewPtrApiVersionsRequest())
		if errors.Is(err, wire.ErrServerClosed) {
			break
		}
		if err != nil {
			t.Fatalf("call during shutdown: %v, want ErrServerClosed", err)
		}
		if attempt == 1000 {
			t.Fatal("still serving in-process calls during shutdown")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while an in-process call was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(slow.release)
	if r := <-inFlight; r.err != nil || r.resp == nil {
		t.Fatalf("in-flight call: %v, %v", r.resp, r.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := srv.Local("").Do(ctx, initPIDReq()); !errors.Is(err, wire.ErrServerClosed) {
		t.Fatalf("call after Shutdown: %v, want ErrServerClosed", err)
	}
}

// Do returns once its context is done, even while the Reply waits; a
// context already done calls no handler.
func TestLocalContext(t *testing.T) {
	slow := newSlowHandler()
	c := clustertest.Start(t, clustertest.Options{Register: slow.register})
	local := c.Coordinator().Server.Local("")

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := local.Do(ctx, initPIDReq())
		errc <- err
	}()
	waitEntered(t, slow)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v, want context.Canceled", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Do did not return after its context was cancelled")
	}

	if _, err := local.Do(ctx, initPIDReq()); !errors.Is(err, context.Canceled) {
		t.Fatalf("call with a done context: %v", err)
	}
	select {
	case <-slow.entered:
		t.Fatal("handler called with a done context")
	default:
	}
	close(slow.release) // the abandoned Reply finishes; Shutdown in Cleanup waits for it
}

// WithClientID gives in-process requests a client id, as a connection's
// request header does; without it the client id is null.
func TestLocalClientID(t *testing.T) {
	seen := make(chan *string, 2)
	c := startInitPID(t, zerolog.Nop(), func(_ context.Context, r *wire.Request) wire.Reply {
		seen <- r.ClientID
		return wire.Now(r.Body.(*kmsg.InitProducerIDRequest).ResponseKind())
	})
	ctx := localCtx(t)
	local := c.Coordinator().Server.Local("")
	if _, err := local.WithClientID("txncoord-leader").Do(ctx, kmsg.NewPtrInitProducerIDRequest()); err != nil {
		t.Fatal(err)
	}
	if id := <-seen; id == nil || *id != "txncoord-leader" {
		t.Fatalf("client id %v, want txncoord-leader", id)
	}
	if _, err := local.Do(ctx, kmsg.NewPtrInitProducerIDRequest()); err != nil {
		t.Fatal(err)
	}
	if id := <-seen; id != nil {
		t.Fatalf("client id %q without WithClientID, want null", *id)
	}
}

// An Inline client waits for the Reply itself: cancelling its context does
// not end a Do whose Reply ignores CallerDone (it returns the Reply's
// answer), and ends one whose Reply watches it. CallerDone is nil over a
// connection and for a caller whose context cannot be cancelled.
func TestLocalInline(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan string, 4)
	callerDone := make(chan bool, 4)
	c := startInitPID(t, zerolog.Nop(), func(ctx context.Context, r *wire.Request) wire.Reply {
		id := *r.Body.(*kmsg.InitProducerIDRequest).TransactionalID
		giveUp := wire.CallerDone(ctx)
		callerDone <- giveUp != nil
		entered <- id
		resp := r.Body.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		return func() (kmsg.Response, error) {
			switch id {
			case "ignores-caller":
				<-release
			case "watches-caller":
				select {
				case <-release:
				case <-giveUp:
					resp.ErrorCode = 7 // REQUEST_TIMED_OUT: gave up
				}
			}
			return resp, nil
		}
	})
	local := c.Coordinator().Server.Local("").Inline()
	initPID := func(txnID string) *kmsg.InitProducerIDRequest {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(txnID)
		return req
	}
	type result struct {
		resp kmsg.Response
		err  error
	}
	call := func(ctx context.Context, txnID string) <-chan result {
		out := make(chan result, 1)
		go func() {
			resp, err := local.Do(ctx, initPID(txnID))
			out <- result{resp, err}
		}()
		if id := <-entered; id != txnID {
			t.Fatalf("handler saw %q, want %q", id, txnID)
		}
		return out
	}

	ctx, cancel := context.WithCancel(context.Background())
	ignoring := call(ctx, "ignores-caller")
	if !<-callerDone {
		t.Fatal("CallerDone is nil for an in-process caller with a cancellable context")
	}
	cancel()
	select {
	case r := <-ignoring:
		t.Fatalf("Inline Do returned (%v, %v) before its Reply did", r.resp, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if r := <-ignoring; r.err != nil || r.resp.(*kmsg.InitProducerIDResponse).ErrorCode != 0 {
		t.Fatalf("Inline Do after its Reply returned: %v, %v; want the Reply's answer", r.resp, r.err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	release = make(chan struct{}) // never closed: only the caller giving up ends the Reply
	watching := call(ctx2, "watches-caller")
	<-callerDone
	cancel2()
	select {
	case r := <-watching:
		if r.err != nil || r.resp.(*kmsg.InitProducerIDResponse).ErrorCode != 7 {
			t.Fatalf("Do whose Reply watches CallerDone: %v, %v; want the gave-up answer", r.resp, r.err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("a Reply watching CallerDone kept an Inline Do after its caller gave up")
	}

	if _, err := local.Do(context.Background(), initPID("now")); err != nil {
		t.Fatal(err)
	}
	<-entered
	if <-callerDone {
		t.Fatal("CallerDone is not nil for a caller whose context cannot be cancelled")
	}
	cl := dialClient(t, c.Coordinator().Addr)
	req := initPID("tcp")
	req.SetVersion(4)
	if _, err := cl.Do(localCtx(t), req); err != nil {
		t.Fatal(err)
	}
	<-entered
	if <-callerDone {
		t.Fatal("CallerDone is not nil over a connection")
	}
}

// Request.Logger carries the request's fields, built on first use: the
// api key and version, and the correlation id over a connection or the
// remote and call id in-process.
func TestRequestLogger(t *testing.T) {
	var logs logBuffer
	c := startInitPID(t, logs.logger(), func(_ context.Context, r *wire.Request) wire.Reply {
		r.Logger().Warn().Str("txn_id", *r.Body.(*kmsg.InitProducerIDRequest).TransactionalID).Msg("handler line")
		return wire.Now(r.Body.(*kmsg.InitProducerIDRequest).ResponseKind())
	})
	ctx := localCtx(t)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr("tcp")
	req.SetVersion(3)
	if _, err := dialClient(t, c.Coordinator().Addr).Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	line := logs.waitLog(t, map[string]any{"txn_id": "tcp"})
	if line["api_key"] != float64(22) || line["api_version"] != float64(3) || line["correlation_id"] == nil || line["remote"] == nil || line["remote"] == "in-process" {
		t.Fatalf("TCP request's line: %v", line)
	}
	req = kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr("local")
	if _, err := c.Coordinator().Server.Local("").Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	line = logs.waitLog(t, map[string]any{"txn_id": "local"})
	if line["api_key"] != float64(22) || line["api_version"] != float64(5) || line["remote"] != "in-process" || line["conn"] == nil {
		t.Fatalf("in-process request's line: %v", line)
	}
}
