package wire

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/durable"
)

// Request is one decoded request as a handler sees it.
type Request struct {
	Body          kmsg.Request
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
	Remote        net.Addr
	ConnID        uint64
	// Principal is the authenticated principal of the connection ("" when
	// security is off).
	Principal string
	// Stopping is closed when the server begins a graceful shutdown.
	Stopping <-chan struct{}
	// Log is the server's logger. Logger adds the connection's and the
	// request's fields to it.
	Log zerolog.Logger

	// sec is the listener's security (nil when off, and in requests that
	// tests build by hand): the authorization helpers read it.
	sec *serverSecurity
	// inProcess: a LocalClient call, whose Log lacks the remote and
	// connection fields a connection's has.
	inProcess bool
	// callerLog is the log the caller appends to (LocalClient.FromLog),
	// nil over a connection.
	callerLog durable.Log
	logOnce   sync.Once
	logger    zerolog.Logger
	// refusalLogged is the connection's: a refusal was logged at info
	// (LogRefused). Nil for an in-process call.
	refusalLogged *atomic.Bool
}

// InProcess reports whether the request comes from a LocalClient: a
// caller in this process (its connection id is its own, it has no remote
// address).
func (r *Request) InProcess() bool { return r.inProcess }

// CallerLog is the log the caller appends to: set for an in-process
// caller that said so (LocalClient.FromLog), nil over a connection. A
// handler whose write goes to the same log may answer as soon as it is
// appended (durable.Shares): whatever the caller appends next, and waits
// for before answering anyone else, is durable only with it.
func (r *Request) CallerLog() durable.Log { return r.callerLog }

// WithBody is a copy of r carrying body instead of r.Body: a part of a
// batched request that a router hands to the handler of that part, with
// the connection's principal, security context and in-process flag, so
// the part is authorized and answered exactly as the whole would be.
func (r *Request) WithBody(body kmsg.Request) *Request {
	return &Request{Body: body, Key: r.Key, Version: r.Version, CorrelationID: r.CorrelationID, ClientID: r.ClientID,
		Remote: r.Remote, ConnID: r.ConnID, Principal: r.Principal, Stopping: r.Stopping, Log: r.Log,
		sec: r.sec, inProcess: r.inProcess, callerLog: r.callerLog, refusalLogged: r.refusalLogged}
}

// LogRefused logs that the request was refused and why (a topic and its
// error): at info level the first time on a connection, so that a client
// whose setup fails on a refusal leaves a trace in the log, and at debug
// level after that, so that a client retrying does not flood it. An
// in-process call logs at info each time.
func (r *Request) LogRefused(resource string, code int16, reason string) {
	level := zerolog.DebugLevel
	if r.refusalLogged == nil || r.refusalLogged.CompareAndSwap(false, true) {
		level = zerolog.InfoLevel
	}
	l := r.Logger().WithLevel(level)
	if r.ClientID != nil {
		l = l.Str("client_id", *r.ClientID)
	}
	l.Str("resource", resource).Str("error", kerr.ErrorForCode(code).Error()).Str("reason", reason).Msg("request refused")
}

// Logger is Log with the connection's and the request's fields (remote,
// connection id, correlation id, api key and version; for an in-process
// call the remote "in-process" and the call id), built
// on first use: zerolog's With copies and formats every field at once, and
// most requests log nothing. Safe for concurrent use by a handler and its
// Reply.
func (r *Request) Logger() *zerolog.Logger {
	r.logOnce.Do(func() {
		c := r.Log.With()
		if r.inProcess {
			c = c.Str("remote", localAddr{}.String()).Uint64("conn", r.ConnID)
		} else {
			// The connection's fields, as conn.log has them (none in a
			// request a test built by hand).
			if r.Remote != nil {
				c = c.Str("remote", r.Remote.String()).Uint64("conn", r.ConnID)
			}
			c = c.Int32("correlation_id", r.CorrelationID)
		}
		r.logger = c.Int16("api_key", r.Key).Int16("api_version", r.Version).Logger()
	})
	return &r.logger
}

