package coordclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// routedPartitions is the __transaction_state partition count of these
// tests: partition p starts owned by node p mod 3.
const routedPartitions = 6

// ownerTable stands in for etcd: the owner of each __transaction_state
// partition (-1: none, a takeover under way) and each node's address.
type ownerTable struct {
	mu    sync.Mutex
	owner map[int32]int32
	addrs map[int32]string
	// loading: how many FindCoordinator answers (from any node) are
	// still COORDINATOR_LOAD_IN_PROGRESS for every key.
	loading int
}

func (o *ownerTable) ownerOf(id string) int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owner[cluster.TransactionPartitionFor(id, routedPartitions)]
}

func (o *ownerTable) move(p, node int32) {
	o.mu.Lock()
	o.owner[p] = node
	o.mu.Unlock()
}

// ownerFake is a small coordinator server on real Kafka wire: it answers
// FindCoordinator (key type 1) from the table, AddPartitionsToTxn v4+ for
// the ids of the partitions the table gives it (NOT_COORDINATOR for the
// others, as txnrouter does) and idempotent InitProducerId with ids
// node*1e6+n.
type ownerFake struct {
	node     int32
	table    *ownerTable
	srv      *wire.Server
	stopOnce sync.Once

	mu       sync.Mutex
	received map[int16]int    // requests by API key
	ids      []string         // transactional ids of AddPartitionsToTxn, as received
	errFor   map[string]int16 // id → code for each of its partitions
	topLevel int16            // AddPartitionsToTxn top-level code
	once     int16            // top-level code of the next AddPartitionsToTxn only
	refuse   bool             // InitProducerId answers NOT_COORDINATOR
	findVers []int16          // FindCoordinator versions received
	findHold chan struct{}    // non-nil: FindCoordinator answers once it is closed (a paused node)
	addHold  chan struct{}    // non-nil: AddPartitionsToTxn answers once it is closed (a paused node)
	nextPID  int64
}

func (f *ownerFake) count(key int16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received[key]
}

func (f *ownerFake) receivedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

func (f *ownerFake) set(fn func(f *ownerFake)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func (f *ownerFake) stop() { f.stopOnce.Do(func() { shutdown(f.srv) }) }

func startOwnerFakes(t *testing.T, n int) ([]*ownerFake, *ownerTable) {
	table := &ownerTable{owner: map[int32]int32{}, addrs: map[int32]string{}}
	for p := range int32(routedPartitions) {
		table.owner[p] = p % int32(n)
	}
	fakes := make([]*ownerFake, n)
	for i := range fakes {
		f := &ownerFake{node: int32(i), table: table, received: map[int16]int{}, errFor: map[string]int16{}}
		reg := wire.NewRegistry()
		reg.Register(10, 0, 6, f.handleFind)
		reg.Register(24, 4, 5, f.handleAdd)
		reg.Register(22, 0, 5, f.handleInitPID)
		srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		f.srv = srv
		table.addrs[f.node] = srv.Addr().String()
		t.Cleanup(f.stop)
		fakes[i] = f
	}
	return fakes, table
}

func (f *ownerFake) handleFind(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	f.mu.Lock()
	f.received[10]++
	f.findVers = append(f.findVers, r.Version)
	hold := f.findHold
	f.mu.Unlock()
	if hold != nil {
		answer := f.answerFind(req)
		return func() (kmsg.Response, error) {
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return answer, nil
		}
	}
	return wire.Now(f.answerFind(req))
}

// answerFind answers a FindCoordinator from the owner table.
func (f *ownerFake) answerFind(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	f.table.mu.Lock()
	loading := f.table.loading > 0
	if loading {
		f.table.loading--
	}
	f.table.mu.Unlock()
	for _, key := range req.CoordinatorKeys {
		if loading {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, kerr.CoordinatorLoadInProgress.Code
			resp.Coordinators = append(resp.Coordinators, c)
			continue
		}
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID = key, f.table.ownerOf(key)
		f.table.mu.Lock()
		addr, ok := f.table.addrs[c.NodeID]
		f.table.mu.Unlock()
		if !ok {
			c.NodeID, c.Port, c.ErrorCode = -1, -1, kerr.CoordinatorNotAvailable.Code
		} else {
			host, port, _ := net.SplitHostPort(addr)
			n, _ := strconv.Atoi(port)
			c.Host, c.Port = host, int32(n)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

func (f *ownerFake) handleAdd(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received[24]++
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.ErrorCode = f.topLevel
	if f.once != 0 {
		resp.ErrorCode, f.once = f.once, 0
	}
	for _, t := range req.Transactions {
		f.ids = append(f.ids, t.TransactionalID)
		code := f.errFor[t.TransactionalID]
		if f.table.ownerOf(t.TransactionalID) != f.node {
			code = kerr.NotCoordinator.Code
		}
		resp.Transactions = append(resp.Transactions, failedTransaction(t, code))
	}
	if hold := f.addHold; hold != nil {
		return func() (kmsg.Response, error) {
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return resp, nil
		}
	}
	return wire.Now(resp)
}

func (f *ownerFake) handleInitPID(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received[22]++
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if f.refuse {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.NotCoordinator.Code, -1, -1
		return wire.Now(resp)
	}
	f.nextPID++
	resp.ProducerID = int64(f.node)*1_000_000 + f.nextPID
	return wire.Now(resp)
}

// routedOver is a Routed over Dial clients of fakes, or the clients given
// in instead.
func routedOver(t *testing.T, fakes []*ownerFake, instead ...map[int32]Client) *Routed {
	clients := map[int32]Client{}
	for _, f := range fakes {
		clients[f.node] = Dial(f.srv.Addr().String(), zerolog.Nop())
	}
	for _, m := range instead {
		for node, cl := range m {
			clients[node] = cl
		}
	}
	r := NewRouted(RoutedConfig{Coordinators: clients, Partitions: routedPartitions, Log: zerolog.Nop()})
	t.Cleanup(func() { r.Close() })
	return r
}

// idIn is a transactional id of __transaction_state partition p.
func idIn(p int32, tag string) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", tag, i); cluster.TransactionPartitionFor(id, routedPartitions) == p {
			return id
		}
	}
}

// txnRequest is an AddPartitionsToTxn of one transaction per id, each
// with partitions 0 and 1 of topic "t" and partition 2 of "u".
func txnRequest(ids ...string) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	for i, id := range ids {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = id, int64(100+i), 0
		for _, tp := range []struct {
			topic string
			parts []int32
		}{{"t", []int32{0, 1}}, {"u", []int32{2}}} {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = tp.topic, tp.parts
			tx.Topics = append(tx.Topics, tt)
		}
		req.Transactions = append(req.Transactions, tx)
	}
	return req
}

