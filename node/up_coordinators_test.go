package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/internal/etcdtest"
)

// startSeveralCoordinators starts `txncoord up` with three coordinators on
// a real etcd (one member, etcdtest) and two leaders, with a short lease.
func startSeveralCoordinators(t *testing.T) *Embedded {
	t.Helper()
	return startSeveralCoordinatorsIn(t, t.TempDir())
}

// startSeveralCoordinatorsIn is startSeveralCoordinators on data dir dir.
func startSeveralCoordinatorsIn(t *testing.T, dir string) *Embedded {
	t.Helper()
	f, listeners := severalCoordinatorsFile(t)
	return startEmbeddedFile(t, dir, f, listeners)
}

// severalCoordinatorsFile is a cluster file of three coordinators (nodes
// 0-2) on a fresh etcd and two leaders (3, 4), with their listeners on
// free loopback ports.
func severalCoordinatorsFile(t *testing.T) (*cluster.File, map[int32]net.Listener) {
	t.Helper()
	etcd := etcdtest.Start(t, 1)
	listeners := map[int32]net.Listener{}
	f := &cluster.File{
		ClusterID:                  "several-test",
		DefaultPartitions:          2,
		Topics:                     map[string]int32{"orders": 4},
		TransactionStatePartitions: 12,
		Etcd:                       &cluster.Etcd{Endpoints: etcd.Endpoints()},
		// Tests' classic groups rebalance at once.
		GroupInitialRebalanceDelayMs: new(int32(0)),
	}
	for id := range int32(5) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id] = ln
		n := cluster.Node{NodeID: id, Addr: ln.Addr().String(), KafkaVersion: "4.2"}
		if id < 3 {
			f.Coordinators = append(f.Coordinators, n)
		} else {
			f.Leaders = append(f.Leaders, n)
		}
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f, listeners
}

// TestEmbeddedSeveralCoordinators: kgo producers whose ids spread over
// three coordinators commit through the owners (FindCoordinator, leaders'
// registrations routed to each id's owner), every coordinator serves some
// of them, and the committed records are all readable. Then coordinator 1
// stops: its partitions move to the others and the producers go on.
func TestEmbeddedSeveralCoordinators(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	ids := make([]string, 9)
	for i := range ids {
		ids[i] = fmt.Sprintf("several-%d", i)
	}
	commitAll(t, e.Bootstrap(), ids, 3, 0)
	served := map[int32]int{}
	for _, co := range e.Coordinators {
		for p := range co.Router.Serving() {
			c, _ := co.Router.Coordinator(p)
			served[co.Node.NodeID] += len(c.List(coordinatorListAll))
		}
	}
	for _, co := range e.Coordinators {
		if served[co.Node.NodeID] == 0 {
			t.Errorf("coordinator %d holds none of the transactions (%v): ids were not spread", co.Node.NodeID, served)
		}
	}
	// Each node's metrics sum its partitions' coordinators.
	endTxns := map[string]float64{}
	mfs, err := e.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "txncoord_coordinator_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == "EndTxn" {
				endTxns[labels["node"]] += m.GetCounter().GetValue()
			}
		}
	}
	if total := endTxns["0"] + endTxns["1"] + endTxns["2"]; total < float64(len(ids)*3) || endTxns["0"] == 0 || endTxns["1"] == 0 || endTxns["2"] == 0 {
		t.Fatalf("EndTxn requests by node %v, want at least %d in all (retries count too), spread over the three", endTxns, len(ids)*3)
	}
	// The listeners' per-API series count the same requests, and
	// their latency.
	if n := gatherSum(t, e, "txncoord_requests_total", map[string]string{"api": "EndTxn"}); n < float64(len(ids)*3) {
		t.Errorf("txncoord_requests_total{api=EndTxn} %v, want at least %d", n, len(ids)*3)
	}
	if n := gatherSum(t, e, "txncoord_request_duration_seconds", map[string]string{"api": "Produce", "node": "3"}); n == 0 {
		t.Error("no Produce latency sample at leader 3")
	}
	for _, leader := range []string{"3", "4"} {
		if n := gatherSum(t, e, "txncoord_leader_commits_total", map[string]string{"leader": leader}); n == 0 {
			t.Errorf("txncoord_leader_commits_total{leader=%s} is 0 under up after its produces", leader)
		}
	}
	moved := len(e.Coordinators[1].Router.Serving())
	takeovers := func() float64 {
		return gatherSum(t, e, "txncoord_coordinator_partition_ownership_total", map[string]string{"event": "takeover"})
	}
	// Balancing at start moves partitions too: count from here.
	before := takeovers()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := e.Coordinators[1].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e.Coordinators = append(e.Coordinators[:1], e.Coordinators[2:]...)
	waitOwned(t, e, 12)
	if n := takeovers() - before; n < float64(moved) {
		t.Errorf("%v takeovers counted, want at least the %d partitions coordinator 1 held", n, moved)
	}
	commitAll(t, e.Bootstrap(), ids, 2, 3)
	readCommitted(t, e.Bootstrap(), len(ids)*5*4)
}

