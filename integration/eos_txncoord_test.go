package integration

import (
	"context"
	"fmt"
	"os"
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

func TestEOSTxncoord(t *testing.T) {
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

// TestEOSBounceUp: kgo members, `txncoord up` (coordinator, group
// coordinator and leaders in one process) SIGKILLed twice while the chain
// runs and once after.
func TestEOSBounceUp(t *testing.T) {
	topics := eosTopics("eos-bounce-up")
	pc := startUpProcess(t, eosTopicMap(topics, eosPartitions))
	cfg := eosConfig("kgo", pc.Bootstrap(), topics)
	cfg.Events = bounceEvents(pc, "txncoord up", 0.2, 0.5)
	cfg.AfterStop = afterStopBounce(pc)
	runEOS(t, testCtx(t, 4*time.Minute), cfg)
}

// TestEOSBounceCoordinator: kgo members, the coordinator as a separate
// process (leaders 4.2, 4.2, 4.1 keep running) SIGKILLed twice while the
// chain runs and once after.
func TestEOSBounceCoordinator(t *testing.T) {
	topics := eosTopics("eos-bounce-coord")
	pc := startProcCluster(t, "4.2", []string{"4.2", "4.2", "4.1"}, eosTopicMap(topics, eosPartitions))
	cfg := eosConfig("kgo", pc.Bootstrap(), topics)
	cfg.Events = bounceEvents(pc, "the coordinator", 0.2, 0.5)
	cfg.AfterStop = afterStopBounce(pc)
	runEOS(t, testCtx(t, 4*time.Minute), cfg)
}

// TestEOSSoak is the long chain, for `make soak` (TXNCOORD_SOAK=1): every
// client, TXNCOORD_EOS_VALUES values (default 20,000) through separate
// coordinator and leader processes, four coordinator SIGKILL bounces and
// the member churn.
func TestEOSSoak(t *testing.T) {
	if os.Getenv("TXNCOORD_SOAK") != "1" {
		t.Skip("soak: set TXNCOORD_SOAK=1 to run (20,000 values per client, coordinator bounces; several minutes)")
	}
	for _, client := range []string{"kgo", "sarama", "confluent"} {
		t.Run(client, func(t *testing.T) {
			topics := eosTopics("eos-soak-" + client)
			pc := startProcCluster(t, "4.2", []string{"4.2", "4.2", "4.1"}, eosTopicMap(topics, eosPartitions))
			cfg := eosConfig(client, pc.Bootstrap(), topics)
			cfg.Values = eosValuesFromEnv(20_000)
			// The default pace (transactions of up to 20, 150 ms
			// apart per member): faster, the chain outruns the
			// progress poll and the bounces bunch up at the end.
			cfg.Events = bounceEvents(pc, "the coordinator", 0.15, 0.35, 0.6, 0.8)
			cfg.AfterStop = afterStopBounce(pc)
			runEOS(t, testCtx(t, 25*time.Minute), cfg)
		})
	}
}
