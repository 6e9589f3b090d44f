package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/txncoord/txncoord/integration/eos"
)

// The exactly-once chain against txncoord: `txncoord up` as a child
// process (its group coordinator on the coordinator node), each client with
// the default churn; then SIGKILL bounces of the coordinator, embedded
// (the whole `up` process) and as a separate `txncoord coordinator`
// process, while members join, leave and are killed; one more bounce after
// the members stopped, before the offsets are read (they must survive
// SIGKILL).

// TestEOSTxncoord is each client's chain without coordinator faults (the
// member churn only): the baseline that tells a bounce failure from one of
// the chain itself. Every bounce test below runs the same churn, so this
// one runs behind the soak gate to keep make test short.
func TestEOSTxncoord(t *testing.T) {
	if os.Getenv("TXNCOORD_SOAK") != "1" {
		t.Skip("soak: set TXNCOORD_SOAK=1 to run (the bounce tests run the same churn with coordinator faults)")
	}
	for _, client := range []string{"kgo", "sarama", "confluent"} {
		t.Run(client, func(t *testing.T) {
			topics := eosTopics("eos-" + client)
			pc := startUpProcess(t, eosTopicMap(topics, eosPartitions))
			runEOS(t, testCtx(t, 3*time.Minute), eosConfig(client, pc.Bootstrap(), topics))
		})
	}
}

// bounceEvents adds n SIGKILL bounces of the coordinator, spread between
// the member churn's events.
func bounceEvents(pc *procCluster, name string, at ...float64) []eos.Event {
	events := eosChurn()
	for _, f := range at {
		events = append(events, eos.Event{At: f, Kind: eos.Func, Name: fmt.Sprintf("SIGKILL bounce of %s", name),
			Do: func(context.Context) error { pc.BounceCoordinator(); return nil }})
	}
	sortEvents(events)
	return events
}

func sortEvents(events []eos.Event) {
	for i := 1; i < len(events); i++ {
		for j := i; j > 0 && events[j].At < events[j-1].At; j-- {
			events[j], events[j-1] = events[j-1], events[j]
		}
	}
}

func afterStopBounce(pc *procCluster) func(context.Context) error {
	return func(context.Context) error { pc.BounceCoordinator(); return nil }
}

// eosBounceClients are the clients of the bounce tests: each runs in
// make test against the embedded `up` and the separate coordinator.
var eosBounceClients = []string{"kgo", "sarama", "confluent"}

// runEOSBounce runs client's default chain (eosValues values, the member
// churn) with the coordinator SIGKILLed and restarted at each of at while
// the chain runs and once more after the members stopped.
func runEOSBounce(t *testing.T, client string, pc *procCluster, name string, topics []string, at ...float64) *eos.Report {
	t.Helper()
	cfg := eosConfig(client, pc.Bootstrap(), topics)
	cfg.Events = bounceEvents(pc, name, at...)
	cfg.AfterStop = afterStopBounce(pc)
	rep := runEOS(t, testCtx(t, 4*time.Minute), cfg)
	// The bounces must have landed while the chain ran, not at its end.
	bounced := 0
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, "SIGKILL bounce of ") && !strings.Contains(n, " at 100% committed") {
			bounced++
		}
	}
	if bounced != len(at) {
		t.Fatalf("%d of %d coordinator bounces landed before the chain finished: %q", bounced, len(at), rep.Notes)
	}
	return rep
}

// TestEOSBounceUp: `txncoord up` (coordinator, group coordinator and
// leaders in one process) SIGKILLed twice while the chain runs and once
// after, with each client's members.
func TestEOSBounceUp(t *testing.T) {
	for _, client := range eosBounceClients {
		t.Run(client, func(t *testing.T) {
			topics := eosTopics("eos-bounce-up-" + client)
			pc := startUpProcess(t, eosTopicMap(topics, eosPartitions))
			runEOSBounce(t, client, pc, "txncoord up", topics, 0.2, 0.5)
		})
	}
}

// TestEOSBounceCoordinator: the coordinator as a separate process (leaders
// 4.2, 4.2, 4.1 keep running) SIGKILLed twice while the chain runs and
// once after, with each client's members.
func TestEOSBounceCoordinator(t *testing.T) {
	for _, client := range eosBounceClients {
		t.Run(client, func(t *testing.T) {
			topics := eosTopics("eos-bounce-coord-" + client)
			pc := startProcCluster(t, "4.2", []string{"4.2", "4.2", "4.1"}, eosTopicMap(topics, eosPartitions))
			runEOSBounce(t, client, pc, "the coordinator", topics, 0.2, 0.5)
		})
	}
}

// TestEOSSoak is the long chain, behind TXNCOORD_SOAK=1 (make soak):
// every client, TXNCOORD_EOS_VALUES values (default 20,000), four
// coordinator SIGKILL bounces and the member churn, once through separate
// coordinator and leader processes and once through `txncoord up`.
func TestEOSSoak(t *testing.T) {
	if os.Getenv("TXNCOORD_SOAK") != "1" {
		t.Skip("soak: set TXNCOORD_SOAK=1 to run (20,000 values per client and cluster, coordinator bounces; several minutes)")
	}
	for _, client := range []string{"kgo", "sarama", "confluent"} {
		for _, kind := range []string{"coordinator", "up"} {
			t.Run(client+"/"+kind, func(t *testing.T) {
				topics := eosTopics("eos-soak-" + client + "-" + kind)
				var pc *procCluster
				name := "the coordinator"
				if kind == "up" {
					pc, name = startUpProcess(t, eosTopicMap(topics, eosPartitions)), "txncoord up"
				} else {
					pc = startProcCluster(t, "4.2", []string{"4.2", "4.2", "4.1"}, eosTopicMap(topics, eosPartitions))
				}
				cfg := eosConfig(client, pc.Bootstrap(), topics)
				cfg.Values = eosValuesFromEnv(20_000)
				// The default pace (transactions of up to 20, 150 ms
				// apart per member): faster, the chain outruns the
				// progress poll and the bounces bunch up at the end.
				cfg.Events = bounceEvents(pc, name, 0.15, 0.35, 0.6, 0.8)
				cfg.AfterStop = afterStopBounce(pc)
				runEOS(t, testCtx(t, 25*time.Minute), cfg)
			})
		}
	}
}
