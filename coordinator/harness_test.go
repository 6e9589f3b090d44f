package coordinator

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// fakeMarkers is a marker sender whose leaders are all elsewhere: it
// delivers a transaction's markers once its Prepare is durable (Txn.At,
// Pos), as the real one does for leaders of another process, and records
// what it delivered; with complete set it reports them written at once,
// as a sender whose leaders all ack would.
type fakeMarkers struct {
	mu       sync.Mutex
	c        *Coordinator
	complete bool
	got      []markersender.Txn
	queued   map[string]markersender.Txn // enqueued, not acknowledged
}

func (f *fakeMarkers) Enqueue(txn markersender.Txn) {
	f.mu.Lock()
	if f.queued == nil {
		f.queued = map[string]markersender.Txn{}
	}
	f.queued[txn.TransactionalID] = txn
	f.mu.Unlock()
	deliver := func(err error) {
		f.mu.Lock()
		if cur, ok := f.queued[txn.TransactionalID]; !ok || cur.Pos != txn.Pos || cur.At != txn.At {
			f.mu.Unlock()
			return // forgotten or replaced
		}
		if err != nil {
			delete(f.queued, txn.TransactionalID)
			f.mu.Unlock()
			return // never durable: no markers
		}
		f.got = append(f.got, txn)
		c, complete := f.c, f.complete
		if complete {
			delete(f.queued, txn.TransactionalID)
		}
		f.mu.Unlock()
		if complete && c != nil {
			c.MarkersWritten(txn)
		}
	}
	if txn.At == nil {
		deliver(nil)
		return
	}
	txn.At.OnDurable(txn.Pos, deliver)
}

// Undelivered is every partition of a transaction not acknowledged: the
// fake cannot tell which leader acknowledged.
func (f *fakeMarkers) Undelivered(txnID string) []txncore.TopicPartition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued[txnID].Partitions
}

func (f *fakeMarkers) Forget(txnID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.queued, txnID)
}

// snapshot is what was delivered so far.
func (f *fakeMarkers) snapshot() []markersender.Txn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]markersender.Txn(nil), f.got...)
}

// observedStore is a MemoryStore that reports every batch it accepts on
// submitted (buffered: the coordinator submits under an id's lock).
type observedStore struct {
	*txnlog.MemoryStore
	submitted chan txnlog.Batch
}

func newObservedStore() *observedStore {
	return &observedStore{MemoryStore: txnlog.NewMemory(), submitted: make(chan txnlog.Batch, 1024)}
}

func (s *observedStore) Submit(b txnlog.Batch) (durable.Pos, error) {
	pos, err := s.MemoryStore.Submit(b)
	if err == nil {
		s.submitted <- b
	}
	return pos, err
}

func testView(coordAddr string, leaderAddrs ...string) *cluster.View {
	f := &cluster.File{
		ClusterID:         "test",
		Coordinator:       &cluster.Node{NodeID: 0, Addr: coordAddr, KafkaVersion: "4.2"},
		DefaultPartitions: 3,
		Topics:            map[string]int32{"orders": 4},
	}
	for i, a := range leaderAddrs {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: int32(i + 1), Addr: a, KafkaVersion: "4.2"})
	}
	if len(f.Leaders) == 0 {
		f.Leaders = []cluster.Node{{NodeID: 1, Addr: "127.0.0.1:1", KafkaVersion: "4.2"}}
	}
	return cluster.NewView(f)
}

// openTest opens a coordinator on store with fake markers.
func openTest(t testing.TB, view *cluster.View, store txnlog.Store, complete bool) (*Coordinator, *fakeMarkers) {
	t.Helper()
	fm := &fakeMarkers{complete: complete}
	c, err := Open(Config{View: view, Store: store, Markers: fm, KafkaVersion: "4.2", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	fm.mu.Lock()
	fm.c = c
	fm.mu.Unlock()
	t.Cleanup(func() { c.Close() })
	return c, fm
}

// call runs one handler in-process, as the wire server would, as a request
// from a txncoord leader (client id cluster.LeaderClientID).
func call(c *Coordinator, key int16, req kmsg.Request) kmsg.Response {
	return callAs(c, cluster.LeaderClientID, key, req)
}

// callAs is call with another client id.
func callAs(c *Coordinator, clientID string, key int16, req kmsg.Request) kmsg.Response {
	r := &wire.Request{Body: req, Key: key, Version: req.GetVersion(), ClientID: &clientID, Log: zerolog.Nop()}
	var reply wire.Reply
	switch key {
	case 22:
		reply = c.handleInitProducerID(context.Background(), r)
	case 24:
		reply = c.handleAddPartitionsToTxn(context.Background(), r)
	case 25:
		reply = c.handleAddOffsetsToTxn(context.Background(), r)
	case 26:
		reply = c.handleEndTxn(context.Background(), r)
	case 65:
		reply = c.handleDescribeTransactions(context.Background(), r)
	case 66:
		reply = c.handleListTransactions(context.Background(), r)
	}
	resp, err := reply()
	if err != nil {
		panic(err)
	}
	return resp
}

func initPID(t testing.TB, c *Coordinator, id string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
	resp := call(c, 22, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func addPartitionsV3(c *Coordinator, id string, pid int64, epoch int16, topic string, parts ...int32) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := call(c, 24, req).(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// addPartitionsV5 is a leader's implicit add (VerifyOnly=false).
func addPartitionsV5(c *Coordinator, id string, pid int64, epoch int16, topic string, parts ...int32) int16 {
	req := leaderAddRequest(id, pid, epoch, topic, parts...)
	resp := call(c, 24, req).(*kmsg.AddPartitionsToTxnResponse)
	return firstV4Error(resp)
}

func leaderAddRequest(id string, pid int64, epoch int16, topic string, parts ...int32) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = id, pid, epoch
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = topic, parts
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	return req
}

func firstV4Error(resp *kmsg.AddPartitionsToTxnResponse) int16 {
	for _, tx := range resp.Transactions {
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	}
	return resp.ErrorCode
}

func endTxn(c *Coordinator, version int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return call(c, 26, req).(*kmsg.EndTxnResponse)
}

// waitFor polls cond until it holds (no sleeps as synchronization).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitState(t testing.TB, c *Coordinator, id string, state txnlog.State) TxnDetail {
	t.Helper()
	var d TxnDetail
	waitFor(t, fmt.Sprintf("%s in %s", id, state), func() bool {
		var ok bool
		d, ok = c.Describe(id)
		return ok && d.State == state.String() && !d.Pending
	})
	return d
}

// listenLocal reserves a loopback port for a wire server.
func listenLocal(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func startServer(t testing.TB, ln net.Listener, reg *wire.Registry, view *cluster.View) *wire.Server {
	t.Helper()
	profile, err := negotiation.Profile("4.2")
	if err != nil {
		t.Fatal(err)
	}
	s, err := wire.Start(wire.Config{Listener: ln, Registry: reg, Profile: profile, Features: func() wire.Features { return view.Features("4.2") }, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}
