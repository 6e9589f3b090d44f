package integration

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
)

// What the scale-out tests observe of the cluster: commits as a
// read_committed reader sees them (commitWatch), unfinished transactions
// (GET /v1/transactions), metrics, readiness, and one-off requests.

// nonTerminal lists the transactions of the cluster (GET /v1/transactions
// of node via) that are not finished: Ongoing, Prepare*.
func (sc *scaleCluster) nonTerminal(ctx context.Context, via int32) ([]admin.Txn, error) {
	var txns []admin.Txn
	if err := sc.getJSON(ctx, via, "/v1/transactions", &txns); err != nil {
		return nil, err
	}
	var open []admin.Txn
	for _, x := range txns {
		switch x.State {
		case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
			open = append(open, x)
		}
	}
	return open, nil
}

// waitAllComplete waits until node via lists no unfinished transaction
// (each workload aborted or committed its last one when it stopped; a
// client that gave up leaves its transaction to the timeout, at most
// txnTimeout) and fails the test otherwise, naming them. It returns how
// many transactions the cluster lists.
func (sc *scaleCluster) waitAllComplete(ctx context.Context, via int32, txnTimeout time.Duration) int {
	sc.t.Helper()
	deadline := time.Now().Add(txnTimeout + 15*time.Second)
	for {
		open, err := sc.nonTerminal(ctx, via)
		if err == nil && len(open) == 0 {
			var all []admin.Txn
			if err := sc.getJSON(ctx, via, "/v1/transactions", &all); err != nil {
				sc.t.Fatal(err)
			}
			return len(all)
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, x := range open {
				desc = append(desc, fmt.Sprintf("%s: %s since %d (coordinator %d, stuck %q)", x.TransactionalID, x.State, x.LastUpdateTimeMs, x.CoordinatorID, x.StuckReason))
			}
			sc.t.Fatalf("transactions never finished (GET /v1/transactions of coordinator %d, err %v): %s", via, err, strings.Join(desc, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopAndFinish stops the producers (each aborts or commits its last
// transaction), waits until the cluster lists no transaction Ongoing or
// Prepare* (failing fast, naming them, when one hangs: the final read
// would only time out on its open transaction), then reads everything
// back and fails on any anomaly (crashRun.stopAndCheck).
func (r *crashRun) stopAndFinish(t testing.TB, sc *scaleCluster, after string) {
	t.Helper()
	r.cancel()
	r.wg.Wait()
	n := sc.waitAllComplete(testCtx(t, time.Minute), sc.anyLive(), 20*time.Second)
	t.Logf("%d transactional ids, none Ongoing or Prepare*", n)
	r.stopAndCheck(t, after)
}

// metric is the sum of a Prometheus counter's samples in node id's
// /metrics whose line starts with prefix (name and labels).
func (sc *scaleCluster) metric(ctx context.Context, id int32, prefix string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, status, err := sc.get(ctx, id, "/metrics")
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("/metrics of coordinator %d: HTTP %d", id, status)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
			sum += v
		}
	}
	return sum, nil
}

// commitWatch reads a topic read_committed from its end offsets at the
// time it starts, and notes when the first record of each producer was
// read: a transaction that producer began after the start committed by
// then (its records come after the start offsets; the marker that made
// them visible was written after the start).
type commitWatch struct {
	t      testing.TB
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen map[string]time.Time // producer id → first record read
}

// watchCommits starts a commitWatch of topic (workload values are
// "<transactional id>-<n>"); it stops at the end of the test.
func (sc *scaleCluster) watchCommits(ctx context.Context, adm *kadm.Client, topic string) *commitWatch {
	sc.t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		sc.t.Fatalf("commit watch: list end offsets: %v", err)
	}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			sc.t.Fatalf("commit watch: end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		from[o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		sc.t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	w := &commitWatch{t: sc.t, cl: cl, cancel: cancel, done: make(chan struct{}), seen: map[string]time.Time{}}
	go w.run(runCtx)
	sc.t.Cleanup(w.stop)
	return w
}

func (w *commitWatch) run(ctx context.Context) {
	defer close(w.done)
	defer w.cl.Close()
	for ctx.Err() == nil {
		fs := w.cl.PollFetches(ctx)
		now := time.Now()
		w.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			id := v[:max(0, strings.LastIndexByte(v, '-'))]
			if _, ok := w.seen[id]; !ok {
				w.seen[id] = now
			}
		})
		w.mu.Unlock()
	}
}

func (w *commitWatch) stop() {
	w.cancel()
	<-w.done
}

// waitFor waits until each of ids committed a new transaction and returns
// when each did, failing the test if ctx ends first.
func (w *commitWatch) waitFor(ctx context.Context, ids ...string) map[string]time.Time {
	w.t.Helper()
	for {
		got := map[string]time.Time{}
		w.mu.Lock()
		for _, id := range ids {
			if at, ok := w.seen[id]; ok {
				got[id] = at
			}
		}
		w.mu.Unlock()
		if len(got) == len(ids) {
			return got
		}
		select {
		case <-ctx.Done():
			w.t.Fatalf("commit watch: only %v of %v committed a new transaction", got, ids)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// latest is the latest of times, as a duration since from.
func latest(times map[string]time.Time, from time.Time) time.Duration {
	var d time.Duration
	for _, at := range times {
		d = max(d, at.Sub(from))
	}
	return d.Round(time.Millisecond)
}

// since formats each time as a duration since from, by id.
func since(times map[string]time.Time, from time.Time) string {
	ids := make([]string, 0, len(times))
	for id := range times {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s +%v", id, times[id].Sub(from).Round(time.Millisecond))
	}
	return b.String()
}

// ready is GET /readyz of coordinator id: whether it answered 200, and
// otherwise its answer (or the error).
func (sc *scaleCluster) ready(ctx context.Context, id int32) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, status, err := sc.get(ctx, id, "/readyz")
	if err != nil {
		return err.Error(), false
	}
	return fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(body)), status == http.StatusOK
}

// requestAt sends req straight to node, with no retries (a new kgo client
// that first learns the brokers from Metadata), within 30 s.
func (sc *scaleCluster) requestAt(ctx context.Context, node int32, req kmsg.Request) kmsg.Response {
	sc.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
	if err != nil {
		sc.t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		sc.t.Fatalf("metadata: %v", err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cl.Broker(int(node)).Request(reqCtx, req)
	if err != nil {
		sc.t.Fatalf("%s at node %d: %v", kmsg.NameForKey(req.Key()), node, err)
	}
	return resp
}

// initProducerIDAt sends one InitProducerId for txnID straight to
// coordinator node, with no retries, and returns its error code.
func (sc *scaleCluster) initProducerIDAt(ctx context.Context, node int32, txnID string) int16 {
	sc.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(txnID)
	req.TransactionTimeoutMillis = 30000
	return sc.requestAt(ctx, node, req).(*kmsg.InitProducerIDResponse).ErrorCode
}

// tryCommit runs one transaction of txnID (one record to partition 0 of
// topic) with a new kgo client, within d.
func (sc *scaleCluster) tryCommit(ctx context.Context, txnID, topic string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second),
		// Records that cannot be delivered fail within d, so Close
		// does not wait for them.
		kgo.RecordDeliveryTimeout(d))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(txnID + "-probe")}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// offsetsLeaderAt is the leader of __consumer_offsets partition 0 in the
// Metadata node answers (-1 when it names none).
func (sc *scaleCluster) offsetsLeaderAt(ctx context.Context, node int32) int32 {
	sc.t.Helper()
	if l, ok := sc.offsetsLeadersAt(ctx, node)[0]; ok {
		return l
	}
	return -1
}

// groupCoordinatorAt is the leader node's Metadata names for group's
// __consumer_offsets partition: the group's coordinator (-1 when it
// names none).
func (sc *scaleCluster) groupCoordinatorAt(ctx context.Context, node int32, group string) int32 {
	sc.t.Helper()
	leaders := sc.offsetsLeadersAt(ctx, node)
	if l, ok := leaders[cluster.OffsetsPartitionFor(group, int32(len(leaders)))]; ok {
		return l
	}
	return -1
}

// offsetsLeadersAt is the leader of each __consumer_offsets partition in
// node's Metadata; a partition it does not list is missing.
func (sc *scaleCluster) offsetsLeadersAt(ctx context.Context, node int32) map[int32]int32 {
	sc.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("__consumer_offsets")
	req.Topics = append(req.Topics, rt)
	out := map[int32]int32{}
	for _, t := range sc.requestAt(ctx, node, req).(*kmsg.MetadataResponse).Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.Leader
		}
	}
	return out
}
