package integration

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 19, "SIGKILL the owner of busy partitions mid-commit": kgo (TV2)
// and sarama (TV1) producers commit and abort on three coordinators; the
// owner of a transaction caught in PrepareCommit (its markers slowed down
// by the proxy in front of leader 3) is SIGKILLed; the survivors take its
// __transaction_state partitions once its lease expires, finish what it
// left and serve its ids. The takeover time is SIGKILL → every workload id
// of the killed node's partitions has committed again through another
// coordinator; the killed node then restarts and rejoins. At the end: 0
// anomalies in the history, and no transaction left Ongoing or Prepare*
// (GET /v1/transactions).

// TestScaleoutKillOwner is the make-test size: two kills, lease TTL 2 s.
func TestScaleoutKillOwner(t *testing.T) {
	takeovers := runKillOwner(t, 2*time.Second, 2)
	t.Logf("takeover times (lease TTL 2 s): %v", takeovers)
}

// TestScaleoutKillOwnerSoak is the goal, behind TXNCOORD_SOAK=1:
// ten kills with the default lease TTL (5 s); the worst takeover must be
// within 10 s (the Goal: a measured bound the soak exists to check,
// so it is asserted here and only here).
//
// At e845650 it was not met: the partitions moved 4.4-5.6 s after the
// SIGKILL, the ids committed again after 6.8-13.8 s (median 8.7 s), most of
// it the clients' retry backoff: FindCoordinator named the dead owner
// until its lease expired, and kgo retried EndTxn there with a growing
// backoff (0.2, 0.5, 0.8, 2.1, 4.1 s). Since 1af3a47 a FindCoordinator
// whose owner refuses connections waits for the move (txnrouter), and the
// ids commit again 0.3-3.6 s after it: two soaks at cbaa8b1 and before it
// gave 5.1-7.7 s (median 6.1 s) and 4.9-8.5 s (median 5.8 s).
func TestScaleoutKillOwnerSoak(t *testing.T) {
	if os.Getenv("TXNCOORD_SOAK") != "1" {
		t.Skip("soak: set TXNCOORD_SOAK=1 to run (10 coordinator SIGKILLs with the default 5 s lease; a few minutes)")
	}
	takeovers := runKillOwner(t, 0, 10)
	sorted := slices.Clone(takeovers)
	slices.Sort(sorted)
	worst, median := sorted[len(sorted)-1], sorted[len(sorted)/2]
	t.Logf("takeover times (lease TTL 5 s): %v; median %v, worst %v", takeovers, median, worst)
	if worst > 10*time.Second {
		t.Errorf("worst takeover %v over the goal of 10 s (issue 19)", worst)
	}
}

// runKillOwner runs the workload, kills the owner of a committing
// transaction kills times (restarting it each time) and checks; it returns
// the takeover time of each kill.
func runKillOwner(t *testing.T, ttl time.Duration, kills int) []time.Duration {
	const topic, partitions = "scale-kill", 6
	start := time.Now()
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions}, LeaseTTL: ttl, ProxyLeader: 3})
	pc := sc.target()
	adm := pc.admin()
	ctx := testCtx(t, time.Duration(kills+2)*time.Minute)
	drivers := []string{"kgo-tv2", "kgo-tv2", "kgo-tv2", "sarama", "sarama"}
	var ids []string
	for i, d := range drivers {
		ids = append(ids, fmt.Sprintf("crash-%s-%d", d, i)) // startCrashWorkload's ids
	}
	run := startCrashWorkload(t, pc, topic, partitions, drivers, 8, 0)
	waitProgress(ctx, t, adm, 150, topic)

	// Markers to leader 3 take 200 ms more, from every coordinator: a
	// commit touching it stays in PrepareCommit long enough to be caught.
	wtm := int16(kmsg.WriteTxnMarkers)
	for _, p := range sc.Proxies {
		p.Delay(wtm, 200*time.Millisecond)
	}
	var takeovers []time.Duration
	live := []int32{0, 1, 2}
	for k := 1; k <= kills; k++ {
		o := sc.waitBalanced(ctx, live...)
		prepared := waitPrepareCommit(ctx, t, adm, ids)
		victim := o.nodeOf[sc.partitionOf(prepared)]
		lost := o.byNode[victim]
		var affected []string
		for _, id := range ids {
			if slices.Contains(lost, sc.partitionOf(id)) {
				affected = append(affected, id)
			}
		}
		killAt := sc.KillCoordinator(victim)
		watch := sc.watchCommits(ctx, adm, topic)
		survivor := int32((victim + 1) % scaleCoordinators)
		movedAt := sc.waitMoved(ctx, survivor, victim, o)
		commits := watch.waitFor(ctx, affected...)
		watch.stop()
		takeover := latest(commits, killAt)
		takeovers = append(takeovers, takeover)
		t.Logf("kill %d: SIGKILL of coordinator %d (owner of %d partitions, %s in PrepareCommit); its partitions owned by others after %v; its ids committed a new transaction through another coordinator: %s; takeover %v",
			k, victim, len(lost), prepared, movedAt.Sub(killAt).Round(time.Millisecond), since(commits, killAt), takeover)
		sc.StartCoordinator(victim)
		progress := endOffsets(ctx, adm, topic)
		waitProgress(ctx, t, adm, progress+100, topic)
	}
	for _, p := range sc.Proxies {
		p.Clear(wtm)
	}
	sc.waitBalanced(ctx, live...)
	run.stopAndFinish(t, sc, fmt.Sprintf("%d SIGKILLs of the owning coordinator", kills))
	t.Logf("%d kills in %v", kills, time.Since(start).Round(time.Second))
	return takeovers
}
