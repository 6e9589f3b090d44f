package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestScaleoutEtcdLeaderKills: kgo TV2 and sarama producers on three
// coordinators, the etcd Raft leader killed and restarted five times under
// load (quorum holds each time), then the producers stop. Every transaction
// must end (the coordinator aborts a client's last one at its timeout,
// 20 s); the test fails naming any that stays Ongoing or Prepare*, with
// what its coordinator answers an InitProducerId for it.
//
// It was a reproduction of two hangs, each failing about one run of two or
// four:
//   - until d79531d: an etcd write whose answer is lost when the leader
//     dies ("Unavailable: EOF", "etcdserver: request timed out") may still
//     have been applied; the coordinator kept its previous state in
//     memory, ignored the markers' completion that followed, and the id's
//     next transaction answered CONCURRENT_TRANSACTIONS forever. Now such
//     a write makes the partition reload from etcd;
//   - until 5937a02: that reload failed on "etcdserver: leader changed" and
//     the partition stayed owned by a live coordinator that served it to
//     no one (NOT_COORDINATOR for its ids, its transactions never ended).
//     Now a failed open is retried while the partition is owned.
//
// At 5937a02 it passed 4 runs of 4 (`TXNCOORD_KEEP_DIRS=DIR` keeps the
// processes' logs).
func TestScaleoutEtcdLeaderKills(t *testing.T) {
	const topic, partitions = "scale-etcd-leader", 6
	// Debug logging of the coordinators: it slows them down enough to
	// widen the window (the bug was seen in 5 of 8 runs with it).
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions}, LeaseTTL: 2 * time.Second, LogLevel: "debug"})
	pc := sc.target()
	adm := pc.admin()
	ctx := testCtx(t, 3*time.Minute)
	run := startCrashWorkload(t, pc, topic, partitions, []string{"kgo-tv2", "kgo-tv2", "kgo-tv2", "sarama"}, 8, 0)
	waitProgress(ctx, t, adm, 150, topic)
	for i := range 5 {
		leader := sc.etcdLeader(ctx)
		sc.Etcd.Kill(leader)
		t.Logf("kill %d: etcd member %d (the Raft leader)", i+1, leader)
		progress := endOffsets(ctx, adm, topic)
		waitProgress(ctx, t, adm, progress+100, topic)
		sc.Etcd.Restart(leader)
		sc.Etcd.WaitReady(30 * time.Second)
		progress = endOffsets(ctx, adm, topic)
		waitProgress(ctx, t, adm, progress+100, topic)
	}
	run.cancel()
	run.wg.Wait()
	// Past the producers' transaction timeout (20 s) and a scan (10 s).
	deadline := time.Now().Add(35 * time.Second)
	for {
		open, err := sc.nonTerminal(ctx, 0)
		if err == nil && len(open) == 0 {
			break
		}
		if time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		var desc []string
		for _, x := range open {
			code := sc.initProducerIDAt(ctx, x.CoordinatorID, x.TransactionalID)
			desc = append(desc, fmt.Sprintf("%s (pid %d epoch %d) %s since %s at coordinator %d, partitions %v, completing %+v; InitProducerId there answers %v",
				x.TransactionalID, x.ProducerID, x.ProducerEpoch, x.State, time.UnixMilli(x.LastUpdateTimeMs).Format("15:04:05.000"),
				x.CoordinatorID, x.Partitions, x.Completing, kerr.ErrorForCode(code)))
		}
		t.Fatalf("transactions never ended after the etcd leader kills (err %v):\n%s", err, strings.Join(desc, "\n"))
	}
	run.stopAndCheck(t, "5 kills of the etcd leader")
}
