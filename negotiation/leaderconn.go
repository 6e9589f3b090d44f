package negotiation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// API keys this package negotiates.
const (
	keyWriteTxnMarkers   = 27
	keyDescribeProducers = 61
)

// Kafka420Version is what Kafka 4.2.0's marker sender always sends, since it
// never asks a broker which versions it supports (reference §1;
// fixed by KAFKA-20322 in 4.2.1).
const Kafka420Version = 2

// LeaderConfig describes one leader connection.
type LeaderConfig struct {
	NodeID int32
	Addr   string
	// KafkaVersion is the leader's configured version, shown in Status
	// only: the version actually used comes from the leader's ApiVersions.
	KafkaVersion string
	// CoordinatorVersion is the coordinator's profile ("4.2", "4.1"); its
	// WriteTxnMarkers maximum caps the version chosen.
	CoordinatorVersion string
	// Discovery chooses min(coordinator max, leader max) per connection.
	// False reproduces Kafka 4.2.0: always the coordinator's max (v2 for a
	// 4.2 coordinator), whatever the leader advertises.
	Discovery bool
	// Dial opens a connection; nil uses wire.Dial.
	Dial func(ctx context.Context, addr string) (Transport, error)
	Log  zerolog.Logger
}

// Transport is one connection to a leader: a *wire.Client over TCP, or a
// *wire.LocalClient (AtCallerVersion) to a leader served in this process.
// Requests go at the version set on them.
type Transport interface {
	ApiVersions(ctx context.Context) (*kmsg.ApiVersionsResponse, error)
	Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close() error
}

var (
	_ Transport = (*wire.Client)(nil)
	_ Transport = (*wire.LocalClient)(nil)
)

// Status is a leader connection as operators see it. Advertised and in-use
// versions are -1 until the first negotiation; after a disconnect they keep
// the last negotiated values with Connected false.
type Status struct {
	NodeID        int32
	Addr          string
	KafkaVersion  string // as configured
	AdvertisedMin int16
	AdvertisedMax int16
	InUse         int16
	Connected     bool
	LastError     string
	NegotiatedAt  time.Time
}

// SendError is a request that failed on the connection (dial, negotiation,
// I/O or timeout). The connection is closed; the next request reconnects
// and renegotiates.
type SendError struct {
	NodeID int32
	// Version is the request version sent, -1 if nothing was sent.
	Version int16
	// AdvertisedMax is the leader's WriteTxnMarkers maximum on that
	// connection, -1 if unknown.
	AdvertisedMax int16
	Err           error
}