// answerCodes is each transaction's codes as "id t/0=c t/1=c u/2=c", in
// response order, failing on a top-level code (Routed answers per
// partition).
func answerCodes(t *testing.T, resp *kmsg.AddPartitionsToTxnResponse) []string {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level code %s", codeName(resp.ErrorCode))
	}
	var out []string
	for _, tx := range resp.Transactions {
		s := tx.TransactionalID
		for _, tt := range tx.Topics {
			for _, p := range tt.Partitions {
				s += fmt.Sprintf(" %s/%d=%s", tt.Topic, p.Partition, codeName(p.ErrorCode))
			}
		}
		out = append(out, s)
	}
	return out
}

func want(id string, code int16) string {
	c := codeName(code)
	return fmt.Sprintf("%s t/0=%s t/1=%s u/2=%s", id, c, c, c)
}

func sameStrings(t *testing.T, what string, got, wantList []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(wantList) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, wantList)
	}
}

// One request with ids of every coordinator is split by owner (each
// coordinator gets only its ids, in one request), owners are learned in one
// batched FindCoordinator, and the answers come back in request order with
// each part's codes: a per-partition code stays on its transaction, a
// part's top-level code goes to every partition of that part's
// transactions. A second request needs no FindCoordinator.
func TestRoutedSplitsAndMerges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, _ := startOwnerFakes(t, 3)
	a, b, c, d, e := idIn(0, "a"), idIn(1, "b"), idIn(2, "c"), idIn(3, "d"), idIn(4, "e")
	fakes[1].set(func(f *ownerFake) { f.errFor[b] = kerr.InvalidProducerEpoch.Code })
	fakes[2].set(func(f *ownerFake) { f.topLevel = kerr.ClusterAuthorizationFailed.Code })
	r := routedOver(t, fakes)

	resp, err := r.AddPartitionsToTxn(ctx, txnRequest(a, b, c, d, e))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "answers", answerCodes(t, resp), []string{
		want(a, 0), want(b, kerr.InvalidProducerEpoch.Code), want(c, kerr.ClusterAuthorizationFailed.Code), want(d, 0), want(e, 0),
	})
	for i, wantIDs := range [][]string{{a, d}, {b, e}, {c}} {
		sameStrings(t, fmt.Sprintf("ids received by coordinator %d", i), fakes[i].receivedIDs(), wantIDs)
		if n := fakes[i].count(24); n != 1 {
			t.Fatalf("coordinator %d got %d AddPartitionsToTxn, want 1", i, n)
		}
	}
	finds := func() (n int) {
		for _, f := range fakes {
			n += f.count(10)
		}
		return n
	}
	if n := finds(); n != 1 {
		t.Fatalf("%d FindCoordinator requests, want one batched", n)
	}

	resp, err = r.AddPartitionsToTxn(ctx, txnRequest(e, a))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "second answers", answerCodes(t, resp), []string{want(e, 0), want(a, 0)})
	if n := finds(); n != 1 {
		t.Fatalf("%d FindCoordinator requests after a second request of known owners, want 1", n)
	}
}

