package markersender_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/datadriven"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/negotiation/testkit"
	"github.com/txncoord/txncoord/txncore"
)

// TestResponseTable replays testdata/response_table.txt: one transaction
// (pid 7, coordinator epoch 3, partitions orders/0 and orders/1) against a
// scripted fake leader; the output is what the leader decoded, how many
// connections the sender opened, and the Completer's outcome.
//
// Case:   run leader=4.2 coordinator=4.2 discovery=on tv=2 epoch=6 commit=true
// Input:  code N | close | hang | producer epoch=E txnstart=O   (in order)
func TestResponseTable(t *testing.T) {
	datadriven.RunFile(t, "testdata/response_table.txt", func(t *testing.T, c *datadriven.Case) string {
		leader, err := testkit.StartFakeLeader(c.Arg("leader", "4.2"))
		if err != nil {
			t.Fatal(err)
		}
		defer leader.Close()
		epoch := atoi16(c.Arg("epoch", "6"))
		for _, line := range c.Input {
			f := strings.Fields(line)
			switch f[0] {
			case "code":
				leader.Script(testkit.Action{Code: atoi16(f[1])})
			case "close":
				leader.Script(testkit.Action{Close: true})
			case "hang":
				leader.Script(testkit.Action{Hang: true})
			case "producer":
				args := map[string]string{}
				for _, kv := range f[1:] {
					k, v, _ := strings.Cut(kv, "=")
					args[k] = v
				}
				p := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				p.ProducerID = 7
				p.ProducerEpoch = int32(atoi16(args["epoch"]))
				p.CurrentTxnStartOffset, _ = strconv.ParseInt(args["txnstart"], 10, 64)
				p.CoordinatorEpoch = 3
				for _, part := range []int32{0, 1} {
					leader.SetProducers("orders", part, p)
				}
			default:
				t.Fatalf("%s: unknown input %q", c.Pos, line)
			}
		}
		node := cluster.Node{NodeID: 1, Addr: leader.Addr(), KafkaVersion: c.Arg("leader", "4.2")}
		rt := newRouter()
		rt.set("orders", -1, node)
		s := markersender.New(markersender.Config{
			CoordinatorVersion: c.Arg("coordinator", "4.2"),
			Router:             rt,
			Leaders:            []cluster.Node{node},
			Discovery:          c.Arg("discovery", "on") == "on",
			RequestTimeout:     300 * time.Millisecond,
			BackoffMin:         time.Millisecond,
			BackoffMax:         20 * time.Millisecond,
			ProbeInterval:      time.Hour, // connection counts stay exact
		})
		defer s.Close()
		rec := &recorder{}
		s.Start(rec)
		s.Enqueue(markersender.Txn{Markers: txncore.Markers{
			TransactionalID: "t1", ProducerID: 7, ProducerEpoch: epoch, Commit: c.Arg("commit", "true") == "true",
			TransactionVersion: int8(atoi16(c.Arg("tv", "2"))), Partitions: tps("orders", 0, 1),
		}, CoordinatorEpoch: 3})
		ev := rec.waitEvents(t, 1)[0]

		var out strings.Builder
		for _, r := range leader.Received() {
			for _, m := range r.Markers {
				fmt.Fprintf(&out, "leader got v%d pid=%d epoch=%d commit=%v coordinator_epoch=%d tv=%d partitions=%d\n",
					r.Version, m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, m.TransactionVersion, m.Partitions)
			}
		}
		fmt.Fprintf(&out, "connections: %d\n", leader.Conns())
		if ev.stuck {
			fmt.Fprintf(&out, "outcome: stuck at %s/%d: %s\n", ev.tp.Topic, ev.tp.Partition, ev.reason)
			ls := s.Leaders()[0]
			pending := s.Markers()
			fmt.Fprintf(&out, "leaders: stuck_transactions=%d queued_markers=%d; markers: stuck=%v\n",
				ls.StuckTransactions, ls.QueuedMarkers, len(pending) == 1 && pending[0].Stuck)
		} else {
			fmt.Fprintf(&out, "outcome: written\n")
			if n := len(s.Markers()); n != 0 {
				fmt.Fprintf(&out, "still pending: %d\n", n)
			}
		}
		return out.String()
	})
}

func atoi16(s string) int16 {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return int16(n)
}
