package integration

import (
	"testing"
	"time"
)

// TestScaleoutLeadersFollowGroupCoordinator: the leader of each
// __consumer_offsets partition is the coordinator owning it (the
// coordinator of its groups). Leader processes have no etcd client: they
// ask the coordinators every 2 s (a group id hashed to each partition)
// and name each partition's owner in their Metadata, as the coordinators
// do. When partition 0's owner is SIGKILLed the partition moves, and every
// leader process names its new owner.
func TestScaleoutLeadersFollowGroupCoordinator(t *testing.T) {
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{"scale-groups-meta": 1}, LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 2*time.Minute)
	sc.waitBalanced(ctx, 0, 1, 2)
	// waitLeadersName waits until every leader process names want.
	waitLeadersName := func(want int32) {
		t.Helper()
		for id := range sc.Leaders {
			deadline := time.Now().Add(10 * time.Second)
			for got := sc.offsetsLeaderAt(ctx, id); got != want; got = sc.offsetsLeaderAt(ctx, id) {
				if time.Now().After(deadline) {
					t.Fatalf("leader %d names %d as the leader of __consumer_offsets, the coordinators %d", id, got, want)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	holder := sc.offsetsLeaderAt(ctx, 1)
	if holder < 0 || holder >= scaleCoordinators {
		t.Fatalf("coordinator 1 names %d as the leader of __consumer_offsets, want a coordinator", holder)
	}
	waitLeadersName(holder)

	killedAt := sc.KillCoordinator(holder)
	survivor := (holder + 1) % scaleCoordinators
	var next int32
	deadline := time.Now().Add(20 * time.Second)
	for next = sc.offsetsLeaderAt(ctx, survivor); next == holder || next < 0; next = sc.offsetsLeaderAt(ctx, survivor) {
		if time.Now().After(deadline) {
			t.Fatalf("coordinator %d still names %d as the group coordinator 20 s after its SIGKILL", survivor, next)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("group coordinator moved from %d to %d %v after the SIGKILL", holder, next, time.Since(killedAt).Round(time.Millisecond))
	waitLeadersName(next)
	sc.StartCoordinator(holder)
	sc.waitBalanced(ctx, 0, 1, 2)
}