func (e *SendError) Error() string {
	if e.Version < 0 {
		return fmt.Sprintf("leader %d: %v", e.NodeID, e.Err)
	}
	return fmt.Sprintf("leader %d: request v%d: %v", e.NodeID, e.Version, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// ErrNoCommonVersion is returned when the leader does not advertise a
// WriteTxnMarkers version the coordinator can send.
var ErrNoCommonVersion = errors.New("no common WriteTxnMarkers version")

// LeaderConn is the coordinator's connection to one leader. Every (re)connect
// starts with ApiVersions, and the WriteTxnMarkers version of that connection
// is chosen from it (ChooseVersion), so a leader restarted with another
// Kafka version is renegotiated on the next reconnect. Requests go one at a
// time. Safe for concurrent use.
type LeaderConn struct {
	cfg      LeaderConfig
	coordMax int16
	log      zerolog.Logger

	// connMu serializes connecting, so Status never waits on a dial.
	connMu sync.Mutex
	mu     sync.Mutex
	client Transport
	status Status
	dpMax  int16 // DescribeProducers max on this connection
}

// NewLeaderConn returns an unconnected LeaderConn; it dials on first use.
func NewLeaderConn(cfg LeaderConfig) (*LeaderConn, error) {
	coordMax := MaxVersion(cfg.CoordinatorVersion, keyWriteTxnMarkers)
	if coordMax < 0 {
		return nil, fmt.Errorf("coordinator version %q: %w", cfg.CoordinatorVersion, errUnknownProfile(cfg.CoordinatorVersion))
	}
	if cfg.Dial == nil {
		cfg.Dial = func(ctx context.Context, addr string) (Transport, error) {
			return wire.Dial(ctx, addr, "txncoord-marker-sender")
		}
	}
	return &LeaderConn{
		cfg: cfg, coordMax: coordMax,
		log: cfg.Log.With().Int32("leader", cfg.NodeID).Str("addr", cfg.Addr).Logger(),
		status: Status{
			NodeID: cfg.NodeID, Addr: cfg.Addr, KafkaVersion: cfg.KafkaVersion,
			AdvertisedMin: -1, AdvertisedMax: -1, InUse: -1,
		},
	}, nil
}

func errUnknownProfile(v string) error {
	_, err := Profile(v)
	if err == nil {
		err = errors.New("profile has no WriteTxnMarkers")
	}
	return err
}

// ChooseVersion is the WriteTxnMarkers version for a connection:
// min(coordinator max, leader max) with discovery, and the coordinator max
// without it (Kafka 4.2.0). A leader that does not advertise the key, or
// whose range does not overlap, gets ErrNoCommonVersion (with discovery).
func ChooseVersion(coordMax, advMin, advMax int16, advertised, discovery bool) (int16, error) {
	if !discovery {
		return coordMax, nil
	}
	if !advertised {
		return -1, fmt.Errorf("%w: the leader does not advertise WriteTxnMarkers", ErrNoCommonVersion)
	}
	v := min(coordMax, advMax)
	if v < advMin {
		return -1, fmt.Errorf("%w: coordinator max v%d, leader v%d-v%d", ErrNoCommonVersion, coordMax, advMin, advMax)
	}
	return v, nil
}

// Connect dials and negotiates if there is no live connection.
func (c *LeaderConn) Connect(ctx context.Context) error {
	_, _, err := c.conn(ctx)
	return err
}

// conn returns the live client and the WriteTxnMarkers version in use,
// connecting first when needed.
func (c *LeaderConn) conn(ctx context.Context) (Transport, int16, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	c.mu.Lock()
	if c.client != nil {
		defer c.mu.Unlock()
		return c.client, c.status.InUse, nil
	}
	c.mu.Unlock()
	cl, err := c.cfg.Dial(ctx, c.cfg.Addr)
	if err != nil {
		return nil, -1, c.fail(-1, fmt.Errorf("dial: %w", err))
	}
	// ApiVersions first on every connection: the leader may have been
	// restarted with another Kafka version since the last one.
	av, err := cl.ApiVersions(ctx)
	if err == nil && av.ErrorCode != 0 {
		err = fmt.Errorf("error code %d", av.ErrorCode)
	}
	if err != nil {
		cl.Close()
		return nil, -1, c.fail(-1, fmt.Errorf("ApiVersions: %w", err))
	}
	advMin, advMax, advertised, dpMax := int16(-1), int16(-1), false, int16(-1)
	for _, k := range av.ApiKeys {
		switch k.ApiKey {
		case keyWriteTxnMarkers:
			advMin, advMax, advertised = k.MinVersion, k.MaxVersion, true
		case keyDescribeProducers:
			dpMax = min(k.MaxVersion, kmsg.NewPtrDescribeProducersRequest().MaxVersion())
		}
	}
	inUse, chooseErr := ChooseVersion(c.coordMax, advMin, advMax, advertised, c.cfg.Discovery)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.AdvertisedMin, c.status.AdvertisedMax = advMin, advMax
	c.status.NegotiatedAt = time.Now()
	c.dpMax = dpMax
	if chooseErr != nil {
		cl.Close()
		c.status.InUse = -1
		return nil, -1, c.failLocked(-1, chooseErr)
	}
	if inUse != c.status.InUse {
		c.log.Info().Int16("wtm_version", inUse).Int16("advertised_min", advMin).Int16("advertised_max", advMax).
			Bool("discovery", c.cfg.Discovery).Msg("WriteTxnMarkers version negotiated")
	}
	c.client = cl
	c.status.InUse = inUse
	c.status.Connected = true
	c.status.LastError = ""
	return cl, inUse, nil
}

func (c *LeaderConn) fail(version int16, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failLocked(version, err)
}

// failLocked records a connection failure and returns it as a SendError.
func (c *LeaderConn) failLocked(version int16, err error) error {
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
	c.status.Connected = false
	c.status.LastError = err.Error()
	return &SendError{NodeID: c.cfg.NodeID, Version: version, AdvertisedMax: c.status.AdvertisedMax, Err: err}
}

// do sends one request on the live connection; an error closes it.
func (c *LeaderConn) do(ctx context.Context, cl Transport, req kmsg.Request) (kmsg.Response, error) {
	resp, err := cl.Do(ctx, req)
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.client == cl {
			return nil, c.failLocked(req.GetVersion(), err)
		}
		// Another caller already replaced the broken connection.
		return nil, &SendError{NodeID: c.cfg.NodeID, Version: req.GetVersion(), AdvertisedMax: c.status.AdvertisedMax, Err: err}
	}
	return resp, nil
}

// WriteTxnMarkers sends req at the version negotiated on this connection
// (connecting first if needed). kmsg drops TransactionVersion below v2.
func (c *LeaderConn) WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	cl, v, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	req.SetVersion(v)
	resp, err := c.do(ctx, cl, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// DescribeProducers sends req at min(kmsg max, the leader's max).
func (c *LeaderConn) DescribeProducers(ctx context.Context, req *kmsg.DescribeProducersRequest) (*kmsg.DescribeProducersResponse, error) {
	cl, _, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	dpMax := c.dpMax
	c.mu.Unlock()
	if dpMax < 0 {
		return nil, &SendError{NodeID: c.cfg.NodeID, Version: -1, AdvertisedMax: -1, Err: errors.New("the leader does not advertise DescribeProducers")}
	}
	req.SetVersion(dpMax)
	resp, err := c.do(ctx, cl, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.DescribeProducersResponse), nil
}

// Reset closes the connection so that the next request reconnects and
// renegotiates (after UNSUPPORTED_VERSION, for instance).
func (c *LeaderConn) Reset(reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		c.failLocked(c.status.InUse, reason)
	}
}

// Status returns the connection's state.
func (c *LeaderConn) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Close closes the connection; a later request would dial again.
func (c *LeaderConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
	c.status.Connected = false
	return nil
}
