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
	cfg.Events = append(cfg.Events, killCoordinatorEvents(t, sc, "SIGKILL of a non-zero coordinator", sc.busiestNonZero)...)
	sortEvents(cfg.Events)
	checkKillLanded(t, runEOS(t, testCtx(t, 4*time.Minute), cfg), "SIGKILL of a non-zero coordinator")
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

// TestScaleoutEOSGroupsSpread is the exactly-once chain (kgo members)
// with its two groups on different coordinators (their
// __consumer_offsets partitions owned by coordinators 1 and 2, as
// Metadata names them): at 30% of the values committed the coordinator
// of the first stage's group is SIGKILLed; its partitions (of both
// topics) move to the others while the other group's coordinator keeps
// serving it; at 60% it starts again. Every value must come out exactly
// once and both groups' offsets must resume at the end.
func TestScaleoutEOSGroupsSpread(t *testing.T) {
	runEOSGroupsSpread(t, "scale-eos-spread", []int32{1, 2}, 1)
}

// TestScaleoutEOSGroupsSpread3 is the exactly-once chain of three stages
// (input → stage 1 → middle → stage 2 → middle → stage 3 → output, kgo
// members) with each stage's group on another of the three coordinators
// (stage 1's on coordinator 1, stage 2's on 2, stage 3's on 0): at 30% of
// the values committed the coordinator of the middle stage's group is
// SIGKILLed while the other two groups' coordinators keep serving them; at
// 60% it starts again. Every value must come out exactly once through all
// three stages and every group's offsets must resume at the end.
func TestScaleoutEOSGroupsSpread3(t *testing.T) {
	runEOSGroupsSpread(t, "scale-eos-spread3", []int32{1, 2, 0}, 2)
}

// runEOSGroupsSpread runs a chain of len(owners) stages whose stage i's
// group is on coordinator owners[i-1], and SIGKILLs the coordinator of
// stage victimStage's group at 30% (restarted at 60%).
func runEOSGroupsSpread(t *testing.T, name string, owners []int32, victimStage int) {
	topics := []string{name + "-in"}
	for i := 1; i < len(owners); i++ {
		topics = append(topics, fmt.Sprintf("%s-mid%d", name, i))
	}
	topics = append(topics, name+"-out")
	sc := startScaleCluster(t, scaleConfig{Topics: eosTopicMap(topics, eosPartitions), LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 5*time.Minute)
	sc.waitBalanced(ctx, 0, 1, 2)
	leaders := sc.offsetsLeadersAt(ctx, 0)
	cfg := eosConfig("kgo", sc.Bootstrap(), topics)
	cfg.Groups = nil
	for i, owner := range owners {
		cfg.Groups = append(cfg.Groups, groupsOn(t, leaders, owner, fmt.Sprintf("%s-g%d", topics[i], i+1), 1)[0])
		t.Logf("stage %d's group %s on coordinator %d", i+1, cfg.Groups[i], owner)
	}
	kill := fmt.Sprintf("SIGKILL of stage %d's group's coordinator", victimStage)
	groupsOwner := func(ctx context.Context) (int32, error) {
		victim := sc.groupCoordinatorAt(ctx, 0, cfg.Groups[victimStage-1])
		if victim != owners[victimStage-1] {
			return -1, fmt.Errorf("stage %d's group's coordinator is %d, want %d", victimStage, victim, owners[victimStage-1])
		}
		return victim, nil
	}
	cfg.Events = append(cfg.Events, killCoordinatorEvents(t, sc, kill, groupsOwner)...)
	sortEvents(cfg.Events)
	rep := runEOS(t, ctx, cfg)
	checkKillLanded(t, rep, kill)
	if len(rep.Stages) != len(owners) {
		t.Fatalf("the report has %d stages, want %d", len(rep.Stages), len(owners))
	}
	sc.waitBalanced(testCtx(t, time.Minute), 0, 1, 2)
}

// killCoordinatorEvents are a chain's events that SIGKILL the coordinator
// victim names at 30% of the values committed (the event called name),
// and start it again at 60%.
func killCoordinatorEvents(t *testing.T, sc *scaleCluster, name string, victimOf func(context.Context) (int32, error)) []eos.Event {
	var victim int32 = -1
	var killedAt time.Time
	return []eos.Event{
		{At: 0.3, Kind: eos.Func, Name: name, Do: func(ctx context.Context) error {
			var err error
			if victim, err = victimOf(ctx); err != nil {
				return err
			}
			killedAt = sc.KillCoordinator(victim)
			t.Logf("SIGKILL of coordinator %d", victim)
			return nil
		}},
		{At: 0.6, Kind: eos.Func, Name: "restart of the killed coordinator", Do: func(ctx context.Context) error {
			if victim < 0 {
				return fmt.Errorf("no coordinator was killed")
			}
			sc.StartCoordinator(victim)
			t.Logf("coordinator %d restarted %v after its SIGKILL", victim, time.Since(killedAt).Round(time.Millisecond))
			return nil
		}},
	}
}

// checkKillLanded fails the test unless the event called name ran while
// the chain ran.
func checkKillLanded(t *testing.T, rep *eos.Report, name string) {
	t.Helper()
	kills := 0
	for _, note := range rep.Notes {
		if strings.HasPrefix(note, name) && !strings.Contains(note, " at 100% committed") {
			kills++
		}
	}
	if kills != 1 {
		t.Fatalf("the coordinator kill did not land while the chain ran: %q", rep.Notes)
	}
}