// A partition that moves is followed: its old owner answers
// NOT_COORDINATOR (per partition, and in a second case top-level) and the
// request is answered by the new owner, which FindCoordinator names.
func TestRoutedFollowsOwnership(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, table := startOwnerFakes(t, 3)
	x, y := idIn(0, "x"), idIn(1, "y")
	r := routedOver(t, fakes)
	resp, err := r.AddPartitionsToTxn(ctx, txnRequest(x, y))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "before the moves", answerCodes(t, resp), []string{want(x, 0), want(y, 0)})

	table.move(0, 1) // x: per-partition NOT_COORDINATOR from node 0
	table.move(1, 2) // y: node 1 answers NOT_COORDINATOR top-level
	fakes[1].set(func(f *ownerFake) { f.once = kerr.NotCoordinator.Code })
	resp, err = r.AddPartitionsToTxn(ctx, txnRequest(x, y))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "after the moves", answerCodes(t, resp), []string{want(x, 0), want(y, 0)})
	sameStrings(t, "ids received by the old owner of x", fakes[0].receivedIDs(), []string{x, x})
	sameStrings(t, "ids received by the old owner of y (x's new one)", fakes[1].receivedIDs(), []string{y, y, x})
	sameStrings(t, "ids received by the new owner of y", fakes[2].receivedIDs(), []string{y})
}

// A dead coordinator is routed around once FindCoordinator names another
// owner; while FindCoordinator still names the dead one, its transactions
// get COORDINATOR_NOT_AVAILABLE (retriable for the producer) and the
// others are answered as usual. Its failure makes Routed forget every
// partition it owned, not only those of the failed request. (Node 2 is
// reached in-process here, through a counting InProcess client: a stopped
// server refuses its calls as a dead node refuses connections.)
func TestRoutedAroundDeadCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, table := startOwnerFakes(t, 3)
	live, orphan, sibling := idIn(0, "live"), idIn(2, "orphan"), idIn(5, "sibling")
	var mu sync.Mutex
	callsToNode2 := 0 // of any key: after an error the client asks ApiVersions first
	node2 := InProcess(func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		mu.Lock()
		callsToNode2++
		mu.Unlock()
		return fakes[2].srv.Local("").Do(ctx, req)
	})
	calls := func() int { mu.Lock(); defer mu.Unlock(); return callsToNode2 }
	r := routedOver(t, fakes, map[int32]Client{2: node2})
	if _, err := r.AddPartitionsToTxn(ctx, txnRequest(live, orphan, sibling)); err != nil {
		t.Fatal(err)
	}
	fakes[2].stop()

	resp, err := r.AddPartitionsToTxn(ctx, txnRequest(live, orphan))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "owner dead, not yet replaced", answerCodes(t, resp),
		[]string{want(live, 0), want(orphan, kerr.CoordinatorNotAvailable.Code)})

	table.move(2, 0) // the takeover
	table.move(5, 1)
	before := calls()
	resp, err = r.AddPartitionsToTxn(ctx, txnRequest(sibling))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "the dead node's other partition", answerCodes(t, resp), []string{want(sibling, 0)})
	if n := calls() - before; n != 0 {
		t.Fatalf("%d calls to the dead node for a partition it owned before it failed, want 0 (forgotten)", n)
	}
	resp, err = r.AddPartitionsToTxn(ctx, txnRequest(orphan, live))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "after the takeover", answerCodes(t, resp), []string{want(orphan, 0), want(live, 0)})
	got := fakes[0].receivedIDs()
	if got[len(got)-2] != orphan || got[len(got)-1] != live {
		t.Fatalf("the new owner received %q, want the orphan and live ids last, in one request", got)
	}
}

