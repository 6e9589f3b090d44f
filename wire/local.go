package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/faults"
)

// In-process calls: a LocalClient sends kmsg requests to a running Server's
// registered handlers without a socket, for a node that runs in the same
// process as the server it talks to (the embedded cluster's leaders and
// their coordinator). Everything a connection does between decoding a
// request and encoding its response happens as on a connection: the version
// is chosen as a client would from what the server advertises (registered
// range clamped by the profile), the handler runs with the server's context,
// Stopping channel and listener security, a panic in the handler or its
// Reply fails only that call, and Shutdown waits for calls in flight as for
// connections. What is skipped: framing, encoding and decoding, and SASL
// (the LocalClient is authenticated by construction, as its principal).
//
// Not decoded-equivalent: the handler gets the caller's request value and
// the caller gets the handler's response value. Over TCP both would go
// through an encode and a decode at the chosen version, which drops fields
// that version cannot carry and leaves fields the caller did not set at
// kmsg's defaults for that version; here such fields are passed as set. Both
// sides must therefore build and read only fields of the version in use
// (handlers build responses for req.Version already), and neither side may
// modify or keep using the values after the call (the handler may still
// hold the request while its Reply runs, and the response may share memory
// with what built it). A client made with AtCallerVersion is the exception
// for requests: those are encoded and decoded at the caller's version, as
// over TCP.

// resolveLocal runs an in-process call's Reply and ends the call (a
// method, not a closure: the inline path is every registration of `up`).
func (s *Server) resolveLocal(r *Request, reply Reply, m localMetrics) (kmsg.Response, error) {
	defer s.wg.Done()
	resp, err := resolveReply(r.Key, r.Version, reply)
	m.answered(resp)
	if err != nil {
		r.Logger().Error().Err(err).Str("reason", "request failed").Msg("in-process request failed")
		return nil, fmt.Errorf("wire: in-process %s: %w", kmsg.NameForKey(r.Key), err)
	}
	return resp, nil
}

// localMetrics are an in-process call's per-API series: counted as a
// request read from a connection is, so a node's series show the calls of
// the other nodes of its process (registrations, markers, forwards) as
// they would show them from separate processes.
type localMetrics struct {
	n      *NodeRequestMetrics
	series *apiSeries
	key    int16
	ver    int16
	start  time.Time
}

func (s *Server) localMetrics(key, version int16) localMetrics {
	series := s.cfg.Requests.series(key, version)
	if series == nil {
		return localMetrics{}
	}
	series.requests.Inc()
	return localMetrics{n: s.cfg.Requests, series: series, key: key, ver: version, start: time.Now()}
}

// answered ends the call's time and counts resp's error codes (nil: none
// answered).
func (m localMetrics) answered(resp kmsg.Response) {
	if m.series != nil {
		m.n.answered(m.series, m.key, m.ver, m.start, resp)
	}
}

// ErrServerClosed is returned by LocalClient.Do once the server's Shutdown
// has begun, as a connection attempt to a closed listener is refused.
var ErrServerClosed = errors.New("wire: server shut down")

// ErrNotAdvertised is returned by LocalClient.Do for a request the server
// does not advertise (a connection would be closed), or cannot serve
// in-process (SaslHandshake, SaslAuthenticate).
var ErrNotAdvertised = errors.New("wire: request not served")

// ErrUnsupportedVersion is returned by a LocalClient made with
// AtCallerVersion for a request at a version the server does not advertise
// for its key: a connection would be closed (conn.go), and the call is
// refused with the same log line.
var ErrUnsupportedVersion = errors.New("wire: unsupported request version")

// LocalClient calls a Server's handlers in-process as one principal. It is
// safe for concurrent use; each Do is handled as a request on its own
// connection (a fresh Request.ConnID), so concurrent calls are not ordered
// relative to each other, as requests on separate connections are not.
type LocalClient struct {
	s         *Server
	principal string
	clientID  *string
	// callerVersion: Do sends req at req.GetVersion(), as Client.Do
	// does, instead of choosing it (AtCallerVersion).
	callerVersion bool
	// inline: Do waits for the Reply on the caller's goroutine (Inline).
	inline bool
	// from is the log the caller appends to (FromLog).
	from durable.Log
}

