package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/security"
)

// sniffListener records what arrives on a listener's connections: per
// request frame its API key, version and client id (plaintext only).
type sniffListener struct {
	net.Listener
	mu        sync.Mutex
	conns     int
	clientIDs map[string]int           // client id → request frames
	requests  map[[2]int16]int         // {key, version} → request frames
	byClient  map[string]map[int16]int // client id → key → frames
}

func newSniffListener(t *testing.T) *sniffListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &sniffListener{Listener: ln, clientIDs: map[string]int{}, requests: map[[2]int16]int{}, byClient: map[string]map[int16]int{}}
}

func (l *sniffListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns++
	l.mu.Unlock()
	return &sniffConn{Conn: nc, l: l}, nil
}

func (l *sniffListener) record(frame []byte) {
	if len(frame) < 10 {
		return
	}
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	id := "<null>"
	if n := int16(binary.BigEndian.Uint16(frame[8:])); n >= 0 && len(frame) >= 10+int(n) {
		id = string(frame[10 : 10+int(n)])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clientIDs[id]++
	l.requests[[2]int16{key, version}]++
	if l.byClient[id] == nil {
		l.byClient[id] = map[int16]int{}
	}
	l.byClient[id][key]++
}

// count is the number of request frames of key, at versions >= minVersion.
func (l *sniffListener) count(key, minVersion int16) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for kv, c := range l.requests {
		if kv[0] == key && kv[1] >= minVersion {
			n += c
		}
	}
	return n
}

func (l *sniffListener) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d connections, requests by client id and key: %v", l.conns, l.byClient)
}

// sniffConn splits what the server reads into request frames.
type sniffConn struct {
	net.Conn
	l   *sniffListener
	buf []byte
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for len(c.buf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < 4+size {
			break
		}
		c.l.record(c.buf[4 : 4+size])
		c.buf = c.buf[4+size:]
	}
	return n, err
}

// startInProcessCluster starts `txncoord up`'s embedded cluster (a
// coordinator and two 4.2 leaders) with every listener sniffed: the
// coordinator's, then the leaders' in node id order.
func startInProcessCluster(t *testing.T, sec *security.Settings) (*Embedded, *sniffListener, []*sniffListener) {
	t.Helper()
	coordLn := newSniffListener(t)
	listeners := map[int32]net.Listener{0: coordLn}
	f := &cluster.File{
		ClusterID:         "inprocess-test",
		Coordinator:       &cluster.Node{NodeID: 0, Addr: coordLn.Addr().String(), KafkaVersion: "4.2"},
		DefaultPartitions: 2,
		Topics:            map[string]int32{"orders": 4},
		Security:          sec,
	}
	var leaderLns []*sniffListener
	for id := int32(1); id <= 2; id++ {
		ln := newSniffListener(t)
		leaderLns = append(leaderLns, ln)
		listeners[id] = ln
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: ln.Addr().String(), KafkaVersion: "4.2"})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	e := startEmbeddedFile(t, t.TempDir(), f, listeners)
	return e, coordLn, leaderLns
}

