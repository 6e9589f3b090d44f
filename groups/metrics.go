package groups

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the group coordinator's Prometheus series.
type Metrics struct {
	rebalances prometheus.Counter
	commits    *prometheus.CounterVec // kind: offset, txn
	markers    *prometheus.CounterVec // result: an error name or NONE; version; transport: in_process or tcp
	expired    prometheus.Counter
}

// NewMetrics registers the group coordinator's series in reg (none when
// reg is nil); the gauges read the groups of current(), none while it
// returns nil.
func NewMetrics(reg prometheus.Registerer, current func() *Coordinator) *Metrics {
	return NewMetricsOf(reg, func() []*Coordinator {
		if c := current(); c != nil {
			return []*Coordinator{c}
		}
		return nil
	})
}

// NewMetricsOf is NewMetrics for a node running several Coordinators (one
// per __consumer_offsets partition it owns): the gauges add up every
// instance all returns.
func NewMetricsOf(reg prometheus.Registerer, all func() []*Coordinator) *Metrics {
	m := &Metrics{
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_group_rebalances_total",
			Help: "Completed rebalances of classic groups (a generation that started)."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txncoord_group_offset_commits_total",
			Help: "Offset commits accepted: kind offset (OffsetCommit) or txn (TxnOffsetCommit), per partition."}, []string{"kind"}),
		markers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txncoord_group_markers_total",
			Help: "WriteTxnMarkers partitions of __consumer_offsets, by result, request version, and transport: in_process " +
				"(the marker sender of this process, through the node's server without a connection) or tcp."},
			[]string{"result", "version", "transport"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "txncoord_group_offsets_expired_total",
			Help: "Committed offsets removed by offsets retention."}),
	}
	if reg == nil {
		return m
	}
	count := func(f func(g *Group) int) func() float64 {
		return func() float64 {
			n := 0
			for _, c := range all() {
				c.mu.Lock()
				for _, g := range c.core.groups {
					n += f(g)
				}
				c.mu.Unlock()
			}
			return float64(n)
		}
	}
	reg.MustRegister(m.rebalances, m.commits, m.markers, m.expired,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "txncoord_groups", Help: "Groups known to the group coordinator."},
			count(func(*Group) int { return 1 })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "txncoord_group_members", Help: "Members of every group."},
			count(func(g *Group) int { return len(g.Members) })))
	return m
}