// Idempotent InitProducerId goes to any coordinator: one refusing
// (NOT_COORDINATOR) and one dead are skipped; with none able to serve it,
// the last refusal is the answer.
func TestRoutedInitProducerIDSkipsDeadCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, _ := startOwnerFakes(t, 3)
	fakes[1].set(func(f *ownerFake) { f.refuse = true })
	fakes[2].stop()
	r := routedOver(t, fakes)
	for i := range 6 {
		resp, err := r.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || resp.ProducerID/1_000_000 != 0 {
			t.Fatalf("InitProducerId %d: %s, producer id %d, want one of coordinator 0", i, codeName(resp.ErrorCode), resp.ProducerID)
		}
	}
	if fakes[1].count(22) == 0 {
		t.Fatalf("the refusing coordinator got no InitProducerId: round robin never reached it")
	}

	fakes[0].stop()
	resp, err := r.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("with only a refusing coordinator left: %s, want NOT_COORDINATOR", codeName(resp.ErrorCode))
	}
	fakes[1].stop()
	if _, err := r.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest()); err == nil {
		t.Fatal("every coordinator down: no error")
	}
}

// COORDINATOR_LOAD_IN_PROGRESS is waited out: from FindCoordinator (no
// owner known yet) and from the owner itself (whose partition is still
// loading: asked again, without a new FindCoordinator).
func TestRoutedRetriesWhileLoading(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, table := startOwnerFakes(t, 3)
	z := idIn(1, "z")
	table.loading = 2
	r := routedOver(t, fakes)
	finds := func() (n int) {
		for _, f := range fakes {
			n += f.count(10)
		}
		return n
	}
	resp, err := r.AddPartitionsToTxn(ctx, txnRequest(z))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "after two loading FindCoordinator answers", answerCodes(t, resp), []string{want(z, 0)})
	if n := finds(); n != 3 {
		t.Fatalf("%d FindCoordinator requests, want 3 (two loading, one answered)", n)
	}
	fakes[1].set(func(f *ownerFake) { f.once = kerr.CoordinatorLoadInProgress.Code })
	resp, err = r.AddPartitionsToTxn(ctx, txnRequest(z))
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "after a loading owner", answerCodes(t, resp), []string{want(z, 0)})
	sameStrings(t, "ids received by the owner", fakes[1].receivedIDs(), []string{z, z, z})
	if n := finds(); n != 3 {
		t.Fatalf("%d FindCoordinator requests after a loading owner, want still 3", n)
	}
}

// With one coordinator Routed is that coordinator's client: its answer
// passes through unchanged (here NOT_COORDINATOR, top-level included),
// with no FindCoordinator and no retry; Local is the client's.
func TestRoutedOneCoordinatorIsItsClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, table := startOwnerFakes(t, 1)
	x := idIn(3, "x")
	table.move(3, 7) // a node nobody knows: the fake answers NOT_COORDINATOR
	fakes[0].set(func(f *ownerFake) { f.topLevel = kerr.NotCoordinator.Code })
	r := routedOver(t, fakes)
	resp, err := r.AddPartitionsToTxn(ctx, txnRequest(x))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.NotCoordinator.Code || len(resp.Transactions) != 1 {
		t.Fatalf("answer %+v, want the coordinator's own (top-level NOT_COORDINATOR)", resp)
	}
	if n, finds := fakes[0].count(24), fakes[0].count(10); n != 1 || finds != 0 {
		t.Fatalf("%d AddPartitionsToTxn and %d FindCoordinator, want 1 and 0", n, finds)
	}
	if r.Local() {
		t.Fatal("over a dialed client: Local")
	}
	local := NewRouted(RoutedConfig{Coordinators: map[int32]Client{0: InProcess(fakes[0].srv.Local("").Do)}})
	if !local.Local() {
		t.Fatal("over an in-process client: not Local")
	}
}

