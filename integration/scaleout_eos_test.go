package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/integration/eos"
)

// TestScaleoutEOS is the exactly-once chain (integration/eos, kgo
// members, the default member churn) across three coordinators on etcd:
// at 30% of the values committed, the non-zero coordinator that
// coordinates more of the chain's transactional ids is SIGKILLed; its
// partitions move to the others; at 60% it starts again and rejoins.
// Every value must come out exactly once (0 duplicates, 0 losses) and both
// groups' offsets must resume at the end.
func TestScaleoutEOS(t *testing.T) {
	topics := eosTopics("scale-eos")
	sc := startScaleCluster(t, scaleConfig{Topics: eosTopicMap(topics, eosPartitions), LeaseTTL: 2 * time.Second})
	cfg := eosConfig("kgo", sc.Bootstrap(), topics)
	var victim int32 = -1
	var killedAt time.Time
	cfg.Events = append(cfg.Events,
		eos.Event{At: 0.3, Kind: eos.Func, Name: "SIGKILL of a non-zero coordinator", Do: func(ctx context.Context) error {
			var err error
			if victim, err = sc.busiestNonZero(ctx); err != nil {
				return err
			}
			killedAt = sc.KillCoordinator(victim)
			t.Logf("SIGKILL of coordinator %d", victim)
			return nil
		}},
		eos.Event{At: 0.6, Kind: eos.Func, Name: "restart of the killed coordinator", Do: func(ctx context.Context) error {
			if victim < 0 {
				return fmt.Errorf("no coordinator was killed")
			}
			sc.StartCoordinator(victim)
			t.Logf("coordinator %d restarted %v after its SIGKILL", victim, time.Since(killedAt).Round(time.Millisecond))
			return nil
		}})
	sortEvents(cfg.Events)
	rep := runEOS(t, testCtx(t, 4*time.Minute), cfg)
	kills := 0
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, "SIGKILL of a non-zero") && !strings.Contains(n, " at 100% committed") {
			kills++
		}
	}
	if kills != 1 {
		t.Fatalf("the coordinator kill did not land while the chain ran: %q", rep.Notes)
	}
	sc.waitBalanced(testCtx(t, time.Minute), 0, 1, 2)
}

// busiestNonZero is the coordinator other than node 0 that coordinates
// the most transactional ids the cluster lists (node 1 on a tie).
func (sc *scaleCluster) busiestNonZero(ctx context.Context) (int32, error) {
	var txns []admin.Txn
	if err := sc.getJSON(ctx, 0, "/v1/transactions", &txns); err != nil {
		return -1, err
	}
	count := map[int32]int{}
	for _, x := range txns {
		count[x.CoordinatorID]++
	}
	if count[2] > count[1] {
		return 2, nil
	}
	return 1, nil
}
