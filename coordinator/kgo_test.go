package coordinator

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// fakeLeader is a tiny partition leader: it accepts Produce and, for a
// transactional batch at Produce v12+ (TV2 implicit add), registers the
// partition with the coordinator through AddPartitionsToTxn v5 like a
// real 4.x leader, retrying CONCURRENT_TRANSACTIONS.
type fakeLeader struct {
	view      *cluster.View
	coordAddr string

	mu      sync.Mutex
	client  *wire.Client
	offsets map[txncore.TopicPartition]int64
	// epochs are the producer epochs of the transactional batches seen.
	epochs   []int16
	versions []int16
}

func (l *fakeLeader) register(reg *wire.Registry) {
	l.view.RegisterMetadata(reg)
	l.view.RegisterFindCoordinator(reg)
	reg.Register(0, 3, 13, l.handleProduce)
}

func (l *fakeLeader) coordinatorClient(ctx context.Context) (*wire.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client == nil {
		cl, err := wire.Dial(ctx, l.coordAddr, "fake-leader")
		if err != nil {
			return nil, err
		}
		l.client = cl
	}
	return l.client, nil
}

func (l *fakeLeader) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		l.client.Close()
	}
}

// addToTxn is the leader's AddPartitionsToTxn v5 call.
func (l *fakeLeader) addToTxn(ctx context.Context, txnID string, pid int64, epoch int16, tp txncore.TopicPartition) int16 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		cl, err := l.coordinatorClient(ctx)
		if err != nil {
			return kerr.CoordinatorNotAvailable.Code
		}
		req := leaderAddRequest(txnID, pid, epoch, tp.Topic, tp.Partition)
		raw, err := cl.Do(ctx, req)
		if err != nil {
			return kerr.CoordinatorNotAvailable.Code
		}
		code := firstV4Error(raw.(*kmsg.AddPartitionsToTxnResponse))
		if code != kerr.ConcurrentTransactions.Code || time.Now().After(deadline) {
			return code
		}
		time.Sleep(5 * time.Millisecond) // Kafka's leader backs off on 51 too
	}
}

func (l *fakeLeader) handleProduce(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ProduceRequest)
	return func() (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			name := rt.Topic
			if req.Version >= 13 {
				t, _ := l.view.TopicByID(rt.TopicID)
				name = t.Name
			}
			out := kmsg.NewProduceResponseTopic()
			out.Topic, out.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition = rp.Partition
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(rp.Records); err != nil {
					p.ErrorCode = kerr.CorruptMessage.Code
					out.Partitions = append(out.Partitions, p)
					continue
				}
				tp := txncore.TopicPartition{Topic: name, Partition: rp.Partition}
				transactional := batch.Attributes&0x10 != 0
				if transactional && req.Version >= 12 && req.TransactionID != nil {
					p.ErrorCode = l.addToTxn(ctx, *req.TransactionID, batch.ProducerID, batch.ProducerEpoch, tp)
				}
				l.mu.Lock()
				if transactional {
					l.epochs = append(l.epochs, batch.ProducerEpoch)
					l.versions = append(l.versions, req.Version)
				}
				if p.ErrorCode == 0 {
					p.BaseOffset = l.offsets[tp]
					l.offsets[tp] += int64(batch.NumRecords)
				}
				l.mu.Unlock()
				out.Partitions = append(out.Partitions, p)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp, nil
	}
}

// recorder wraps coordinator handlers to record the versions clients use.
type recorder struct {
	mu       sync.Mutex
	versions map[int16][]int16
}

func (rec *recorder) wrap(key int16, h wire.Handler) wire.Handler {
	return func(ctx context.Context, r *wire.Request) wire.Reply {
		rec.mu.Lock()
		rec.versions[key] = append(rec.versions[key], r.Version)
		rec.mu.Unlock()
		return h(ctx, r)
	}
}

func (rec *recorder) get(key int16) []int16 {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]int16(nil), rec.versions[key]...)
}

