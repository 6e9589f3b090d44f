package txnrouter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/ownership"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wire"
)

// fakeSender completes every transaction's markers at once, through the
// router it was started with, and records them.
type fakeSender struct {
	mu   sync.Mutex
	c    markersender.Completer
	sent []markersender.Txn
}

func (f *fakeSender) Start(c markersender.Completer) {
	f.mu.Lock()
	f.c = c
	f.mu.Unlock()
}

// Enqueue writes the markers once their Prepare is durable in etcd, as
// the real sender does for leaders (none appends to an etcd log).
func (f *fakeSender) Enqueue(txn markersender.Txn) {
	deliver := func(err error) {
		if err != nil {
			return
		}
		f.mu.Lock()
		f.sent = append(f.sent, txn)
		c := f.c
		f.mu.Unlock()
		go c.MarkersWritten(txn)
	}
	if txn.At == nil {
		deliver(nil)
		return
	}
	txn.At.OnDurable(txn.Pos, deliver)
}

func (f *fakeSender) Undelivered(string) []txncore.TopicPartition { return nil }
func (f *fakeSender) Forget(string)                               {}

func (f *fakeSender) snapshot() []markersender.Txn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const parts = 10

type node struct {
	member  *ownership.Member
	router  *Router
	server  *wire.Server
	markers *fakeSender
	client  *wire.Client
}

type env struct {
	t     *testing.T
	cfg   func(id int32) ownership.Config
	store *txnetcd.Store
	view  *cluster.View
	nodes map[int32]string
	lns   map[int32]net.Listener // node id -> its listener, bound before the routers start
}

// startNode starts node id's member, router and server (on its listener);
// hook, optional, is the router's beforeOpen.
func (e *env) startNode(id int32, hook func(int32)) *node {
	return e.startNodeWith(id, func(r *Router) { r.beforeOpen = hook })
}