// callerValues is the context an in-process handler runs with: the
// server's (its cancellation, as on a connection) with the caller's
// values, so an in-process caller can hand the handler what a connection
// cannot carry.
type callerValues struct {
	context.Context // the server's
	caller          context.Context
}

func (c callerValues) Value(key any) any {
	if _, ok := key.(callerDoneKey); ok {
		return c.caller.Done()
	}
	if v := c.caller.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// localAddr is Request.Remote for in-process calls.
type localAddr struct{}

func (localAddr) Network() string { return "in-process" }
func (localAddr) String() string  { return "in-process" }

// Local returns a client that calls s's handlers in-process as principal:
// with Config.Security set, Request.Principal is principal and the
// authorization helpers (Authorize, ClusterAction, Access.Guard,
// TransactionalIDAllowed) answer as for a TCP connection authenticated as
// principal; without security, Request.Principal is "" as on any
// connection, and everything is allowed.
func (s *Server) Local(principal string) *LocalClient {
	if s.sec == nil {
		principal = ""
	}
	return &LocalClient{s: s, principal: principal}
}

// WithPrincipal returns a client whose requests carry principal (when
// the server has security): a request forwarded in-process on a client's
// behalf is authorized as that client, as Kafka's Envelope carries it.
func (c *LocalClient) WithPrincipal(principal string) *LocalClient {
	cp := *c
	if c.s.sec != nil {
		cp.principal = principal
	}
	return &cp
}

// WithClientID returns a client whose requests carry id as their client id
// (Request.ClientID), as a connection's request headers would.
func (c *LocalClient) WithClientID(id string) *LocalClient {
	cp := *c
	cp.clientID = &id
	return &cp
}

// AtCallerVersion returns a client that sends each request at the version
// set on it, as Client.Do does, for a caller that negotiates the version
// itself from ApiVersions (negotiation.LeaderConn) and must be able to get
// it wrong the way it could over TCP (Kafka 4.2.0's marker sender): a
// version outside the server's advertised range is ErrUnsupportedVersion,
// where a connection would be closed. The handler gets the request as a
// connection would decode it: encoded at that version and decoded into a
// value of its own, so fields the version cannot carry (WriteTxnMarkers'
// TransactionVersion below v2) are dropped as over TCP, and the caller's
// value is never shared (for WriteTxnMarkers the decode is a typed copy,
// atVersion: no bytes on the commit path). ApiVersions is still answered
// at a version chosen here.
func (c *LocalClient) AtCallerVersion() *LocalClient {
	cp := *c
	cp.callerVersion = true
	return &cp
}

// Inline returns a client whose Do runs the handler's Reply on the
// caller's goroutine, for a caller in the same process that waits for the
// answer anyway: it saves a goroutine and two wake-ups per call, which is
// most of an in-process call's cost once the Reply is ready when the
// handler returns. ctx is then checked before the call, and seen while the
// Reply waits only as far as the Reply watches CallerDone; otherwise Do
// returns when the Reply does, which every Reply must by the server's
// Shutdown deadline (see Reply).
func (c *LocalClient) Inline() *LocalClient {
	cp := *c
	cp.inline = true
	return &cp
}

// FromLog returns a client whose requests say that the caller appends to
// l (Request.CallerLog): a handler whose write goes to l answers once it is
// appended, since what the caller writes next to l is durable only with
// it; one writing elsewhere (a coordinator's etcd store, when the caller
// is a leader on the process log) answers once durable, as over TCP. A
// client without it is a caller with no log of its own.
func (c *LocalClient) FromLog(l durable.Log) *LocalClient {
	cp := *c
	cp.from = l
	return &cp
}

// CallerDone is the Done channel of the in-process caller's context when a
// handler runs for a LocalClient call (nil over a connection, or when the
// caller's context cannot be cancelled): a Reply that may wait long (for
// another request's outcome, not for a write) also returns when it is
// closed, so an Inline caller that gives up is not held.
func CallerDone(ctx context.Context) <-chan struct{} {
	done, _ := ctx.Value(callerDoneKey{}).(<-chan struct{})
	return done
}

// callerDoneKey is the context key of CallerDone, answered by callerValues.
type callerDoneKey struct{}

// atVersion is req as a connection would decode it at version, built
// without the codec, for the requests of the commit path (the marker
// sender's WriteTxnMarkers): a copy of the caller's value with the fields
// version cannot carry at their defaults. Nil for every other request,
// which goes through an encode and a decode instead.
func atVersion(req kmsg.Request, version int16) kmsg.Request {
	switch r := req.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		cp := *r
		cp.Markers = slices.Clone(r.Markers)
		if version < 2 { // TransactionVersion is v2+, ignorable: 0 below
			for i := range cp.Markers {
				cp.Markers[i].TransactionVersion = 0
			}
		}
		return &cp
	}
	return nil
}

