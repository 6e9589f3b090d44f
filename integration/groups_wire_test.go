package integration

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
)

// The group coordinator's transactional offsets over the wire, with raw
// requests (kmsg through a kgo client, which routes each to the right
// coordinator): TxnOffsetCommit v5 (TV2), OffsetFetch RequireStable,
// EndTxn, WriteTxnMarkers sent by hand to the coordinator node as a late
// marker, DescribeProducers on a __consumer_offsets partition.

const wireTopic = "in"

// wireTxn is one transactional id driven by raw requests.
type wireTxn struct {
	t     *testing.T
	cl    *kgo.Client
	id    string
	group string
	pid   int64
	epoch int16
}

func newWireTxn(ctx context.Context, t *testing.T, cl *kgo.Client, id, group string) *wireTxn {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	return &wireTxn{t: t, cl: cl, id: id, group: group, pid: resp.ProducerID, epoch: resp.ProducerEpoch}
}

// commitOffsets sends TxnOffsetCommit (the client's highest version: v5,
// TV2, whose partition the group coordinator adds to the transaction
// itself) for partition → offset of wireTopic.
func (w *wireTxn) commitOffsets(ctx context.Context, offsets map[int32]int64) {
	w.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = w.id, w.group, w.pid, w.epoch
	req.Generation, req.MemberID = -1, ""
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = wireTopic
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, w.cl)
	if err != nil {
		w.t.Fatalf("TxnOffsetCommit: %v", err)
	}
	if resp.Version < 5 {
		w.t.Fatalf("TxnOffsetCommit answered at v%d, the test needs v5 (TV2)", resp.Version)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				w.t.Fatalf("TxnOffsetCommit %s-%d: %v", t.Topic, p.Partition, err)
			}
		}
	}
}

// end sends EndTxn (v5: TV2, the coordinator bumps the epoch and answers
// it) and keeps the new epoch, which is also the markers' epoch.
func (w *wireTxn) end(ctx context.Context, commit bool) {
	w.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = w.id, w.pid, w.epoch, commit
	resp, err := req.RequestWith(ctx, w.cl)
	if err != nil {
		w.t.Fatalf("EndTxn: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		w.t.Fatalf("EndTxn(commit=%v): %v", commit, err)
	}
	if resp.Version < 5 || resp.ProducerEpoch <= w.epoch {
		w.t.Fatalf("EndTxn v%d answered epoch %d after %d: not TV2", resp.Version, resp.ProducerEpoch, w.epoch)
	}
	w.pid, w.epoch = resp.ProducerID, resp.ProducerEpoch
}

// fetched is one partition of an OffsetFetch answer.
type fetched struct {
	offset int64
	code   int16
}

// offsetsProducer describes the producer pid on the __consumer_offsets
// partition of group (DescribeProducers, routed by kadm to the partition's
// leader: the coordinator node).
func offsetsProducer(ctx context.Context, t *testing.T, cl *kgo.Client, partition int32, pid int64) (kadm.DescribedProducer, bool) {
	t.Helper()
	d, err := kadm.NewClient(cl).DescribeProducers(ctx, kadm.TopicsSet{cluster.OffsetsTopic: {partition: {}}})
	if err != nil {
		t.Fatalf("DescribeProducers: %v", err)
	}
	var out kadm.DescribedProducer
	found := false
	d.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Fatalf("DescribeProducers %s-%d: %v", p.Topic, p.Partition, p.Err)
		}
		if p.Leader != 0 {
			t.Errorf("DescribeProducers %s-%d answered by node %d, want the coordinator node 0", p.Topic, p.Partition, p.Leader)
		}
		if dp, ok := p.ActiveProducers[pid]; ok {
			out, found = dp, true
		}
	})
	return out, found
}

// sendMarker sends one WriteTxnMarkers to the coordinator node (node 0)
// for the __consumer_offsets partition, through cl (whose max versions pin
// the request's version), and returns the partition's code and the
// version it went at.
func sendMarker(ctx context.Context, t *testing.T, cl *kgo.Client, partition int32, pid int64, epoch int16, coordEpoch int32, tv int8, commit bool) (int16, int16) {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, m.TransactionVersion = pid, epoch, coordEpoch, commit, tv
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = cluster.OffsetsTopic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatalf("WriteTxnMarkers: %v", err)
	}
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		t.Fatalf("WriteTxnMarkers: answer %+v", resp)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode, resp.Version
}

// counterValue sums the series of a counter or gauge whose labels include
// want.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m.GetLabel(), want) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if gg := m.GetGauge(); gg != nil {
				sum += gg.GetValue()
			}
		}
	}
	return sum
}