type kgoCluster struct {
	coord   *Coordinator
	markers *fakeMarkers
	leaders []*fakeLeader
	rec     *recorder
	addr    string
}

// startKgoCluster runs a coordinator and two fake leaders on loopback.
func startKgoCluster(t *testing.T) *kgoCluster {
	coordLn, l1, l2 := listenLocal(t), listenLocal(t), listenLocal(t)
	view := testView(coordLn.Addr().String(), l1.Addr().String(), l2.Addr().String())
	c, fm := openTest(t, view, txnlog.NewMemory(), true)
	rec := &recorder{versions: map[int16][]int16{}}
	reg := wire.NewRegistry()
	view.RegisterMetadata(reg)
	view.RegisterFindCoordinator(reg)
	for _, a := range []wire.API[*Coordinator]{initProducerIDAPI, addPartitionsAPI, addOffsetsAPI, endTxnAPI} {
		reg.Register(a.Key, a.Min, a.Max, rec.wrap(a.Key, a.Bind(c)))
	}
	startServer(t, coordLn, reg, view)
	kc := &kgoCluster{coord: c, markers: fm, rec: rec, addr: coordLn.Addr().String()}
	for _, ln := range []net.Listener{l1, l2} {
		fl := &fakeLeader{view: view, coordAddr: kc.addr, offsets: map[txncore.TopicPartition]int64{}}
		lreg := wire.NewRegistry()
		fl.register(lreg)
		startServer(t, ln, lreg, view)
		t.Cleanup(fl.close)
		kc.leaders = append(kc.leaders, fl)
	}
	return kc
}

func (kc *kgoCluster) leaderEpochs() []int16 {
	var out []int16
	for _, l := range kc.leaders {
		l.mu.Lock()
		out = append(out, l.epochs...)
		l.mu.Unlock()
	}
	return out
}

func (kc *kgoCluster) leaderProduceVersions() []int16 {
	var out []int16
	for _, l := range kc.leaders {
		l.mu.Lock()
		out = append(out, l.versions...)
		l.mu.Unlock()
	}
	return out
}

// runTxns runs three transactions (commit, abort, commit) on partitions
// 0 and 1 of "orders" (led by different leaders or not, either is fine).
func runTxns(t *testing.T, cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			rec := &kgo.Record{Topic: "orders", Partition: p, Value: []byte{byte(i)}}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("txn %d produce p%d: %v", i, p, err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("txn %d end: %v", i, err)
		}
	}
}