// ApiVersions asks the server which versions it supports, as
// Client.ApiVersions does over a connection.
func (c *LocalClient) ApiVersions(ctx context.Context) (*kmsg.ApiVersionsResponse, error) {
	resp, err := c.Do(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ApiVersionsResponse), nil
}

// Close releases nothing: a LocalClient holds no connection. It exists so
// that a LocalClient can stand where a Client does.
func (c *LocalClient) Close() error { return nil }

// Do sends req to the server's handler for its key and returns the
// response, as Client.Do would over a connection, except that the version
// is chosen here (unless AtCallerVersion): min(kmsg's max for the key, the
// server's advertised max), set on req. A key the server does not advertise
// is ErrNotAdvertised.
// ApiVersions is answered as the server answers it on a connection.
//
// A nil response with a nil error means the handler sends no response
// (Produce with acks=0). A handler or Reply that panics, returns a nil
// Reply, returns an error, or answers with a response of another key fails
// this call with an error (a connection would be closed) and is logged; the
// server keeps serving. Do returns ctx.Err() once ctx is done, leaving a
// Reply that is still waiting to finish in the background (as a connection
// whose client gave up), unless the client is Inline; it returns
// ErrServerClosed once Shutdown began.
// Read the package notes above about values shared between the caller and
// the handler.
func (c *LocalClient) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The hot in-process calls (a leader's registration, the marker
	// sender's markers) run deep on a connection's goroutine: the rare
	// paths (refusals, faults, a Reply resolved off the caller's
	// goroutine) are functions of their own, so that this frame stays
	// small and the stack seldom has to grow.
	req, version, err := c.prepare(req)
	if err != nil {
		return nil, err
	}
	s := c.s
	key := req.Key()
	// Counted as a connection is, so Shutdown waits for the call (and
	// refuses new ones) as it does for connections.
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()

	req.SetVersion(version)
	m := s.localMetrics(key, version)
	r := &Request{
		Body: req, Key: key, Version: version, Remote: localAddr{}, ConnID: connIDs.Add(1), Principal: c.principal,
		ClientID: c.clientID, Stopping: s.draining, Log: s.cfg.Log, sec: s.sec, inProcess: true, callerLog: c.from,
	}
	if s.cfg.Faults.Armed() || key == 18 {
		return c.doRare(ctx, r, m)
	}
	reply, err := s.callHandler(callerValues{Context: s.ctx, caller: ctx}, r)
	if err != nil {
		return nil, c.handlerFailed(r, err, m)
	}
	if ctx.Done() == nil || c.inline {
		return s.resolveLocal(r, reply, m)
	}
	return c.resolveAsync(ctx, r, reply, m)
}