// startNodeWith starts node id, setting the router's test hooks with
// hooks before it opens anything.
func (e *env) startNodeWith(id int32, hooks func(*Router)) *node {
	t := e.t
	m, err := ownership.Start(e.cfg(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	fs := &fakeSender{}
	r, err := New(Config{Member: m, Store: e.store, Partitions: parts, ProducerIDs: coordinator.NewProducerIDPool(e.store, 10), Markers: fs,
		Coordinator: coordinator.Config{NodeID: id, View: e.view, KafkaVersion: "4.2", AbortScanInterval: time.Hour},
		Nodes:       e.nodes, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	hooks(r)
	t.Cleanup(func() { r.Close() })
	reg := wire.NewRegistry()
	r.Register(reg)
	srv, err := wire.Start(wire.Config{Listener: e.lns[id], Registry: reg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	cl, err := wire.Dial(t.Context(), e.nodes[id], "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return &node{member: m, router: r, server: srv, markers: fs, client: cl}
}

func do[R kmsg.Response](t *testing.T, cl *wire.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Do(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

func initPID(t *testing.T, cl *wire.Client, id string) (int64, int16, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
	r := do[*kmsg.InitProducerIDResponse](t, cl, req)
	return r.ProducerID, r.ProducerEpoch, r.ErrorCode
}

func addPartitions(t *testing.T, cl *wire.Client, id string, pid int64, epoch int16, p int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = "orders", []int32{p}
	req.Topics = append(req.Topics, rt)
	r := do[*kmsg.AddPartitionsToTxnResponse](t, cl, req)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("AddPartitionsToTxn %s: %+v", id, r)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

func endTxn(t *testing.T, cl *wire.Client, id string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return do[*kmsg.EndTxnResponse](t, cl, req).ErrorCode
}

func describe(t *testing.T, cl *wire.Client, ids ...string) []kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	r := do[*kmsg.DescribeTransactionsResponse](t, cl, req)
	if len(r.TransactionStates) != len(ids) {
		t.Fatalf("DescribeTransactions %v: %d states", ids, len(r.TransactionStates))
	}
	for i, st := range r.TransactionStates {
		if st.TransactionalID != ids[i] {
			t.Fatalf("DescribeTransactions %v: state %d is %s's", ids, i, st.TransactionalID)
		}
	}
	return r.TransactionStates
}

func waitDescribed(t *testing.T, cl *wire.Client, id, state string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	var st kmsg.DescribeTransactionsResponseTransactionState
	waitFor(t, id+" in "+state, func() bool {
		st = describe(t, cl, id)[0]
		return st.ErrorCode == 0 && st.State == state
	})
	return st
}

func findCoordinator(t *testing.T, cl *wire.Client, ids ...string) []kmsg.FindCoordinatorResponseCoordinator {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorType, req.CoordinatorKeys = 1, ids
	return do[*kmsg.FindCoordinatorResponse](t, cl, req).Coordinators
}

// idOf returns a transactional id of a partition n serves, not in avoid.
func idOf(t *testing.T, r *Router, avoid ...string) string {
	serving := r.Serving()
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("txn-%d", i)
		if _, ok := serving[r.PartitionFor(id)]; ok && !slices.Contains(avoid, id) {
			return id
		}
	}
	t.Fatal("no id")
	return ""
}

// newEnv starts one etcd member and binds the listeners of nodes 0..n-1,
// whose routers share 10 partitions under prefix (lease TTL 1 s).
func newEnv(t *testing.T, prefix string, n int32) *env {
	etcd := etcdtest.Start(t, 1)
	cli := etcd.Client(t)
	layout := txnetcd.Layout{Prefix: prefix}
	e := &env{t: t, store: txnetcd.NewStore(cli, txnetcd.Options{Layout: layout, Partitions: parts}),
		nodes: map[int32]string{}, lns: map[int32]net.Listener{}}
	e.cfg = func(id int32) ownership.Config {
		return ownership.Config{Client: cli, Layout: layout, NodeID: id, Partitions: parts,
			LeaseTTL: time.Second, Settle: 300 * time.Millisecond, Log: zerolog.Nop()}
	}
	// Listeners first, so the routers know every node's address.
	for id := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		e.nodes[id], e.lns[id] = ln.Addr().String(), ln
	}
	e.view = cluster.NewView(&cluster.File{ClusterID: "test",
		Coordinator: &cluster.Node{NodeID: 0, Addr: e.nodes[0], KafkaVersion: "4.2"},
		Leaders:     []cluster.Node{{NodeID: 2, Addr: "127.0.0.1:1", KafkaVersion: "4.2"}},
		Topics:      map[string]int32{"orders": 4}, DefaultPartitions: 3})
	return e
}

// startTwoNodes starts two routers (newEnv); hook is node 1's beforeOpen.
func startTwoNodes(t *testing.T, prefix string, hook func(int32)) (*env, *node, *node) {
	e := newEnv(t, prefix, 2)
	return e, e.startNode(0, nil), e.startNode(1, hook)
}

// TestRouterTwoNodesTakeover: two routers share 10 partitions; each serves
// transactions of its own partitions, refuses the other's with
// NOT_COORDINATOR, FindCoordinator names the owner; batched requests are
// split; when node 0's member goes, node 1 takes its partitions (loading
// first: COORDINATOR_LOAD_IN_PROGRESS) and serves their transactions.
func TestRouterTwoNodesTakeover(t *testing.T) {
	var held sync.Map // partitions whose opening at node 1 the test holds
	e, n0, n1 := startTwoNodes(t, "/txncoord/router-test", func(p int32) {
		if ch, ok := held.Load(p); ok {
			<-ch.(chan struct{})
		}
	})
	waitFor(t, "both routers serving 5 partitions", func() bool {
		return len(n0.router.Serving()) == 5 && len(n1.router.Serving()) == 5
	})
	for p := range n0.router.Serving() {
		if _, both := n1.router.Serving()[p]; both {
			t.Fatalf("partition %d served by both routers", p)
		}
	}
	a := idOf(t, n0.router)
	b := idOf(t, n1.router)

	// FindCoordinator, asked at either node, names each id's owner.
	for _, n := range []*node{n0, n1} {
		cs := findCoordinator(t, n.client, a, b)
		if len(cs) != 2 || cs[0].ErrorCode != 0 || cs[0].NodeID != 0 || fmt.Sprintf("%s:%d", cs[0].Host, cs[0].Port) != e.nodes[0] ||
			cs[1].ErrorCode != 0 || cs[1].NodeID != 1 || fmt.Sprintf("%s:%d", cs[1].Host, cs[1].Port) != e.nodes[1] {
			t.Fatalf("FindCoordinator %s, %s at %v: %+v", a, b, n.server.Addr(), cs)
		}
	}
	// The wrong node refuses, and writes nothing.
	if _, _, code := initPID(t, n0.client, b); code != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducerId %s at node 0: %v, want NOT_COORDINATOR", b, kerr.ErrorForCode(code))
	}
	if code := endTxn(t, n1.client, a, 0, 0, true); code != kerr.NotCoordinator.Code {
		t.Fatalf("EndTxn %s at node 1: %v, want NOT_COORDINATOR", a, kerr.ErrorForCode(code))
	}

	// Each node commits a transaction of its own partitions; the shared
	// sender's completion reaches the right coordinator.
	pids := map[string]int64{}
	for _, c := range []struct {
		n  *node
		id string
	}{{n0, a}, {n1, b}} {
		pid, epoch, code := initPID(t, c.n.client, c.id)
		if code != 0 {
			t.Fatalf("InitProducerId %s: %v", c.id, kerr.ErrorForCode(code))
		}
		pids[c.id] = pid
		if code := addPartitions(t, c.n.client, c.id, pid, epoch, 0); code != 0 {
			t.Fatalf("AddPartitionsToTxn %s: %v", c.id, kerr.ErrorForCode(code))
		}
		if code := endTxn(t, c.n.client, c.id, pid, epoch, true); code != 0 {
			t.Fatalf("EndTxn %s: %v", c.id, kerr.ErrorForCode(code))
		}
		waitDescribed(t, c.n.client, c.id, "CompleteCommit")
	}
	if pids[a] == pids[b] {
		t.Fatalf("both ids got producer id %d", pids[a])
	}

	// An ongoing transaction on node 0, then a batch naming both nodes'
	// ids: node 0 answers its own and refuses the other's.
	pidA, epochA, code := initPID(t, n0.client, a)
	if code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := addPartitions(t, n0.client, a, pidA, epochA, 1); code != 0 {
		t.Fatalf("AddPartitionsToTxn %s: %v", a, kerr.ErrorForCode(code))
	}
	breq := kmsg.NewPtrAddPartitionsToTxnRequest()
	breq.SetVersion(4)
	for _, id := range []string{b, a} {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pidA, epochA, true
		if id == b {
			tx.ProducerID = pids[b]
		}
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "orders", []int32{1}
		tx.Topics = append(tx.Topics, tt)
		breq.Transactions = append(breq.Transactions, tx)
	}
	bresp := do[*kmsg.AddPartitionsToTxnResponse](t, n0.client, breq)
	if bresp.ErrorCode != 0 || len(bresp.Transactions) != 2 || bresp.Transactions[0].TransactionalID != b || bresp.Transactions[1].TransactionalID != a {
		t.Fatalf("batched AddPartitionsToTxn: %+v", bresp)
	}
	if got := bresp.Transactions[0].Topics[0].Partitions[0].ErrorCode; got != kerr.NotCoordinator.Code {
		t.Fatalf("batched AddPartitionsToTxn, %s at node 0: %v, want NOT_COORDINATOR", b, kerr.ErrorForCode(got))
	}
	if got := bresp.Transactions[1].Topics[0].Partitions[0].ErrorCode; got != 0 {
		t.Fatalf("batched AddPartitionsToTxn, %s (verify, added) at node 0: %v", a, kerr.ErrorForCode(got))
	}
	// DescribeTransactions splits the same way, in request order.
	sts := describe(t, n0.client, b, a)
	if sts[0].ErrorCode != kerr.NotCoordinator.Code || sts[1].ErrorCode != 0 || sts[1].State != "Ongoing" || sts[1].ProducerID != pidA {
		t.Fatalf("DescribeTransactions %s, %s at node 0: %+v", b, a, sts)
	}
	// ListTransactions lists the node's own partitions only.
	lresp := do[*kmsg.ListTransactionsResponse](t, n1.client, kmsg.NewPtrListTransactionsRequest())
	if lresp.ErrorCode != 0 || len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != b {
		t.Fatalf("ListTransactions at node 1: %+v", lresp)
	}

	// Node 0 goes. Node 1 takes its partitions; a's partition is held
	// loading until the test has seen COORDINATOR_LOAD_IN_PROGRESS.
	pa := n0.router.PartitionFor(a)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unhold) // a failure below must not leave the router's Close waiting on it
	held.Store(pa, release)
	n0.member.Close()
	waitFor(t, "node 0 serving nothing", func() bool { return len(n0.router.Serving()) == 0 })
	waitFor(t, "node 1 serving 9 partitions", func() bool { return len(n1.router.Serving()) == 9 })
	waitFor(t, "node 1 owning "+a+"'s partition", func() bool { _, ok := n1.member.Fence(pa); return ok })
	if sts := describe(t, n1.client, a); sts[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("DescribeTransactions %s while loading: %v", a, kerr.ErrorForCode(sts[0].ErrorCode))
	}
	if _, _, code := initPID(t, n1.client, a); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("InitProducerId %s while loading: %v", a, kerr.ErrorForCode(code))
	}
	if r := do[*kmsg.ListTransactionsResponse](t, n1.client, kmsg.NewPtrListTransactionsRequest()); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("ListTransactions while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	unhold()
	waitFor(t, "node 1 serving all partitions", func() bool { return len(n1.router.Serving()) == parts })
	if epoch := n1.router.Serving()[pa]; epoch != 2 {
		t.Fatalf("node 1 serves partition %d at coordinator epoch %d, want 2", pa, epoch)
	}
	// Node 0, still listening, refuses; FindCoordinator sends a there.
	if _, _, code := initPID(t, n0.client, a); code != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducerId %s at the former owner: %v, want NOT_COORDINATOR", a, kerr.ErrorForCode(code))
	}
	if cs := findCoordinator(t, n1.client, a); cs[0].ErrorCode != 0 || cs[0].NodeID != 1 {
		t.Fatalf("FindCoordinator %s after the takeover: %+v", a, cs)
	}
	// a's open transaction survived; node 1 aborts it with its epoch.
	if st := describe(t, n1.client, a)[0]; st.State != "Ongoing" || st.ProducerID != pidA {
		t.Fatalf("%s at node 1: %+v", a, st)
	}
	if code := endTxn(t, n1.client, a, pidA, epochA, false); code != 0 {
		t.Fatalf("EndTxn abort %s at node 1: %v", a, kerr.ErrorForCode(code))
	}
	waitDescribed(t, n1.client, a, "CompleteAbort")
	m := n1.markers.snapshot()
	if last := m[len(m)-1]; last.TransactionalID != a || last.Commit || last.CoordinatorEpoch != 2 {
		t.Fatalf("node 1's last markers %+v, want %s's abort at coordinator epoch 2", last, a)
	}
	// A new id of a former node-0 partition commits through node 1.
	var c string
	for i := 0; ; i++ {
		if c = fmt.Sprintf("new-%d", i); n1.router.PartitionFor(c) == pa {
			break
		}
	}
	pidC, epochC, code := initPID(t, n1.client, c)
	if code != 0 || pidC == pidA || pidC == pids[b] {
		t.Fatalf("InitProducerId %s at node 1: pid %d, %v", c, pidC, kerr.ErrorForCode(code))
	}
	if code := addPartitions(t, n1.client, c, pidC, epochC, 2); code != 0 {
		t.Fatalf("AddPartitionsToTxn %s: %v", c, kerr.ErrorForCode(code))
	}
	if code := endTxn(t, n1.client, c, pidC, epochC, true); code != 0 {
		t.Fatalf("EndTxn %s: %v", c, kerr.ErrorForCode(code))
	}
	waitDescribed(t, n1.client, c, "CompleteCommit")
}

// TestFindCoordinatorWaitsForAGoneOwner: while the owner of an id's
// partition refuses connections (its process gone, its lease not yet
// expired), FindCoordinator at another node waits: for the partition to
// move, then names the new owner; or, if it does not move, for the lease
// TTL plus a second, then names the owner it knows.
func TestFindCoordinatorWaitsForAGoneOwner(t *testing.T) {
	e, n0, n1 := startTwoNodes(t, "/txncoord/router-find-test", nil)
	var groupHolder atomic.Int32 // the node the view names for groups
	e.view.SetGroupCoordinator(func() (cluster.Node, bool) {
		id := groupHolder.Load()
		return cluster.Node{NodeID: id, Addr: e.nodes[id], KafkaVersion: "4.2"}, true
	})
	waitFor(t, "both routers serving 5 partitions", func() bool {
		return len(n0.router.Serving()) == 5 && len(n1.router.Serving()) == 5
	})
	a := idOf(t, n0.router)
	start := time.Now()
	if cs := findCoordinator(t, n1.client, a); cs[0].ErrorCode != 0 || cs[0].NodeID != 0 {
		t.Fatalf("FindCoordinator %s, its owner listening: %+v", a, cs)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("FindCoordinator for a listening owner took %v", took)
	}

	// Node 0's listener closes; its member keeps the lease.
	if err := n0.server.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(acceptedFor + 50*time.Millisecond) // the probe's "listening" is forgotten
	start = time.Now()
	cs := findCoordinator(t, n1.client, a)
	took := time.Since(start)
	if cs[0].ErrorCode != 0 || cs[0].NodeID != 0 {
		t.Fatalf("FindCoordinator %s, its owner gone but holding the lease: %+v", a, cs)
	}
	if took < 1500*time.Millisecond || took > 4*time.Second {
		t.Fatalf("FindCoordinator %s with its owner gone answered after %v, want the lease TTL + 1 s (2 s)", a, took)
	}

	// A group whose coordinator's node is gone waits the same way, until
	// the view names another.
	groupAnswer := make(chan []kmsg.FindCoordinatorResponseCoordinator, 1)
	go func() {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorType, req.CoordinatorKeys = 0, []string{"a-group"}
		resp, err := n1.client.Do(t.Context(), req)
		if err != nil {
			t.Error(err)
			groupAnswer <- nil
			return
		}
		groupAnswer <- resp.(*kmsg.FindCoordinatorResponse).Coordinators
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case cs := <-groupAnswer:
		t.Fatalf("FindCoordinator for a group answered while its coordinator's node refuses connections: %+v", cs)
	default:
	}
	groupHolder.Store(1)
	if cs := <-groupAnswer; len(cs) != 1 || cs[0].ErrorCode != 0 || cs[0].NodeID != 1 {
		t.Fatalf("FindCoordinator for a group after its coordinator moved: %+v, want node 1", cs)
	}

	// Asked again, it waits until the partition moves to node 1.
	type answer struct {
		cs  []kmsg.FindCoordinatorResponseCoordinator
		err error
		at  time.Time
	}
	got := make(chan answer, 1)
	go func() {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{a}
		resp, err := n1.client.Do(t.Context(), req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		got <- answer{cs: resp.(*kmsg.FindCoordinatorResponse).Coordinators, at: time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case ans := <-got:
		t.Fatalf("FindCoordinator answered before the partition moved: %+v, %v", ans.cs, ans.err)
	default:
	}
	closed := time.Now()
	n0.member.Close()
	ans := <-got
	if ans.err != nil {
		t.Fatal(ans.err)
	}
	if ans.cs[0].ErrorCode != 0 || ans.cs[0].NodeID != 1 {
		t.Fatalf("FindCoordinator %s after the move: %+v, want node 1", a, ans.cs)
	}
	if ans.at.Before(closed) {
		t.Fatal("FindCoordinator answered node 1 before node 0 gave the partition up")
	}
}

// TestOpenRetriedWhileOwned: a partition whose coordinator fails to open
// on a passing etcd error is opened again while the member still owns it;
// meanwhile its ids get COORDINATOR_LOAD_IN_PROGRESS, never
// NOT_COORDINATOR (the etcd-leader kills left a partition owned and
// served by no one after a load failed with "leader changed").
func TestOpenRetriedWhileOwned(t *testing.T) {
	e := newEnv(t, "/txncoord/router-open-test", 1)
	const failing = int32(3)
	var attempts atomic.Int32
	release := make(chan struct{})
	fault := func(p int32) error {
		if p != failing {
			return nil
		}
		attempts.Add(1)
		select {
		case <-release:
			return nil
		default:
			return errors.New("etcdserver: leader changed")
		}
	}
	n := e.startNodeWith(0, func(r *Router) { r.openFault = fault })
	waitFor(t, "9 partitions served and the failing one tried twice", func() bool {
		return len(n.router.Serving()) == parts-1 && attempts.Load() >= 2
	})
	var id string
	for i := 0; ; i++ {
		if id = fmt.Sprintf("txn-%d", i); n.router.PartitionFor(id) == failing {
			break
		}
	}
	if _, _, code := initPID(t, n.client, id); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("InitProducerId %s while its partition fails to open: %v, want COORDINATOR_LOAD_IN_PROGRESS", id, kerr.ErrorForCode(code))
	}
	close(release)
	waitFor(t, "the failing partition served", func() bool { return len(n.router.Serving()) == parts })
	if _, _, code := initPID(t, n.client, id); code != 0 {
		t.Fatalf("InitProducerId %s once opened: %v", id, kerr.ErrorForCode(code))
	}
}
