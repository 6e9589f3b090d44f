package wire

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// liveServers are the servers of this process between Start and the end of
// Shutdown, for Collector.
var liveServers = serverSet{m: map[*Server]struct{}{}}

type serverSet struct {
	mu sync.Mutex
	m  map[*Server]struct{}
}

func (ss *serverSet) add(s *Server) {
	ss.mu.Lock()
	ss.m[s] = struct{}{}
	ss.mu.Unlock()
}

func (ss *serverSet) remove(s *Server) {
	ss.mu.Lock()
	delete(ss.m, s)
	ss.mu.Unlock()
}

func (ss *serverSet) snapshot() []*Server {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*Server, 0, len(ss.m))
	for s := range ss.m {
		out = append(out, s)
	}
	return out
}

var (
	descConnsOpen = prometheus.NewDesc("txncoord_wire_connections_open",
		"Kafka protocol connections open, per listener.", []string{"listener"}, nil)
	descConnsRefused = prometheus.NewDesc("txncoord_wire_connections_refused_total",
		"Connections closed at accept: max_connections (every connection busy at the cap), "+
			"max_connections_per_ip, or not_kafka (HTTP or TLS on a plaintext Kafka port, closed after its first bytes).",
		[]string{"listener", "reason"}, nil)
	descConnsEvicted = prometheus.NewDesc("txncoord_wire_connections_evicted_total",
		"Idle connections closed to make room for a new one at the connection cap.", []string{"listener"}, nil)
	descBudgetUsed = prometheus.NewDesc("txncoord_wire_inflight_request_bytes",
		"Bytes held by requests in flight (frames read and not yet answered, plus what handlers charged: decompression), "+
			"summed over the process's budgets (one unless tests make more).", nil, nil)
	descBudgetLimit = prometheus.NewDesc("txncoord_wire_inflight_request_bytes_limit",
		"The budget for requests in flight (--max-inflight-request-bytes), summed as txncoord_wire_inflight_request_bytes.", nil, nil)
	descBudgetWaiting = prometheus.NewDesc("txncoord_wire_requests_waiting_for_budget",
		"Requests waiting for the budget now; their connections are not read meanwhile.", nil, nil)
	descBudgetWaits = prometheus.NewDesc("txncoord_wire_budget_waits_total",
		"Times a request had to wait for the budget.", nil, nil)
)

// Collector returns a Prometheus collector of every Server in this process
// (connections per listener, refusals, evictions) and of the budgets they
// use. Register it once per registry; node.NewMetrics does.
func Collector() prometheus.Collector { return collector{} }

type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnsOpen, descConnsRefused, descConnsEvicted, descBudgetUsed, descBudgetLimit, descBudgetWaiting, descBudgetWaits} {
		ch <- d
	}
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	budgets := map[*Budget]struct{}{}
	for _, s := range liveServers.snapshot() {
		listener := s.Addr().String()
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(descConnsOpen, prometheus.GaugeValue, float64(open), listener)
		for reason, n := range map[string]uint64{
			"max_connections":        s.counters.refusedMaxConns.Load(),
			"max_connections_per_ip": s.counters.refusedPerIP.Load(),
			"not_kafka":              s.counters.notKafka.Load(),
		} {
			ch <- prometheus.MustNewConstMetric(descConnsRefused, prometheus.CounterValue, float64(n), listener, reason)
		}
		ch <- prometheus.MustNewConstMetric(descConnsEvicted, prometheus.CounterValue, float64(s.counters.evicted.Load()), listener)
		budgets[s.budget] = struct{}{}
	}
	var sum BudgetStats
	for b := range budgets {
		st := b.Stats()
		sum.Limit += st.Limit
		sum.Used += st.Used
		sum.Waiting += st.Waiting
		sum.Waits += st.Waits
	}
	ch <- prometheus.MustNewConstMetric(descBudgetUsed, prometheus.GaugeValue, float64(sum.Used))
	ch <- prometheus.MustNewConstMetric(descBudgetLimit, prometheus.GaugeValue, float64(sum.Limit))
	ch <- prometheus.MustNewConstMetric(descBudgetWaiting, prometheus.GaugeValue, float64(sum.Waiting))
	ch <- prometheus.MustNewConstMetric(descBudgetWaits, prometheus.CounterValue, float64(sum.Waits))
}
