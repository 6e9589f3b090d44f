package markersender_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation/testkit"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txntimeline"
)

// countingCompleter signals done after n MarkersWritten.
type countingCompleter struct {
	n, got atomic.Int64
	done   chan struct{}
}

func (c *countingCompleter) MarkersWritten(markersender.Txn) {
	if c.got.Add(1) == c.n.Load() {
		close(c.done)
	}
}
func (c *countingCompleter) MarkersStuck(markersender.Txn, txncore.TopicPartition, string) {}

// BenchmarkMarkersToOneLeader measures partition markers per second to one
// (fake, 4.2) leader: everything queued in one request ("batched") against
// one marker per request ("one-per-request", Config.MaxMarkersPerRequest=1).
// Each op is one transaction with one partition marker, recorded in a
// txntimeline as the node does.
//
//	go test -run '^$' -bench MarkersToOneLeader ./markersender/
func BenchmarkMarkersToOneLeader(b *testing.B) {
	for _, mode := range []struct {
		name string
		max  int
	}{{"batched", 0}, {"one-per-request", 1}} {
		b.Run(mode.name, func(b *testing.B) {
			leader, err := testkit.StartFakeLeader("4.2")
			if err != nil {
				b.Fatal(err)
			}
			defer leader.Close()
			node := cluster.Node{NodeID: 1, Addr: leader.Addr(), KafkaVersion: "4.2"}
			rt := newRouter()
			rt.set("orders", -1, node)
			s := markersender.New(markersender.Config{Router: rt, Leaders: []cluster.Node{node}, Discovery: true,
				MaxMarkersPerRequest: mode.max, RequestTimeout: 10 * time.Second, Timeline: txntimeline.New(0)})
			defer s.Close()
			c := &countingCompleter{done: make(chan struct{})}
			c.n.Store(int64(b.N))
			s.Start(c)
			waitFor(b, 5*time.Second, func() (bool, bool) { return s.Leaders()[0].Connected, s.Leaders()[0].Connected })
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				s.Enqueue(markersender.Txn{Markers: txncore.Markers{TransactionalID: fmt.Sprint("t", i), ProducerID: int64(i), ProducerEpoch: 1,
					Commit: true, TransactionVersion: 2, Partitions: tps("orders", int32(i%16))}, CoordinatorEpoch: 1})
			}
			<-c.done
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "markers/s")
			b.ReportMetric(float64(b.N)/float64(len(leader.Received())), "markers/request")
		})
	}
}
