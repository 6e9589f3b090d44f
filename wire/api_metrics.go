package wire

import (
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/promreg"
)

// Per-API series of the Kafka listeners, the first thing a client's
// tester looks at (Kafka's RequestMetrics: RequestsPerSec,
// ErrorsPerSec, TotalTimeMs per request type and version). They sit on
// every request's path, so a node resolves each (api, version) child once,
// on its first request, and keeps it in a fixed table read with one atomic
// load: a request allocates nothing for them. The in-process calls
// between the nodes of one process (LocalClient: a leader's registrations,
// the markers, the controller's forwards in `txncoord up`) are counted in
// the same series as requests read from a connection, as they are
// connections between separate processes; so are a node's calls to
// itself (markers to its own __consumer_offsets, the group coordinator's
// AddPartitionsToTxn), which Kafka's broker sends over its network client.

// RequestMetrics are a process's per-API series, labelled by node; one per
// registry (every node of `txncoord up` shares it).
type RequestMetrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewRequestMetrics registers txncoord_requests_total,
// txncoord_request_errors_total and txncoord_request_duration_seconds in
// reg (nil: unregistered).
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	labels := []string{"node", "api", "version"}
	m := &RequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txncoord_requests_total",
			Help: "Kafka requests read from a connection (or called in-process by another node of the process) and queued for an answer, by node, API and version."}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txncoord_request_errors_total",
			Help: "Error codes other than NONE in the responses, by node, API, version and error: one per partition, transaction or group entry that carries it, as Kafka's ErrorsPerSec counts."},
			append(labels, "error")),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "txncoord_request_duration_seconds",
			Help:    "From a request's frame read to its response encoded for the connection (or failed), by node, API and version.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17)}, labels),
	}
	if reg != nil {
		m.requests = promreg.Register(reg, m.requests)
		m.errors = promreg.Register(reg, m.errors)
		m.latency = promreg.Register(reg, m.latency)
	}
	return m
}

// Node returns node id's handle (nil for nil metrics).
func (m *RequestMetrics) Node(id int32) *NodeRequestMetrics {
	if m == nil {
		return nil
	}
	return &NodeRequestMetrics{m: m, node: strconv.Itoa(int(id)), errs: map[uint32]prometheus.Counter{}}
}

// Table bounds: every Kafka API key and version fits (kmsg's largest key
// is below 100, versions below 20); one outside is not counted.
const (
	metricKeys     = 128
	metricVersions = 32
)

// NodeRequestMetrics are one node's children of the per-API series.
type NodeRequestMetrics struct {
	m     *RequestMetrics
	node  string
	slots [metricKeys][metricVersions]atomic.Pointer[apiSeries]

	mu   sync.Mutex
	errs map[uint32]prometheus.Counter // key<<24 | version<<16 | uint16(code)
}

// apiSeries are one (api, version)'s children.
type apiSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// series returns (key, version)'s children, resolved on first use; nil
// for a nil handle or a key or version outside the table.
func (n *NodeRequestMetrics) series(key, version int16) *apiSeries {
	if n == nil || key < 0 || key >= metricKeys || version < 0 || version >= metricVersions {
		return nil
	}
	slot := &n.slots[key][version]
	if s := slot.Load(); s != nil {
		return s
	}
	api, v := kmsg.NameForKey(key), strconv.Itoa(int(version))
	s := &apiSeries{requests: n.m.requests.WithLabelValues(n.node, api, v), latency: n.m.latency.WithLabelValues(n.node, api, v)}
	if !slot.CompareAndSwap(nil, s) {
		return slot.Load()
	}
	return s
}

// errorCode counts one error code in a response of (key, version).
func (n *NodeRequestMetrics) errorCode(key, version, code int16) {
	k := uint32(key)<<24 | uint32(version)<<16 | uint32(uint16(code))
	n.mu.Lock()
	c, ok := n.errs[k]
	if !ok {
		name := strconv.Itoa(int(code))
		if e := kerr.ErrorForCode(code); e != nil {
			name = e.(*kerr.Error).Message
		}
		c = n.m.errors.WithLabelValues(n.node, kmsg.NameForKey(key), strconv.Itoa(int(version)), name)
		n.errs[k] = c
	}
	n.mu.Unlock()
	c.Inc()
}

// answered records a request's end: its latency since start, and the
// error codes resp carries (nil resp: dropped, or no response).
func (n *NodeRequestMetrics) answered(s *apiSeries, key, version int16, start time.Time, resp kmsg.Response) {
	if s == nil {
		return
	}
	s.latency.Observe(time.Since(start).Seconds())
	if resp != nil {
		n.countErrors(key, version, resp)
	}
}

// errorPlan says where a response struct type keeps error codes: its own
// ErrorCode field, and the fields (structs, or slices of structs) below
// it that hold some.
type errorPlan struct {
	code int // field index of ErrorCode int16, or -1
	subs []errorSub
}

type errorSub struct {
	field int
	slice bool
	plan  *errorPlan
}

// errorPlans caches a plan per response type (reflect.Type keys).
var errorPlans sync.Map

var int16Type = reflect.TypeFor[int16]()

// planFor builds the plan of struct type t; nil when t holds no error
// code at all. depth bounds the walk (kmsg's types are not recursive).
func planFor(t reflect.Type, depth int) *errorPlan {
	if depth > 8 {
		return nil
	}
	p := &errorPlan{code: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		switch {
		case f.Name == "ErrorCode" && f.Type == int16Type:
			p.code = i
		case f.Type.Kind() == reflect.Struct:
			if sub := planFor(f.Type, depth+1); sub != nil {
				p.subs = append(p.subs, errorSub{field: i, plan: sub})
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if sub := planFor(f.Type.Elem(), depth+1); sub != nil {
				p.subs = append(p.subs, errorSub{field: i, slice: true, plan: sub})
			}
		}
	}
	if p.code < 0 && len(p.subs) == 0 {
		return nil
	}
	return p
}

// countErrors counts every non-zero ErrorCode in resp, at any depth (top
// level, per topic, per partition...). It does not allocate once resp's
// type has a plan and each code met has its child.
func (n *NodeRequestMetrics) countErrors(key, version int16, resp kmsg.Response) {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	v = v.Elem()
	var p *errorPlan
	if cached, ok := errorPlans.Load(v.Type()); ok {
		p = cached.(*errorPlan)
	} else {
		p = planFor(v.Type(), 0)
		errorPlans.Store(v.Type(), p)
	}
	n.walkErrors(key, version, v, p)
}

func (n *NodeRequestMetrics) walkErrors(key, version int16, v reflect.Value, p *errorPlan) {
	if p == nil {
		return
	}
	if p.code >= 0 {
		if c := int16(v.Field(p.code).Int()); c != 0 {
			n.errorCode(key, version, c)
		}
	}
	for _, s := range p.subs {
		f := v.Field(s.field)
		if !s.slice {
			n.walkErrors(key, version, f, s.plan)
			continue
		}
		for i := range f.Len() {
			n.walkErrors(key, version, f.Index(i), s.plan)
		}
	}
}
