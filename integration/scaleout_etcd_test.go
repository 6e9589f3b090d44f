package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestScaleoutEtcdQuorum is issue 19's etcd fault: with kgo (TV2) and
// sarama (TV1) producers running on three coordinators,
//   - the etcd leader is killed: quorum holds, and nothing changes for the
//     coordinators (every /readyz stays 200, every partition keeps its
//     owner and coordinator epoch) while the workload goes on;
//   - a second member is killed: quorum is lost, every coordinator's
//     /readyz turns 503 with a reason naming etcd, a coordinator answers a
//     transactional request with a retriable error, and a transaction
//     cannot commit;
//   - both members restart: the coordinators are ready again, share the
//     partitions, the workload resumes; 0 anomalies and no transaction
//     left Ongoing or Prepare*.
//
// An etcd write whose answer is lost when members die can leave a
// transaction hanging (TestScaleoutEtcdLeaderKills reproduces it; seen
// here once in six runs, before 3b8a450): this test then fails at the
// end, naming it.
func TestScaleoutEtcdQuorum(t *testing.T) {
	const topic, partitions, probeTopic = "scale-etcd", 6, "scale-etcd-probe"
	const ttl = 2 * time.Second
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: partitions, probeTopic: 1}, LeaseTTL: ttl})
	pc := sc.target()
	adm := pc.admin()
	ctx := testCtx(t, 3*time.Minute)
	run := startCrashWorkload(t, pc, topic, partitions, []string{"kgo-tv2", "kgo-tv2", "sarama", "sarama"}, 8, 0)
	waitProgress(ctx, t, adm, 150, topic)
	all := []int32{0, 1, 2}
	before := sc.waitBalanced(ctx, all...)

	// One member down, the leader: quorum holds.
	first := sc.etcdLeader(ctx)
	sc.Etcd.Kill(first)
	killedAt := time.Now()
	t.Logf("killed etcd member %d (the Raft leader)", first)
	progress := endOffsets(ctx, adm, topic)
	for endOffsets(ctx, adm, topic) < progress+150 {
		for _, id := range all {
			if why, ok := sc.ready(ctx, id); !ok {
				t.Errorf("coordinator %d not ready with one etcd member of three down: %s", id, why)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no progress with one etcd member down: %v", ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range all {
		o, err := sc.ownershipAt(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for p, was := range before.owner {
			if now := o.owner[p]; o.nodeOf[p] != before.nodeOf[p] || now.Epoch != was.Epoch {
				t.Errorf("with one etcd member down, coordinator %d sees partition %d at node %d epoch %d; it was node %d epoch %d",
					id, p, o.nodeOf[p], now.Epoch, before.nodeOf[p], was.Epoch)
			}
		}
	}
	t.Logf("150 more records in %v with one etcd member down; ownership and readiness unchanged", time.Since(killedAt).Round(time.Millisecond))

	// A second member down: no quorum.
	second := (first + 1) % sc.Etcd.Size()
	sc.Etcd.Kill(second)
	lostAt := time.Now()
	t.Logf("killed etcd member %d: 1 of 3 left", second)
	reasons := map[int32]string{}
	for len(reasons) < len(all) {
		for _, id := range all {
			if why, ok := sc.ready(ctx, id); !ok && strings.Contains(why, "etcd") {
				reasons[id] = why
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("coordinators not all unready without etcd quorum: %v (unready: %v)", ctx.Err(), reasons)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("every /readyz 503 %v after quorum was lost: %v", time.Since(lostAt).Round(time.Millisecond), reasons)
	// Once the leases may have expired, a coordinator refuses at once
	// (before that, a request that reached a partition's coordinator
	// waits for etcd's own request timeout).
	if d := ttl + time.Second - time.Since(lostAt); d > 0 {
		time.Sleep(d)
	}
	probeID := "scale-etcd-probe"
	owner := before.nodeOf[sc.partitionOf(probeID)]
	t.Logf("probing at +%v", time.Since(lostAt).Round(time.Millisecond))
	probeAt := time.Now()
	code := sc.initProducerIDAt(ctx, owner, probeID)
	if err := kerr.ErrorForCode(code); !kerr.IsRetriable(err) {
		t.Errorf("InitProducerId(%s) at its owner %d without etcd quorum answered %d (%v), want a retriable error", probeID, owner, code, err)
	} else {
		t.Logf("InitProducerId(%s) at its owner %d without etcd quorum: %v (retriable), answered in %v", probeID, owner, err, time.Since(probeAt).Round(time.Millisecond))
	}
	commitAt := time.Now()
	if err := sc.tryCommit(ctx, probeID, probeTopic, 5*time.Second); err == nil {
		t.Errorf("a transaction of %s committed without etcd quorum", probeID)
	} else {
		t.Logf("a transaction without etcd quorum fails: %v (after %v)", err, time.Since(commitAt).Round(time.Millisecond))
	}
	stalled := endOffsets(ctx, adm, topic)
	time.Sleep(2 * time.Second)
	if after := endOffsets(ctx, adm, topic); after != stalled {
		t.Logf("without etcd quorum the workload's records still grew from %d to %d in 2 s", stalled, after)
	}

	// Quorum back.
	restartAt := time.Now()
	sc.Etcd.Restart(first)
	sc.Etcd.Restart(second)
	sc.Etcd.WaitReady(30 * time.Second)
	backAt := time.Now()
	t.Logf("etcd members %d and %d restarted after %v without quorum; etcd serving again %v after the restart",
		first, second, restartAt.Sub(lostAt).Round(time.Millisecond), backAt.Sub(restartAt).Round(time.Millisecond))
	sc.waitBalanced(ctx, all...)
	for _, id := range all {
		if why, ok := sc.ready(ctx, id); !ok {
			t.Errorf("coordinator %d not ready once etcd is back and it serves: %s", id, why)
		}
	}
	progress = endOffsets(ctx, adm, topic)
	waitProgress(ctx, t, adm, progress+150, topic)
	t.Logf("ready and 150 more records %v after etcd quorum came back", time.Since(backAt).Round(time.Millisecond))
	if err := sc.tryCommit(ctx, probeID, probeTopic, 30*time.Second); err != nil {
		t.Errorf("%s cannot commit once etcd is back: %v", probeID, err)
	}

	run.stopAndFinish(t, sc, "one etcd member killed, then a second (quorum lost), then both restarted")
}

// etcdLeader is the index of the etcd member that leads Raft.
func (sc *scaleCluster) etcdLeader(ctx context.Context) int {
	sc.t.Helper()
	cl := sc.Etcd.Client(sc.t)
	for i, ep := range sc.Etcd.Endpoints() {
		st, err := cl.Status(ctx, ep)
		if err != nil {
			sc.t.Fatalf("etcd status of %s: %v", ep, err)
		}
		if st.Leader == st.Header.MemberId {
			return i
		}
	}
	sc.t.Fatal("no etcd member leads")
	return -1
}