// prepare checks req against what the server advertises and returns it at
// the version it is to be handled at (Do).
func (c *LocalClient) prepare(req kmsg.Request) (kmsg.Request, int16, error) {
	s := c.s
	key := req.Key()
	rng, ok := s.advertised[key]
	if _, registered := s.cfg.Registry.handlers[key]; !ok || (!registered && key != 18) {
		return nil, 0, fmt.Errorf("%w: %s (key %d) in-process", ErrNotAdvertised, kmsg.NameForKey(key), key)
	}
	version := min(req.MaxVersion(), rng[1])
	if c.callerVersion && key != 18 {
		if version = req.GetVersion(); version < rng[0] || version > rng[1] || refused(key, version) {
			s.cfg.Log.Warn().Str("remote", localAddr{}.String()).Int16("api_key", key).Int16("api_version", version).
				Int16("min_version", rng[0]).Int16("max_version", rng[1]).Str("reason", "unsupported version").
				Msg("in-process request refused: unsupported request")
			return nil, 0, fmt.Errorf("%w: %s v%d, v%d-v%d advertised", ErrUnsupportedVersion, kmsg.NameForKey(key), version, rng[0], rng[1])
		}
		if narrowed := atVersion(req, version); narrowed != nil {
			req = narrowed
		} else {
			decoded, err := decodeBody(header{key: key, version: version}, req.AppendTo(nil))
			if err != nil {
				return nil, 0, fmt.Errorf("wire: in-process %s v%d: %w", kmsg.NameForKey(key), version, err)
			}
			req = decoded
		}
	}
	if version < rng[0] {
		return nil, 0, fmt.Errorf("%w: %s v%d-v%d advertised, kmsg speaks up to v%d", ErrNotAdvertised, kmsg.NameForKey(key), rng[0], rng[1], req.MaxVersion())
	}
	return req, version, nil
}

// doRare is the rest of Do for ApiVersions and while faults are armed.
func (c *LocalClient) doRare(ctx context.Context, r *Request, m localMetrics) (kmsg.Response, error) {
	s := c.s
	var reply Reply
	var fault faults.Decision
	if f := s.cfg.Faults; f.Armed() {
		var answer Reply
		var drop bool
		if fault, answer, drop = s.faultBefore(ctx.Done(), r, r.Body); drop {
			m.answered(nil)
			s.wg.Done()
			return nil, fmt.Errorf("wire: in-process %s: dropped by an injected fault", kmsg.NameForKey(r.Key))
		}
		reply = answer
	}
	switch {
	case reply != nil: // an injected fault's answer
	case r.Key == 18:
		resp := s.answerApiVersions(r.Body.(*kmsg.ApiVersionsRequest))
		// Shared with every ApiVersions answer: the caller gets its own.
		resp.ApiKeys = slices.Clone(resp.ApiKeys)
		reply = Now(resp)
	default:
		var err error
		if reply, err = s.callHandler(callerValues{Context: s.ctx, caller: ctx}, r); err != nil {
			return nil, c.handlerFailed(r, err, m)
		}
	}
	reply = s.faultAfter(fault, ctx.Done(), reply)
	if ctx.Done() == nil || c.inline {
		return s.resolveLocal(r, reply, m)
	}
	return c.resolveAsync(ctx, r, reply, m)
}

// handlerFailed ends a call whose handler failed (Do).
func (c *LocalClient) handlerFailed(r *Request, err error, m localMetrics) error {
	m.answered(nil)
	c.s.wg.Done()
	r.Logger().Error().Err(err).Str("reason", "handler failed").Msg("in-process request failed")
	return fmt.Errorf("wire: in-process %s: %w", kmsg.NameForKey(r.Key), err)
}

// resolveAsync resolves reply on a goroutine of its own, so that the
// caller can give up when ctx ends (a client that is not Inline).
func (c *LocalClient) resolveAsync(ctx context.Context, r *Request, reply Reply, m localMetrics) (kmsg.Response, error) {
	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.s.resolveLocal(r, reply, m)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