// runTV2Transactions commits txns kgo transactions, each writing one record
// to every partition of orders (both leaders), and reads them back
// read_committed.
func runTV2Transactions(t *testing.T, bootstrap string, txns int, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	producer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.TransactionalID("in-process"),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range txns {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(4) {
			rec := &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "txn-%d-p%d", i, p)}
			if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("transaction %d, partition %d: %v", i, p, err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	reader, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart(), 3: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	got := 0
	for got < 4*txns {
		fs := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d committed records: %v", got, 4*txns, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
}

// checkInProcess asserts that the coordinator handled the leaders'
// registrations (AddPartitionsToTxn) and that none of them, nor any other
// leader request, came over TCP; that the leaders applied the
// coordinator's markers and none came over TCP either; and that the
// client spoke TV2 (EndTxn v5).
func checkInProcess(t *testing.T, e *Embedded, sniff *sniffListener, leaderSniffs []*sniffListener) {
	t.Helper()
	for i, l := range e.Leaders {
		applied := 0
		for _, m := range l.Leader.ReceivedMarkers() {
			if m.ErrorCode == 0 {
				applied++
			}
		}
		if applied == 0 {
			t.Fatalf("leader %d applied no marker", l.Node.NodeID)
		}
		if n := leaderSniffs[i].count(27, 0); n != 0 {
			t.Fatalf("%d WriteTxnMarkers reached leader %d over TCP (%s)", n, l.Node.NodeID, leaderSniffs[i].summary())
		}
		leaderSniffs[i].mu.Lock()
		markerFrames := leaderSniffs[i].clientIDs[markerClientID]
		leaderSniffs[i].mu.Unlock()
		if markerFrames != 0 {
			t.Fatalf("%d requests from the marker sender reached leader %d over TCP (%s)", markerFrames, l.Node.NodeID, leaderSniffs[i].summary())
		}
	}
	if n := e.Coordinator.Coordinator.Stats().AddPartitions; n == 0 {
		t.Fatal("the coordinator handled no AddPartitionsToTxn: the leaders did not register")
	}
	if n := sniff.count(24, 0); n != 0 {
		t.Fatalf("%d AddPartitionsToTxn arrived over TCP (%s)", n, sniff.summary())
	}
	if n := sniff.count(26, 5); n == 0 {
		t.Fatalf("no EndTxn v5 over TCP: the client did not use TV2 (%s)", sniff.summary())
	}
	sniff.mu.Lock()
	defer sniff.mu.Unlock()
	if n := sniff.clientIDs["txncoord-leader"]; n != 0 {
		t.Fatalf("%d requests from leaders over TCP (%v)", n, sniff.byClient)
	}
}

// In `txncoord up` the leaders register transactions (AddPartitionsToTxn
// v5, KIP-890) with the coordinator in-process, and the coordinator sends
// its markers (WriteTxnMarkers) to the leaders in-process: kgo TV2
// transactions over both leaders commit and are read back, the coordinator
// counts the registrations, the leaders apply the markers, and no request
// between the nodes reaches a TCP listener. (A leader behind a proxy, whose
// cluster file address is not its listener's, gets its markers over TCP:
// the integration suite's late-marker tests capture them at the proxy.)
func TestEmbeddedRegistersInProcess(t *testing.T) {
	e, sniff, leaderSniffs := startInProcessCluster(t, nil)
	runTV2Transactions(t, e.Bootstrap(), 3)
	checkInProcess(t, e, sniff, leaderSniffs)
}

// With security on, the in-process registrations carry the cluster
// principal the leaders authenticate as over TCP: otherwise the
// coordinator answers CLUSTER_AUTHORIZATION_FAILED and no produce succeeds.
// (SASL without TLS, so the listener's frames can be read.)
func TestEmbeddedRegistersInProcessSecure(t *testing.T) {
	local, err := security.GenerateLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	local.Settings.TLS = nil
	e, sniff, leaderSniffs := startInProcessCluster(t, local.Settings)
	runTV2Transactions(t, e.Bootstrap(), 2, kgo.SASL(scram.Auth{User: local.ClientUser, Pass: local.ClientPassword}.AsSha512Mechanism()))
	checkInProcess(t, e, sniff, leaderSniffs)
	if got, want := clusterPrincipal(e.View), "User:"+security.LocalClusterUser; got != want {
		t.Fatalf("in-process principal %q, want %q", got, want)
	}
}

// Before the coordinator is bound (leaders start first) the client answers
// the retriable COORDINATOR_NOT_AVAILABLE, as an unreachable coordinator;
// after bind it calls the coordinator's handlers.
func TestInProcessCoordinatorBinding(t *testing.T) {
	e, _, _ := startInProcessCluster(t, nil)
	c := newInProcessCoordinator(e.View, e.Shared)
	cl := c.leaderClient()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest()); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("unbound: %v, want COORDINATOR_NOT_AVAILABLE", err)
	}
	c.bind(e.Coordinator.Server)
	resp, err := cl.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
	if err != nil || resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("bound: %v, %+v", err, resp)
	}
}