// Requests racing ownership moves: every answer keeps request order, and
// each transaction is answered NONE or with a retriable code; once the
// moves stop, everything is answered NONE.
func TestRoutedConcurrentMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fakes, table := startOwnerFakes(t, 3)
	r := routedOver(t, fakes)
	var ids []string
	for p := range int32(routedPartitions) {
		ids = append(ids, idIn(p, "c"))
	}
	stop := make(chan struct{})
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			table.move(int32(rng.IntN(routedPartitions)), int32(rng.IntN(3)))
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 20 {
				picked := []string{ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]}
				resp, err := r.AddPartitionsToTxn(ctx, txnRequest(picked...))
				if err != nil {
					errs <- err
					return
				}
				if len(resp.Transactions) != len(picked) {
					errs <- fmt.Errorf("%d answers for %d transactions", len(resp.Transactions), len(picked))
					return
				}
				for i, tx := range resp.Transactions {
					if tx.TransactionalID != picked[i] {
						errs <- fmt.Errorf("answer %d is %q, want %q", i, tx.TransactionalID, picked[i])
						return
					}
					for _, tt := range tx.Topics {
						for _, p := range tt.Partitions {
							if again, _ := retriable(p.ErrorCode); p.ErrorCode != 0 && !again {
								errs <- fmt.Errorf("%s: %s", tx.TransactionalID, codeName(p.ErrorCode))
								return
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-moved
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	resp, err := r.AddPartitionsToTxn(ctx, txnRequest(ids...))
	if err != nil {
		t.Fatal(err)
	}
	var wantAll []string
	for _, id := range ids {
		wantAll = append(wantAll, want(id, 0))
	}
	sameStrings(t, "after the moves", answerCodes(t, resp), wantAll)
}

// A leader's FindCoordinator for transactional ids is forwarded and
// answered at the request's version: v3 (one key) and v4 (batched, in key
// order) name each id's owner with its address; group keys are the view's
// answer; with no coordinator reachable every key is
// COORDINATOR_NOT_AVAILABLE.
func TestLeaderForwardsFindCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fakes, table := startOwnerFakes(t, 3)
	r := routedOver(t, fakes)
	view := cluster.NewView(&cluster.File{
		ClusterID:         "txncoord-test",
		Coordinator:       &cluster.Node{NodeID: 0, Addr: "127.0.0.1:9", KafkaVersion: "4.2"},
		Leaders:           []cluster.Node{{NodeID: 3, Addr: "127.0.0.1:1", KafkaVersion: "4.2"}},
		DefaultPartitions: 1,
		Topics:            map[string]int32{"t": 1},
	})
	reg := wire.NewRegistry()
	r.RegisterFindCoordinator(reg, view)
	srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(srv) })
	cl, err := wire.Dial(ctx, srv.Addr().String(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	find := func(version int16, keyType int8, keys ...string) *kmsg.FindCoordinatorResponse {
		t.Helper()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(version)
		req.CoordinatorType = keyType
		if version >= 4 {
			req.CoordinatorKeys = keys
		} else {
			req.CoordinatorKey = keys[0]
		}
		resp, err := cl.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FindCoordinatorResponse)
	}
	at := func(node int32) string { return table.addrs[node] }
	hostPort := func(host string, port int32) string { return net.JoinHostPort(host, strconv.Itoa(int(port))) }

	one := find(3, 1, idIn(1, "v3"))
	if one.ErrorCode != 0 || one.NodeID != 1 || hostPort(one.Host, one.Port) != at(1) {
		t.Fatalf("v3: %s node %d at %s, want node 1 at %s", codeName(one.ErrorCode), one.NodeID, hostPort(one.Host, one.Port), at(1))
	}
	keys := []string{idIn(2, "v4"), idIn(0, "v4"), idIn(4, "v4")}
	batch := find(4, 1, keys...)
	if len(batch.Coordinators) != len(keys) {
		t.Fatalf("v4: %d coordinators for %d keys", len(batch.Coordinators), len(keys))
	}
	for i, node := range []int32{2, 0, 1} {
		c := batch.Coordinators[i]
		if c.Key != keys[i] || c.ErrorCode != 0 || c.NodeID != node || hostPort(c.Host, c.Port) != at(node) {
			t.Fatalf("v4 key %d: %q %s node %d at %s, want %q node %d at %s",
				i, c.Key, codeName(c.ErrorCode), c.NodeID, hostPort(c.Host, c.Port), keys[i], node, at(node))
		}
	}
	// Group keys are forwarded too (the group coordinator moves with its
	// lease): the fakes answer them as they answer any key.
	// (A key the fakes place on node 2, where the view would say 0.)
	group := find(3, 0, idIn(2, "group"))
	if group.ErrorCode != 0 || group.NodeID != 2 || hostPort(group.Host, group.Port) != at(2) {
		t.Fatalf("group key: %s node %d at %s, want the coordinators' answer, node 2", codeName(group.ErrorCode), group.NodeID, hostPort(group.Host, group.Port))
	}
	for _, fk := range fakes {
		fk.mu.Lock()
		for _, v := range fk.findVers {
			if v < 4 {
				t.Errorf("coordinator %d got FindCoordinator v%d, want the batched form", fk.node, v)
			}
		}
		fk.mu.Unlock()
	}

	for _, fk := range fakes {
		fk.stop()
	}
	if one := find(3, 1, "x"); one.ErrorCode != kerr.CoordinatorNotAvailable.Code || one.NodeID != -1 {
		t.Fatalf("v3, no coordinator: %s node %d, want COORDINATOR_NOT_AVAILABLE", codeName(one.ErrorCode), one.NodeID)
	}
	batch = find(5, 1, "x", "y")
	if len(batch.Coordinators) != 2 {
		t.Fatalf("v5, no coordinator: %d answers for 2 keys", len(batch.Coordinators))
	}
	for _, c := range batch.Coordinators {
		if c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("v5, no coordinator: key %q %s, want COORDINATOR_NOT_AVAILABLE", c.Key, codeName(c.ErrorCode))
		}
	}
}

