package testkit

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// Action scripts the answer to one WriteTxnMarkers request.
type Action struct {
	// Code is the error code of every partition in the request.
	Code int16
	// Close closes the connection instead of answering.
	Close bool
	// Hang never answers (until the leader is closed), so the sender's
	// request timeout fires.
	Hang bool
}

// Marker is one marker as the fake leader decoded it.
type Marker struct {
	ProducerID         int64
	ProducerEpoch      int16
	Commit             bool
	CoordinatorEpoch   int32
	TransactionVersion int8
	Partitions         int
}

// Received is one WriteTxnMarkers request the fake leader handled.
type Received struct {
	Version int16
	Markers []Marker
}

// FakeLeader is a scripted partition leader: a real wire server with the
// version profile of a Kafka release, answering WriteTxnMarkers from a
// script (NONE once the script is exhausted) and DescribeProducers from a
// table. Like a real broker, the wire server closes the connection on a
// version outside the profile.
type FakeLeader struct {
	mu        sync.Mutex
	addr      string
	version   string
	srv       *wire.Server
	script    []Action
	received  []Received
	producers map[string][]kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	conns     int
	stop      chan struct{}
	noWTM     bool
}

// StartFakeLeader listens on 127.0.0.1 (a free port) with the profile of
// kafkaVersion ("4.2", "4.1", ...).
func StartFakeLeader(kafkaVersion string) (*FakeLeader, error) {
	l := &FakeLeader{addr: "127.0.0.1:0", producers: map[string][]kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}}
	return l, l.start(kafkaVersion)
}

// StartFakeLeaderWithoutMarkers starts a leader that does not implement
// WriteTxnMarkers at all.
func StartFakeLeaderWithoutMarkers(kafkaVersion string) (*FakeLeader, error) {
	l := &FakeLeader{addr: "127.0.0.1:0", noWTM: true, producers: map[string][]kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}}
	return l, l.start(kafkaVersion)
}

func (l *FakeLeader) start(kafkaVersion string) error {
	profile, err := negotiation.Profile(kafkaVersion)
	if err != nil {
		return err
	}
	reg := wire.NewRegistry()
	if !l.noWTM {
		reg.Register(27, 0, kmsg.NewPtrWriteTxnMarkersRequest().MaxVersion(), l.handleWriteTxnMarkers)
	}
	reg.Register(61, 0, 0, l.handleDescribeProducers)
	stop := make(chan struct{})
	srv, err := wire.Start(wire.Config{
		Addr: l.addr, Registry: reg, Profile: profile,
		WrapConn: func(nc net.Conn) (net.Conn, string, error) {
			l.mu.Lock()
			l.conns++
			l.mu.Unlock()
			return nc, "", nil
		},
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.srv, l.version, l.addr, l.stop = srv, kafkaVersion, srv.Addr().String(), stop
	l.mu.Unlock()
	return nil
}

// Addr is the listener's address (stable across Restart).
func (l *FakeLeader) Addr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

// Local is an in-process transport to the running server (nil while the
// leader is stopped): what `txncoord up` dials for a leader in its own
// process.
func (l *FakeLeader) Local() *wire.LocalClient {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv == nil {
		return nil
	}
	return l.srv.Local("").WithClientID("txncoord-markers").AtCallerVersion().Inline()
}

// Script appends answers for the next WriteTxnMarkers requests.
func (l *FakeLeader) Script(actions ...Action) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.script = append(l.script, actions...)
}

// SetProducers sets what DescribeProducers answers for a partition.
func (l *FakeLeader) SetProducers(topic string, partition int32, ps ...kmsg.DescribeProducersResponseTopicPartitionActiveProducer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.producers[fmt.Sprintf("%s/%d", topic, partition)] = ps
}

// Received returns the WriteTxnMarkers requests handled so far.
func (l *FakeLeader) Received() []Received {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Received(nil), l.received...)
}

// Conns is the number of connections accepted so far.
func (l *FakeLeader) Conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns
}

// Restart stops the server and listens again on the same address with the
// profile of kafkaVersion: an upgraded or downgraded broker.
func (l *FakeLeader) Restart(kafkaVersion string) error {
	l.shutdown()
	return l.start(kafkaVersion)
}

// Close stops the server.
func (l *FakeLeader) Close() { l.shutdown() }

func (l *FakeLeader) shutdown() {
	l.mu.Lock()
	srv, stop := l.srv, l.stop
	l.srv = nil
	l.mu.Unlock()
	if srv == nil {
		return
	}
	close(stop) // releases hanging replies first, so Shutdown can finish
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

func (l *FakeLeader) handleWriteTxnMarkers(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	l.mu.Lock()
	rec := Received{Version: r.Version}
	for _, m := range req.Markers {
		n := 0
		for _, t := range m.Topics {
			n += len(t.Partitions)
		}
		rec.Markers = append(rec.Markers, Marker{
			ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed,
			CoordinatorEpoch: m.CoordinatorEpoch, TransactionVersion: m.TransactionVersion, Partitions: n,
		})
	}
	l.received = append(l.received, rec)
	var act Action
	if len(l.script) > 0 {
		act, l.script = l.script[0], l.script[1:]
	}
	stop := l.stop
	l.mu.Unlock()
	switch {
	case act.Close:
		return wire.Fail(fmt.Errorf("fake leader: scripted close"))
	case act.Hang:
		return func() (kmsg.Response, error) {
			<-stop
			return nil, fmt.Errorf("fake leader: stopped while hanging")
		}
	}
	return wire.Now(wire.ErrorResponse(req, act.Code))
}

func (l *FakeLeader) handleDescribeProducers(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	l.mu.Lock()
	defer l.mu.Unlock()
	return wire.Now(wire.DescribeProducersResponse(req, func(topic string, p int32) (int16, wire.ActiveProducers) {
		return 0, l.producers[fmt.Sprintf("%s/%d", topic, p)]
	}))
}