func newKgo(t *testing.T, addr, txnID string, opts ...kgo.Opt) *kgo.Client {
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A TV2 kgo client: no AddPartitionsToTxn from the client (the leaders add
// the partitions with v5), EndTxn v5, epoch 0 → 1 → 2 → 3, markers at the
// bumped epoch with TV 2.
func TestKgoTV2EpochBumps(t *testing.T) {
	kc := startKgoCluster(t)
	cl := newKgo(t, kc.addr, "tv2-app")
	runTxns(t, cl)

	d := waitState(t, kc.coord, "tv2-app", txnlog.CompleteCommit)
	if d.ProducerEpoch != 3 || d.ClientTransactionVersion != 2 {
		t.Fatalf("after three TV2 transactions: epoch %d tv %d, want 3 and 2", d.ProducerEpoch, d.ClientTransactionVersion)
	}
	pid, epoch, err := cl.ProducerID(context.Background())
	if err != nil || pid != d.ProducerID || epoch != 3 {
		t.Fatalf("kgo adopted (%d, %d, %v) from EndTxn v5, want (%d, 3)", pid, epoch, err, d.ProducerID)
	}
	for _, v := range kc.rec.get(26) {
		if v != 5 {
			t.Fatalf("EndTxn versions %v, want all v5", kc.rec.get(26))
		}
	}
	// Only the leaders' v5 calls: the TV2 client sends no AddPartitionsToTxn.
	if got := kc.rec.get(24); len(got) != 6 {
		t.Fatalf("AddPartitionsToTxn versions %v, want six v5 calls from leaders", got)
	} else {
		for _, v := range got {
			if v != 5 {
				t.Fatalf("AddPartitionsToTxn versions %v, want only leader v5", got)
			}
		}
	}
	wantEpochs := map[int16]int{0: 2, 1: 2, 2: 2} // two partitions per transaction
	for _, e := range kc.leaderEpochs() {
		wantEpochs[e]--
	}
	for _, n := range wantEpochs {
		if n != 0 {
			t.Fatalf("leaders saw batch epochs %v, want two each of 0, 1, 2", kc.leaderEpochs())
		}
	}
	for _, v := range kc.leaderProduceVersions() {
		if v < 12 {
			t.Fatalf("produce versions %v, want >= 12", kc.leaderProduceVersions())
		}
	}
	markers := kc.markers.snapshot()
	if len(markers) != 3 {
		t.Fatalf("%d marker hand-overs, want 3: %+v", len(markers), markers)
	}
	for i, m := range markers {
		wantCommit := i != 1
		if m.ProducerEpoch != int16(i+1) || m.TransactionVersion != 2 || m.Commit != wantCommit || len(m.Partitions) != 2 || m.CoordinatorEpoch != kc.coord.Epoch() {
			t.Fatalf("marker %d: %+v, want epoch %d tv 2 commit %v 2 partitions coordinator epoch %d", i, m, i+1, wantCommit, kc.coord.Epoch())
		}
	}
}

// kgo held at TV1 (3.9 versions): AddPartitionsToTxn v3 from the client,
// Produce v11, EndTxn v4, epoch unchanged, markers with TV 0.
func TestKgoTV1EpochUnchanged(t *testing.T) {
	kc := startKgoCluster(t)
	cl := newKgo(t, kc.addr, "tv1-app", kgo.MaxVersions(kversion.V3_9_0()))
	runTxns(t, cl)

	d := waitState(t, kc.coord, "tv1-app", txnlog.CompleteCommit)
	if d.ProducerEpoch != 0 || d.ClientTransactionVersion != 0 {
		t.Fatalf("after three TV1 transactions: epoch %d tv %d, want 0 and 0", d.ProducerEpoch, d.ClientTransactionVersion)
	}
	for _, v := range kc.rec.get(26) {
		if v != 4 {
			t.Fatalf("EndTxn versions %v, want v4", kc.rec.get(26))
		}
	}
	adds := kc.rec.get(24)
	if len(adds) == 0 {
		t.Fatal("no AddPartitionsToTxn from a TV1 client")
	}
	for _, v := range adds {
		if v != 3 {
			t.Fatalf("AddPartitionsToTxn versions %v, want v3", adds)
		}
	}
	for _, v := range kc.leaderProduceVersions() {
		if v != 11 {
			t.Fatalf("produce versions %v, want 11", kc.leaderProduceVersions())
		}
	}
	for _, e := range kc.leaderEpochs() {
		if e != 0 {
			t.Fatalf("leaders saw epochs %v, want all 0", kc.leaderEpochs())
		}
	}
	markers := kc.markers.snapshot()
	if len(markers) != 3 {
		t.Fatalf("%d marker hand-overs, want 3", len(markers))
	}
	for i, m := range markers {
		if m.ProducerEpoch != 0 || m.TransactionVersion != 0 || m.Commit != (i != 1) {
			t.Fatalf("marker %d: %+v, want epoch 0 tv 0", i, m)
		}
	}
}

// A second client with the same transactional id fences the first: the
// first's EndTxn fails, the second commits.
func TestKgoSecondClientFencesFirst(t *testing.T) {
	kc := startKgoCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := newKgo(t, kc.addr, "shared")
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := newKgo(t, kc.addr, "shared")
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("second client commit: %v", err)
	}
	if err := first.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced first client committed")
	}
	markers := kc.markers.snapshot()
	// The first's transaction was aborted by the fence; then the second commits.
	if len(markers) != 2 || markers[0].Commit || !markers[1].Commit {
		t.Fatalf("markers %+v: want the fence abort, then the second's commit", markers)
	}
}