// groupMarkers is txncoord_group_markers_total for a transport, result
// and version ("" matches any).
func groupMarkers(t *testing.T, c *Cluster, transport, result, version string) float64 {
	t.Helper()
	want := map[string]string{"transport": transport}
	if result != "" {
		want["result"] = result
	}
	if version != "" {
		want["version"] = version
	}
	return counterValue(t, c.Metrics, "txncoord_group_markers_total", want)
}

func labelsMatch(have []*dto.LabelPair, want map[string]string) bool {
	for k, v := range want {
		ok := false
		for _, l := range have {
			if l.GetName() == k && l.GetValue() == v {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestGroupsWireTransactionalOffsets: pending transactional offsets are
// invisible to OffsetFetch and UNSTABLE_OFFSET_COMMIT (88) to a stable
// one until the COMMIT marker; a late TV2 marker (the previous
// transaction's, at the epoch of the open one) is refused with
// INVALID_PRODUCER_EPOCH (47) and changes nothing; an ABORT discards the
// pending offsets; the producer's state on the __consumer_offsets
// partition shows in DescribeProducers.
func TestGroupsWireTransactionalOffsets(t *testing.T) {
	c := StartCluster(t, Options{Topics: map[string]int32{wireTopic: 3}})
	ctx := testCtx(t, 60*time.Second)
	cl := c.Client()
	const group = "wire-g"
	part := cluster.OffsetsPartitionFor(group, c.View.OffsetsPartitions())
	w := newWireTxn(ctx, t, cl, "wire-txn", group)

	// Transaction 1: offsets pending.
	w.commitOffsets(ctx, map[int32]int64{0: 10, 1: 20})
	stable := fetchOffsets(ctx, t, cl, group, true, 0, 1, 2)
	for _, p := range []int32{0, 1} {
		if stable[p].code != kerr.UnstableOffsetCommit.Code {
			t.Errorf("stable fetch of pending %s-%d: %+v, want UNSTABLE_OFFSET_COMMIT", wireTopic, p, stable[p])
		}
	}
	if stable[2].code != 0 || stable[2].offset != -1 {
		t.Errorf("stable fetch of %s-2 (nothing pending): %+v, want no error, offset -1", wireTopic, stable[2])
	}
	if plain := fetchOffsets(ctx, t, cl, group, false, 0, 1); plain[0] != (fetched{-1, 0}) || plain[1] != (fetched{-1, 0}) {
		t.Errorf("plain fetch while pending: %+v, want -1 without error (invisible)", plain)
	}
	if dp, ok := offsetsProducer(ctx, t, cl, part, w.pid); !ok || dp.ProducerEpoch != w.epoch || dp.CurrentTxnStartOffset < 0 {
		t.Errorf("DescribeProducers while pending: %+v (found %v), want epoch %d and an open transaction", dp, ok, w.epoch)
	}
	w.end(ctx, true)
	waitOffsets(ctx, t, cl, group, map[int32]int64{0: 10, 1: 20})
	// The COMMIT marker came from this process's marker sender straight
	// to the node's server, without a connection (node.StartCoordinator's
	// Dial for its own address).
	if got := groupMarkers(t, c, "in_process", "NONE", "2"); got < 1 {
		t.Errorf("markers of __consumer_offsets received in-process at v2: %v, want at least 1", got)
	}
	if got := groupMarkers(t, c, "tcp", "", ""); got != 0 {
		t.Errorf("markers of __consumer_offsets received over TCP: %v, want none", got)
	}
	dp, ok := offsetsProducer(ctx, t, cl, part, w.pid)
	if !ok || dp.ProducerEpoch != w.epoch || dp.CurrentTxnStartOffset != -1 || dp.CoordinatorEpoch < 0 {
		t.Fatalf("DescribeProducers after COMMIT: %+v (found %v), want the marker's epoch %d, no open transaction", dp, ok, w.epoch)
	}
	coordEpoch := dp.CoordinatorEpoch

	// Transaction 2 at the epoch the COMMIT marker carried: its offsets
	// are pending when the first transaction's marker comes again late.
	w.commitOffsets(ctx, map[int32]int64{0: 30})
	code, v := sendMarker(ctx, t, cl, part, w.pid, w.epoch, coordEpoch, 2, true)
	if v != 2 || code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("late TV2 marker at v%d: code %d, want v2 INVALID_PRODUCER_EPOCH (47)", v, code)
	}
	if got := groupMarkers(t, c, "tcp", "INVALID_PRODUCER_EPOCH", "2"); got != 1 {
		t.Errorf("refused markers received over TCP: %v, want the test's one", got)
	}
	if got := fetchOffsets(ctx, t, cl, group, true, 0); got[0].code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("stable fetch after the refused marker: %+v, want still UNSTABLE_OFFSET_COMMIT", got[0])
	}
	if got := fetchOffsets(ctx, t, cl, group, false, 0); got[0] != (fetched{10, 0}) {
		t.Errorf("plain fetch after the refused marker: %+v, want 10 (the pending 30 not committed)", got[0])
	}
	pending := c.Coordinator.Groups.PendingOffsets(w.pid)
	if len(pending) != 1 || pending[0].Offset != 30 || pending[0].Partition != 0 {
		t.Errorf("pending offsets after the refused marker: %+v, want %s-0 at 30", pending, wireTopic)
	}
	if dp, _ := offsetsProducer(ctx, t, cl, part, w.pid); dp.CurrentTxnStartOffset < 0 {
		t.Errorf("DescribeProducers after the refused marker: %+v, want the transaction still open", dp)
	}

	// ABORT discards them.
	w.end(ctx, false)
	waitOffsets(ctx, t, cl, group, map[int32]int64{0: 10, 1: 20})
	if pending := c.Coordinator.Groups.PendingOffsets(w.pid); len(pending) != 0 {
		t.Errorf("pending offsets after ABORT: %+v", pending)
	}
	// The retry of the ABORT marker (equal epoch, nothing open: the
	// KAFKA-19999 retry) is accepted and changes nothing.
	if code, _ := sendMarker(ctx, t, cl, part, w.pid, w.epoch, coordEpoch, 2, false); code != 0 {
		t.Errorf("retried ABORT marker: code %d, want accepted", code)
	}
	if got := fetchOffsets(ctx, t, cl, group, true, 0); got[0] != (fetched{10, 0}) {
		t.Errorf("after the retried marker: %+v, want 10", got[0])
	}
}

// TestGroupsWireCoordinator41: a 4.1 coordinator node advertises
// WriteTxnMarkers up to v1, so the marker sender delivers the markers of
// __consumer_offsets as v1 (no TransactionVersion: Kafka's legacy ≥ rule)
// and a TV2 transaction's offsets still complete; a v1 marker at the
// producer's current epoch is accepted, as Kafka 4.1 accepts it.
func TestGroupsWireCoordinator41(t *testing.T) {
	c := StartCluster(t, Options{CoordinatorVersion: "4.1", Topics: map[string]int32{wireTopic: 3}})
	ctx := testCtx(t, 60*time.Second)
	cl := c.Client()

	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range av.ApiKeys {
		if k.ApiKey == 27 && k.MaxVersion != 1 {
			t.Errorf("4.1 coordinator node advertises WriteTxnMarkers max v%d, want v1", k.MaxVersion)
		}
	}

	const group = "wire-41"
	part := cluster.OffsetsPartitionFor(group, c.View.OffsetsPartitions())
	w := newWireTxn(ctx, t, cl, "wire-41-txn", group)
	w.commitOffsets(ctx, map[int32]int64{1: 7})
	w.end(ctx, true)
	waitOffsets(ctx, t, cl, group, map[int32]int64{1: 7})
	if got := counterValue(t, c.Metrics, "txncoord_markers_sent_total", map[string]string{"leader": "0", "version": "1"}); got < 1 {
		t.Errorf("markers sent to the coordinator node at v1: %v, want at least 1", got)
	}
	if got := counterValue(t, c.Metrics, "txncoord_markers_sent_total", map[string]string{"leader": "0", "version": "2"}); got != 0 {
		t.Errorf("markers sent to the coordinator node at v2: %v, want none", got)
	}
	if got := groupMarkers(t, c, "in_process", "NONE", "1"); got < 1 {
		t.Errorf("markers the group coordinator took in-process at v1: %v, want at least 1", got)
	}
	if got := counterValue(t, c.Metrics, "txncoord_marker_version_in_use", map[string]string{"leader": "0"}); got != 1 {
		t.Errorf("WriteTxnMarkers version in use for the coordinator node: %v, want 1", got)
	}
	dp, ok := offsetsProducer(ctx, t, cl, part, w.pid)
	if !ok || dp.ProducerEpoch != w.epoch {
		t.Fatalf("DescribeProducers after COMMIT: %+v (found %v), want epoch %d", dp, ok, w.epoch)
	}

	// The same marker again as v1: equal epoch, accepted by the legacy
	// rule; the committed offset stays.
	code, v := sendMarker(ctx, t, cl, part, w.pid, w.epoch, dp.CoordinatorEpoch, 2, true)
	if v != 1 || code != 0 {
		t.Errorf("v1 marker at the current epoch: v%d code %d, want v1 accepted", v, code)
	}
	// Below the current epoch is refused at v1 too.
	if code, _ := sendMarker(ctx, t, cl, part, w.pid, w.epoch-1, dp.CoordinatorEpoch, 2, true); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("v1 marker below the current epoch: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if got := fetchOffsets(ctx, t, cl, group, true, 1); got[1] != (fetched{7, 0}) {
		t.Errorf("after the v1 markers: %+v, want 7", got[1])
	}

}
