package markersender_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/wire"
)

// kfakeLeader is a franz-go kfake broker used as a third-party marker
// target, recording the WriteTxnMarkers versions it was sent (including
// requests it then rejects).
type kfakeLeader struct {
	c    *kfake.Cluster
	node cluster.Node

	mu   sync.Mutex
	seen []kmsg.WriteTxnMarkersRequest
}

func startKfake(t *testing.T, id int32, versions *kversion.Versions, label, topic string) *kfakeLeader {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(versions), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &kfakeLeader{c: c, node: cluster.Node{NodeID: id, Addr: c.ListenAddrs()[0], KafkaVersion: label}}
	c.ControlKey(27, func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.seen = append(k.seen, *req.(*kmsg.WriteTxnMarkersRequest))
		return nil, nil, false // observe only: kfake handles it
	})
	return k
}

func (k *kfakeLeader) versions() []int16 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var v []int16
	for _, r := range k.seen {
		v = append(v, r.Version)
	}
	return v
}

func (k *kfakeLeader) firstTV() int8 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen[0].Markers[0].TransactionVersion
}

// endOffset asks the kfake broker for a partition's end offset: a marker
// written there is a control batch that advances it.
func (k *kfakeLeader) endOffset(t *testing.T, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := wire.Dial(ctx, k.node.Addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := cl.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	p := raw.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets %s/%d: error %d", topic, partition, p.ErrorCode)
	}
	return p.Offset
}

func kfakeSender(t *testing.T, discovery bool, leaders ...*kfakeLeader) *markersender.Sender {
	rt := newRouter()
	var nodes []cluster.Node
	for _, k := range leaders {
		nodes = append(nodes, k.node)
	}
	rt.set("old", -1, leaders[0].node)
	rt.set("new", -1, leaders[1].node)
	s := markersender.New(markersender.Config{
		Router: rt, Leaders: nodes, Discovery: discovery,
		RequestTimeout: 2 * time.Second, BackoffMin: time.Millisecond, BackoffMax: 20 * time.Millisecond,
	})
	t.Cleanup(s.Close)
	return s
}

// One transaction across a kfake "4.0" broker and a kfake Stable broker:
// the 4.0 one gets v1, the Stable one v2, both write the markers, and the
// transaction completes.
func TestKfakeTargetsNegotiated(t *testing.T) {
	old := startKfake(t, 1, kversion.V4_0_0(), "4.0", "old")
	cur := startKfake(t, 2, kversion.Stable(), "4.2", "new")
	s := kfakeSender(t, true, old, cur)
	rec := &recorder{}
	s.Start(rec)
	s.Enqueue(txn("t1", 42, 1, append(tps("old", 0, 1), tps("new", 0, 1)...)))
	ev := rec.waitEvents(t, 1)
	if ev[0].stuck {
		t.Fatalf("stuck: %s", ev[0].reason)
	}
	if v := old.versions(); len(v) != 1 || v[0] != 1 {
		t.Fatalf("kfake 4.0 got versions %v, want [1]", v)
	}
	if v := cur.versions(); len(v) != 1 || v[0] != 2 || cur.firstTV() != 2 {
		t.Fatalf("kfake Stable got versions %v, want [2] with TV 2", v)
	}
	for _, c := range []struct {
		k     *kfakeLeader
		topic string
	}{{old, "old"}, {cur, "new"}} {
		for p := int32(0); p < 2; p++ {
			if off := c.k.endOffset(t, c.topic, p); off != 1 {
				t.Fatalf("%s/%d end offset %d, want 1 (the marker)", c.topic, p, off)
			}
		}
	}
	ls := s.Leaders()
	if ls[0].WriteTxnMarkers.InUse != 1 || ls[1].WriteTxnMarkers.InUse != 2 {
		t.Fatalf("leaders: %+v", ls)
	}
}

// Kafka 4.2.0's behaviour (discovery off) against the same brokers: the
// Stable broker is fine, the 4.0 broker closes the connection on every v2
// request, and the transaction is reported stuck with the reason instead of
// hanging silently.
func TestKfakeDiscoveryOffReportsStuck(t *testing.T) {
	old := startKfake(t, 1, kversion.V4_0_0(), "4.0", "old")
	cur := startKfake(t, 2, kversion.Stable(), "4.2", "new")
	s := kfakeSender(t, false, old, cur)
	rec := &recorder{}
	s.Start(rec)
	s.Enqueue(txn("t-new", 43, 1, tps("new", 0)))
	s.Enqueue(txn("t-old", 44, 1, tps("old", 0)))
	ev := rec.waitEvents(t, 2)
	byID := map[string]event{}
	for _, e := range ev {
		byID[e.txn.TransactionalID] = e
	}
	if e := byID["t-new"]; e.stuck {
		t.Fatalf("t-new stuck: %s", e.reason)
	}
	e := byID["t-old"]
	want := "leader 1 closed the connection on WriteTxnMarkers v2; it advertises max v1; version discovery is off"
	if !e.stuck || e.reason != want {
		t.Fatalf("t-old: stuck=%v reason %q, want %q", e.stuck, e.reason, want)
	}
	pending := s.Markers()
	if len(pending) != 1 || !pending[0].Stuck || !strings.Contains(pending[0].Reason, "discovery is off") {
		t.Fatalf("markers: %+v", pending)
	}
	if off := old.endOffset(t, "old", 0); off != 0 {
		t.Fatalf("the 4.0 broker wrote a marker from a v2 request: end offset %d", off)
	}
}