// waitOwned waits until the running coordinators serve n partitions in all.
func waitOwned(t *testing.T, e *Embedded, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		total := 0
		for _, co := range e.Coordinators {
			total += len(co.Router.Serving())
		}
		if total == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinators serve %d of %d partitions", total, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// commitAll runs txns transactions per id concurrently, each writing one
// record to every partition of orders, numbered from first.
func commitAll(t *testing.T, bootstrap string, ids []string, txns, first int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for _, id := range ids {
		wg.Go(func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for i := first; i < first+txns; i++ {
				if err := cl.BeginTransaction(); err != nil {
					errs <- err
					return
				}
				for p := range int32(4) {
					rec := &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", id, i, p)}
					if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
						errs <- fmt.Errorf("%s txn %d: %w", id, i, err)
						return
					}
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					errs <- fmt.Errorf("%s commit %d: %w", id, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// readCommitted reads want records of orders read_committed, and fails on
// more or on a duplicate.
func readCommitted(t *testing.T, bootstrap string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets := map[int32]kgo.Offset{}
	for p := range int32(4) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	seen := map[string]bool{}
	for len(seen) < want {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records", len(seen), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("duplicate %s", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
}

var coordinatorListAll = coordinator.ListFilter{}

// TestSeveralCoordinatorsAdmin: node 0's admin API answers for the whole
// cluster: GET /v1/transactions lists the open transactions of ids owned
// by every node, each with the timeline its owner recorded,
// /v1/coordinators shows the three with all partitions,
// and an abort of an id another node owns is forwarded to it, in-process
// and through that node's admin API (published in etcd).
func TestSeveralCoordinatorsAdmin(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Open transactions, one per id, left Ongoing.
	owners := map[int32][]string{}
	for i := 0; len(owners[1]) < 2 || len(owners[2]) < 1 || len(owners[0]) < 1; i++ {
		id := fmt.Sprintf("admin-%d", i)
		node, _, ok := e.Coordinator.Member.Owner(cluster.TransactionPartitionFor(id, 12))
		if !ok {
			t.Fatalf("no owner of %s", id)
		}
		owners[node] = append(owners[node], id)
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(id)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	backend := e.Coordinator.AdminBackend()
	ongoing := map[string]int32{}
	for _, txn := range backend.Transactions(admin.ListFilter{State: "Ongoing"}) {
		ongoing[txn.TransactionalID] = txn.CoordinatorID
	}
	for node, ids := range owners {
		for _, id := range ids {
			if got, ok := ongoing[id]; !ok || got != node {
				t.Fatalf("%s (owned by node %d) listed as %v, %v; list %v", id, node, got, ok, ongoing)
			}
		}
	}
	// Each transaction's timeline comes from the process's coordinator
	// that owns it, whichever node's admin API is asked.
	for node, ids := range owners {
		for _, id := range ids {
			txn, err := backend.Transaction(id)
			if err != nil {
				t.Fatal(err)
			}
			var steps []string
			for _, ev := range txn.Timeline {
				steps = append(steps, ev.Event)
			}
			if fmt.Sprint(steps) != "[InitProducerId PartitionAdded]" {
				t.Fatalf("%s (owned by node %d): timeline %v, want InitProducerId then its partition", id, node, steps)
			}
		}
	}
	cs, err := backend.(admin.CoordinatorsBackend).Coordinators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, c := range cs {
		if !c.Live {
			t.Fatalf("coordinator %d not live: %+v", c.NodeID, cs)
		}
		parts += len(c.Partitions)
	}
	if len(cs) != 3 || parts != 12 || !cs[0].Self || cs[0].Serving != len(cs[0].Partitions) {
		t.Fatalf("coordinators %+v", cs)
	}

	abort := func(id string) {
		t.Helper()
		txn, err := backend.Abort(ctx, id, false)
		if err != nil {
			t.Fatalf("abort %s: %v", id, err)
		}
		if txn.State != "PrepareAbort" && txn.State != "CompleteAbort" {
			t.Fatalf("abort %s: state %s", id, txn.State)
		}
	}
	abort(owners[2][0]) // in-process peer
	// Through node 1's admin API: node 0 does not see it in-process.
	adm, err := admin.Start("127.0.0.1:0", e.Coordinators[1].AdminBackend(), nil, admin.Auth{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Shutdown(context.Background())
	if err := e.Coordinators[1].PublishAdminURL(ctx, adm.URL()); err != nil {
		t.Fatal(err)
	}
	e.Coordinator.peers = nil
	abort(owners[1][0])
	if _, err := backend.Abort(ctx, "admin-never-used", false); !errors.Is(err, kerr.TransactionalIDNotFound) && !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("abort of an unknown id: %v", err)
	}
}

// A single coordinator's data dir taken into the etcd mode: producer ids
// from etcd continue above the single coordinator's high-water mark, so no
// id it handed out (a leader may hold its producer state) is handed out
// again.
func TestSingleCoordinatorDataDirIntoEtcdKeepsProducerIDs(t *testing.T) {
	dir := t.TempDir()
	f, lns := twoLeaderFile(t)
	single, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, MarkerVersionDiscovery: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	initPID := func(bootstrap, id string) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = kmsg.StringPtr(id), 60000, -1, -1
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && resp.ErrorCode == 0 {
				return resp.ProducerID
			}
			if ctx.Err() != nil {
				t.Fatalf("InitProducerId %s: %v %v", id, err, resp)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var singleMax int64
	for i := range 5 {
		singleMax = max(singleMax, initPID(single.Bootstrap(), fmt.Sprintf("single-%d", i)))
	}
	stopWithin(t, single.Stop)

	e := startSeveralCoordinatorsIn(t, dir)
	waitOwned(t, e, 12)
	for i := range 9 {
		id := fmt.Sprintf("on-etcd-%d", i)
		if pid := initPID(e.Bootstrap(), id); pid <= singleMax {
			t.Fatalf("%s got producer id %d on etcd, not above the single coordinator's %d", id, pid, singleMax)
		}
	}
}

// gatherSum sums the series of metric name in e's registry whose labels
// include want.
func gatherSum(t *testing.T, e *Embedded, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := e.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
