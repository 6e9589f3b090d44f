package coordclient

import (
	"context"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// Dial returns a Client over wire.Client to addr that (re)connects lazily,
// does ApiVersions on each connect and sends each request at min(kmsg max,
// the coordinator's advertised max).
func Dial(addr string, log zerolog.Logger) Client {
	return DialWith(addr, wire.DialConfig{}, log)
}

// DialWith is Dial over TLS and SASL as dc says: with security on, leaders
// authenticate to the coordinator as the cluster principal, which
// AddPartitionsToTxn v4+ requires.
func DialWith(addr string, dc wire.DialConfig, log zerolog.Logger) Client {
	return &dialed{addr: addr, dial: dc, log: log.With().Str("coordinator", addr).Logger()}
}

// dialed keeps a small pool of connections: wire.Client runs one request at
// a time, and the Registrar keeps several AddPartitionsToTxn in flight (one
// batch waiting for a previous transaction's markers must not hold up the
// registrations queued behind it).
type dialed struct {
	addr string
	dial wire.DialConfig
	log  zerolog.Logger

	mu     sync.Mutex
	idle   []*conn
	closed bool // set by Close: no new connection, none kept
}

// conn is one connection and the versions its ApiVersions advertised.
type conn struct {
	cl       *wire.Client
	versions map[int16][2]int16
}

// maxIdleConns bounds the idle pool; connections beyond it are closed.
const maxIdleConns = DefaultRegistrationsInFlight

func (d *dialed) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	return answer[*kmsg.AddPartitionsToTxnResponse](d.do(ctx, req, addPartitionsBrokerVersion))
}

func (d *dialed) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	return answer[*kmsg.InitProducerIDResponse](d.do(ctx, req, 0))
}

func (d *dialed) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	return answer[*kmsg.FindCoordinatorResponse](d.do(ctx, req, FindCoordinatorBatchedVersion))
}

// Local is false: every request is a round trip over TCP.
func (d *dialed) Local() bool { return false }

// Close closes the idle connections; a connection in use is closed when
// its request ends, and later requests fail without dialing.
func (d *dialed) Close() error {
	d.mu.Lock()
	idle := d.idle
	d.idle, d.closed = nil, true
	d.mu.Unlock()
	for _, cc := range idle {
		cc.cl.Close()
	}
	return nil
}

func (d *dialed) do(ctx context.Context, req kmsg.Request, minVersion int16) (kmsg.Response, error) {
	cc, err := d.get(ctx)
	if err != nil {
		return nil, err
	}
	rng, ok := cc.versions[req.Key()]
	version := min(req.MaxVersion(), rng[1])
	if !ok || version < max(rng[0], minVersion) {
		d.put(cc)
		return nil, unsupported(req, minVersion)
	}
	req.SetVersion(version)
	resp, err := cc.cl.Do(ctx, req)
	if err != nil {
		// This connection is dropped; the next request dials again and
		// renegotiates.
		cc.cl.Close()
		return nil, err
	}
	d.put(cc)
	return resp, nil
}

// unsupported is the error for a request the coordinator cannot take at
// minVersion or above; it is refused before sending.
func unsupported(req kmsg.Request, minVersion int16) error {
	return fmt.Errorf("coordclient: coordinator does not support %s v%d+: %w", kmsg.NameForKey(req.Key()), minVersion, kerr.UnsupportedVersion)
}

// get takes an idle connection or dials a new one (ApiVersions first).
func (d *dialed) get(ctx context.Context) (*conn, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("coordclient: coordinator client %s closed", d.addr)
	}
	if n := len(d.idle); n > 0 {
		cc := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		return cc, nil
	}
	d.mu.Unlock()
	cl, err := wire.DialWith(ctx, d.addr, cluster.LeaderClientID, d.dial)
	if err != nil {
		return nil, fmt.Errorf("coordclient: dial coordinator %s: %w", d.addr, err)
	}
	av, err := cl.ApiVersions(ctx)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("coordclient: coordinator ApiVersions: %w", err)
	}
	d.log.Debug().Msg("connected to coordinator")
	return &conn{cl: cl, versions: versionsOf(av)}, nil
}

func (d *dialed) put(cc *conn) {
	d.mu.Lock()
	if !d.closed && len(d.idle) < maxIdleConns {
		d.idle = append(d.idle, cc)
		cc = nil
	}
	d.mu.Unlock()
	if cc != nil {
		cc.cl.Close()
	}
}
