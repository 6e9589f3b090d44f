package integration

import (
	"testing"
	"time"
)

// TestScaleoutRollingRestart is issue 19's rolling restart: with kgo
// (TV2) and sarama (TV1) producers running, each coordinator in turn is
// stopped gracefully (SIGTERM: exit 0 within 15 s), started again on its
// data dir, and the next one waits until it is ready and the partitions
// are balanced again; 0 anomalies and no transaction left Ongoing or
// Prepare*.
func TestScaleoutRollingRestart(t *testing.T) {
	const topic, partitions = "scale-rolling", 6
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions}, LeaseTTL: 2 * time.Second})
	pc := sc.target()
	adm := pc.admin()
	ctx := testCtx(t, 3*time.Minute)
	run := startCrashWorkload(t, pc, topic, partitions, []string{"kgo-tv2", "kgo-tv2", "kgo-tv2", "sarama", "sarama"}, 8, 0)
	waitProgress(ctx, t, adm, 150, topic)
	all := []int32{0, 1, 2}
	for _, id := range all {
		before := sc.waitBalanced(ctx, all...)
		start := time.Now()
		sc.Coords[id].stop(t)
		var others []int32
		for _, o := range all {
			if o != id {
				others = append(others, o)
			}
		}
		movedAt := sc.waitMoved(ctx, others[0], id, before)
		sc.StartCoordinator(id)
		sc.waitBalanced(ctx, all...)
		t.Logf("coordinator %d: its %d partitions owned by the others %v after the SIGTERM; restarted and balanced again after %v",
			id, len(before.byNode[id]), movedAt.Sub(start).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		progress := endOffsets(ctx, adm, topic)
		waitProgress(ctx, t, adm, progress+100, topic)
	}
	run.stopAndFinish(t, sc, "a rolling restart (SIGTERM) of the three coordinators")
}
