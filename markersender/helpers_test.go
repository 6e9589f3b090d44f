package markersender_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
)

// event is one Completer callback.
type event struct {
	txn    markersender.Txn
	stuck  bool
	tp     txncore.TopicPartition
	reason string
}

// recorder is a Completer that records callbacks in order.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) MarkersWritten(txn markersender.Txn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{txn: txn})
}

func (r *recorder) MarkersStuck(txn markersender.Txn, tp txncore.TopicPartition, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{txn: txn, stuck: true, tp: tp, reason: reason})
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitEvents polls until at least n callbacks arrived.
func (r *recorder) waitEvents(t testing.TB, n int) []event {
	t.Helper()
	return waitFor(t, 20*time.Second, func() ([]event, bool) {
		ev := r.snapshot()
		return ev, len(ev) >= n
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor[T any](t testing.TB, d time.Duration, cond func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, ok := cond()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v (last: %+v)", d, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// router routes partitions by a mutable table; a missing entry has no
// leader.
type router struct {
	mu     sync.Mutex
	routes map[string]cluster.Node // "topic/partition" or "topic/*"
}

func newRouter() *router { return &router{routes: map[string]cluster.Node{}} }

func (r *router) set(topic string, partition int32, n cluster.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := fmt.Sprintf("%s/%d", topic, partition)
	if partition < 0 {
		key = topic + "/*"
	}
	r.routes[key] = n
}

func (r *router) LeaderOf(topic string, partition int32) (cluster.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.routes[fmt.Sprintf("%s/%d", topic, partition)]; ok {
		return n, true
	}
	n, ok := r.routes[topic+"/*"]
	return n, ok
}

func tps(topic string, parts ...int32) []txncore.TopicPartition {
	var out []txncore.TopicPartition
	for _, p := range parts {
		out = append(out, txncore.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}