// Reply produces a handler's response. The server calls it from the
// connection's writer goroutine, in request order, so a Reply may block until
// a durable write completes without holding up the decoding and handling of
// the next request on the same connection. Returning an error closes the
// connection (after logging the error). A Reply that waits for something
// open-ended (a long-poll) should answer once Request.Stopping is closed,
// when Shutdown begins; every waiting Reply must return once the handler's
// ctx is done, which Shutdown cancels at its deadline.
type Reply func() (kmsg.Response, error)

// Now is a Reply with a response that is already complete.
func Now(resp kmsg.Response) Reply { return func() (kmsg.Response, error) { return resp, nil } }

// Fail is a Reply that closes the connection with err logged.
func Fail(err error) Reply { return func() (kmsg.Response, error) { return nil, err } }

// Handler handles one request. Handlers run one at a time per connection, in
// request order, so state changes of pipelined requests on one connection are
// applied in the order they were sent (as Kafka does). A handler that must
// wait (for an fsync, a long-poll fetch, another node) returns a Reply that
// waits, instead of waiting itself.
type Handler func(ctx context.Context, req *Request) Reply

type registration struct {
	min, max int16
	handle   Handler
	// standIn: the node advertises the key but does not serve it (it
	// answers so the client goes to the node that does): see Serves.
	standIn bool
}

// Registry maps API keys to handlers and the version range they implement.
// The range a node advertises is this range clamped by the node's profile.
type Registry struct {
	handlers map[int16]registration
	// disconnected are called with a connection's id once it ended.
	disconnected []func(connID uint64)
}

// connIDs numbers the connections (and in-process calls) of every server
// of the process, so that an id names one connection even where handlers
// are registered with several servers.
var connIDs atomic.Uint64

// OnDisconnect registers f to be called with a connection's id
// (Request.ConnID) once the connection ended: state a client keeps per
// connection (Kafka's share sessions) can then go. An in-process call
// (LocalClient) never ends a connection. Register before the server
// starts; f must not block for long.
func (r *Registry) OnDisconnect(f func(connID uint64)) {
	r.disconnected = append(r.disconnected, f)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: make(map[int16]registration)} }

// Register adds the handler of one API key. Registering a key twice, or a
// range that kmsg cannot encode, is a programming error and panics at start.
func (r *Registry) Register(key, minVersion, maxVersion int16, h Handler) {
	if _, dup := r.handlers[key]; dup {
		panic(fmt.Sprintf("wire: API key %d (%s) registered twice", key, kmsg.NameForKey(key)))
	}
	req := kmsg.RequestForKey(key)
	if req == nil || minVersion < 0 || maxVersion < minVersion || maxVersion > req.MaxVersion() {
		panic(fmt.Sprintf("wire: bad registration for key %d: v%d-v%d", key, minVersion, maxVersion))
	}
	r.handlers[key] = registration{min: minVersion, max: maxVersion, handle: h}
}

// RegisterStandIn is Register for a key the node advertises without serving
// it (cluster.RegisterNotServed: NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER),
// so that Serves can tell it from a handler that does the work.
func (r *Registry) RegisterStandIn(key, minVersion, maxVersion int16, h Handler) {
	r.Register(key, minVersion, maxVersion, h)
	reg := r.handlers[key]
	reg.standIn = true
	r.handlers[key] = reg
}

// Serves reports whether key has a handler that does the work, not a
// stand-in. The coordinator asks it whether its node applies the markers of
// __consumer_offsets (a group coordinator registered WriteTxnMarkers). Safe
// for concurrent use once the server has started (the registry no longer
// changes then).
func (r *Registry) Serves(key int16) bool {
	reg, ok := r.handlers[key]
	return ok && !reg.standIn
}

// Wrap replaces key's handler h with wrap(h), keeping its range: a check
// every implementation of the key needs (authorization) wherever it was
// registered. It reports whether key was registered.
func (r *Registry) Wrap(key int16, wrap func(Handler) Handler) bool {
	reg, ok := r.handlers[key]
	if ok {
		reg.handle = wrap(reg.handle)
		r.handlers[key] = reg
	}
	return ok
}

// Keys returns the registered keys in ascending order.
func (r *Registry) Keys() []int16 {
	keys := make([]int16, 0, len(r.handlers))
	for k := range r.handlers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// Range returns the registered version range of key.
func (r *Registry) Range(key int16) (minVersion, maxVersion int16, ok bool) {
	reg, ok := r.handlers[key]
	return reg.min, reg.max, ok
}