// A coordinator that does not answer FindCoordinator (paused: its
// connections stay open) costs FindCoordinator routedFindHedge before the next one is
// asked as well, not routedFindTimeout: with two of three paused, each of
// three FindCoordinators (the round robin starts each at another node) answers the
// live node's owner in under routedFindTimeout, and at least one waited
// for a hedge.
func TestRoutedFindHedgesAPausedCoordinator(t *testing.T) {
	fakes, _ := startOwnerFakes(t, 3)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	for _, f := range fakes[:2] {
		f.set(func(f *ownerFake) { f.findHold = hold })
	}
	r := routedOver(t, fakes)
	id := idIn(4, "hedged")
	hedged := false
	for i := range 3 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
		start := time.Now()
		resp, err := r.FindCoordinator(t.Context(), req)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Find %d: %v", i, err)
		}
		if c := resp.Coordinators; len(c) != 1 || c[0].ErrorCode != 0 || c[0].NodeID != 1 {
			t.Fatalf("Find %d: %+v, want the table's owner, node 1", i, c)
		}
		if took >= routedFindTimeout {
			t.Fatalf("Find %d took %v: it waited out a paused coordinator (routedFindTimeout %v)", i, took, routedFindTimeout)
		}
		hedged = hedged || took >= routedFindHedge
	}
	if !hedged {
		t.Fatal("no Find waited for a hedge: none started at a paused coordinator")
	}
}

// A leader process follows which coordinator coordinates the groups of
// each __consumer_offsets partition (FollowGroupCoordinator: one
// FindCoordinator for groups every interval, a key hashed to each
// partition): it names the node the coordinators answer for each
// partition, follows a move, and stops at Close.
func TestRoutedFollowsGroupCoordinator(t *testing.T) {
	fakes, table := startOwnerFakes(t, 3)
	r := routedOver(t, fakes)
	const offsetsPartitions = 5
	if _, ok := r.GroupCoordinatorOf(0); ok {
		t.Fatal("a group coordinator known before any FindCoordinator for groups")
	}
	probes := probeKeys(offsetsPartitions)
	if len(probes) != offsetsPartitions {
		t.Fatalf("%d probe keys for %d partitions", len(probes), offsetsPartitions)
	}
	r.FollowGroupCoordinator(10*time.Millisecond, offsetsPartitions)
	// The fakes answer every key by its __transaction_state partition's
	// owner in table.
	waitGroups := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			wrong := 0
			for k, p := range probes {
				if got, ok := r.GroupCoordinatorOf(p); !ok || got != table.ownerOf(k) {
					wrong++
				}
			}
			if wrong == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d partitions name another coordinator than the coordinators answer", wrong, offsetsPartitions)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitGroups()
	var moved string
	for k := range probes {
		moved = k
		break
	}
	next := (table.ownerOf(moved) + 1) % 3
	table.move(cluster.TransactionPartitionFor(moved, routedPartitions), next)
	waitGroups()
	if got, _ := r.GroupCoordinatorOf(probes[moved]); got != next {
		t.Fatalf("partition %d: coordinator %d after the move, want %d", probes[moved], got, next)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	before := fakes[0].count(10) + fakes[1].count(10) + fakes[2].count(10)
	time.Sleep(100 * time.Millisecond)
	if after := fakes[0].count(10) + fakes[1].count(10) + fakes[2].count(10); after != before {
		t.Fatalf("%d FindCoordinator requests after Close", after-before)
	}
}
