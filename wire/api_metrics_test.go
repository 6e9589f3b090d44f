package wire_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// addPartitionsHandler answers AddPartitionsToTxn v3 with
// CONCURRENT_TRANSACTIONS for every partition: error codes two levels
// down, one per partition.
func addPartitionsHandler(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, kerr.ConcurrentTransactions.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return wire.Now(resp)
}

func startWithRequestMetrics(t testing.TB, reg prometheus.Registerer) *clustertest.Cluster {
	m := wire.NewRequestMetrics(reg)
	return clustertest.Start(t, clustertest.Options{
		Register: func(_ cluster.Node, reg *wire.Registry) { reg.Register(24, 0, 3, addPartitionsHandler) },
		Tune: func(n cluster.Node, cfg *wire.Config) {
			if reg != nil {
				cfg.Requests = m.Node(n.NodeID)
			}
		},
	})
}

func addPartitionsRequest() *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID = "m", 1
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic, t.Partitions = "orders", []int32{0, 1}
	req.Topics = append(req.Topics, t)
	return req
}

// TestRequestMetrics: each request answered over a connection counts in
// txncoord_requests_total and the latency histogram by node, API and
// version, and every error code of its response (each partition's) in
// txncoord_request_errors_total by name.
func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startWithRequestMetrics(t, reg)
	n := c.Coordinator()
	conn := dialRaw(t, n.Server.Addr().String())
	for i := range 3 {
		resp := conn.roundTrip(addPartitionsRequest(), int32(i)).(*kmsg.AddPartitionsToTxnResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("response %+v", resp)
		}
	}
	conn.roundTrip(apiVersionsReq(3), 9)
	node := "0"
	if got := valueOf(t, reg, "txncoord_requests_total", node, "AddPartitionsToTxn", "3", ""); got != 3 {
		t.Errorf("AddPartitionsToTxn v3 requests %v, want 3", got)
	}
	if got := valueOf(t, reg, "txncoord_requests_total", node, "ApiVersions", "3", ""); got != 1 {
		t.Errorf("ApiVersions v3 requests %v, want 1", got)
	}
	if got := valueOf(t, reg, "txncoord_request_errors_total", node, "AddPartitionsToTxn", "3", "CONCURRENT_TRANSACTIONS"); got != 6 {
		t.Errorf("CONCURRENT_TRANSACTIONS %v, want 6 (2 partitions x 3 requests)", got)
	}
	if observed := latencySamples(t, reg, "AddPartitionsToTxn"); observed != 3 {
		t.Errorf("latency samples of AddPartitionsToTxn %d, want 3", observed)
	}
}

// TestRequestMetricsInProcess: a call through LocalClient (how the nodes
// of `txncoord up` reach each other) counts in the same series as a
// request over a connection: its request, its latency, each error code.
func TestRequestMetricsInProcess(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startWithRequestMetrics(t, reg)
	local := c.Coordinator().Server.Local("")
	for range 2 {
		if _, err := local.Do(context.Background(), addPartitionsRequest()); err != nil {
			t.Fatal(err)
		}
	}
	conn := dialRaw(t, c.Coordinator().Server.Addr().String())
	conn.roundTrip(addPartitionsRequest(), 1)
	if got := valueOf(t, reg, "txncoord_requests_total", "0", "AddPartitionsToTxn", "3", ""); got != 3 {
		t.Errorf("AddPartitionsToTxn v3 requests %v, want 3 (2 in-process, 1 over a connection)", got)
	}
	if got := valueOf(t, reg, "txncoord_request_errors_total", "0", "AddPartitionsToTxn", "3", "CONCURRENT_TRANSACTIONS"); got != 6 {
		t.Errorf("CONCURRENT_TRANSACTIONS %v, want 6 (2 partitions x 3 calls)", got)
	}
	if got := latencySamples(t, reg, "AddPartitionsToTxn"); got != 3 {
		t.Errorf("latency samples of AddPartitionsToTxn %d, want 3", got)
	}
}

// latencySamples is the number of latency samples of api in reg.
func latencySamples(t *testing.T, reg *prometheus.Registry, api string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var observed uint64
	for _, mf := range mfs {
		if mf.GetName() != "txncoord_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsOf(m.GetLabel())["api"] == api {
				observed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return observed
}

type labelPair interface {
	GetName() string
	GetValue() string
}

func labelsOf[L labelPair](ls []L) map[string]string {
	out := map[string]string{}
	for _, l := range ls {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// valueOf is a counter series by its labels in reg (errorName ""
// for the series without an error label).
func valueOf(t *testing.T, reg *prometheus.Registry, name, node, api, version, errorName string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m.GetLabel())
			if l["node"] == node && l["api"] == api && l["version"] == version && l["error"] == errorName {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{node=%s,api=%s,version=%s,error=%s}", name, node, api, version, errorName)
	return 0
}

// BenchmarkRequestMetrics: allocations of one request over a connection
// with and without the per-API series (run with -benchmem; allocations
// are the process's, server included).
func BenchmarkRequestMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		var reg prometheus.Registerer
		if on {
			name, reg = "on", prometheus.NewRegistry()
		}
		b.Run(name, func(b *testing.B) {
			c := startWithRequestMetrics(b, reg)
			conn := dialRaw(b, c.Coordinator().Server.Addr().String())
			req := addPartitionsRequest()
			frame := frameOf(req, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				conn.write(frame)
				if _, err := conn.readFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
