package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
)

// TestScaleoutGroupCoordinatorKilledPendingOffsets SIGKILLs the coordinator
// that owns four groups' __consumer_offsets partitions while each group has
// transactional offsets pending (kgo TV2 producers: a record produced, then
// TxnOffsetCommit v5, no EndTxn yet). Two of the transactional ids are
// owned by another coordinator (only the groups' owner dies), two by the
// victim itself (the id's owner dies too, so its successor ends them).
// While pending, before and after the kill, an OffsetFetch with
// RequireStable answers UNSTABLE_OFFSET_COMMIT and a plain one the offsets
// committed before. After the takeover one transaction of each kind
// commits and one aborts: the committed ones' offsets become visible at
// the groups' new owner, the aborted ones' groups keep the old offsets, and
// the history checker finds 0 anomalies in the records they produced.
// The victim then starts again and the offsets are unchanged through it.
func TestScaleoutGroupCoordinatorKilledPendingOffsets(t *testing.T) {
	const out = "pending-out"
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{wireTopic: 3, out: 1}, LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 4*time.Minute)
	o := sc.waitBalanced(ctx, 0, 1, 2)
	const victim, survivor = int32(1), int32(2)
	leaders := sc.offsetsLeadersAt(ctx, 0)
	groups := groupsOn(t, leaders, victim, "pending", 4)
	txnOn := func(owner int32, name string) string {
		for i := range 1000 {
			id := fmt.Sprintf("pending-%s-%d", name, i)
			if o.nodeOf[sc.partitionOf(id)] == owner {
				return id
			}
		}
		t.Fatalf("no transactional id of 1000 on coordinator %d", owner)
		return ""
	}
	type pendingTxn struct {
		name     string
		commit   bool
		idOwner  int32
		id       string
		group    string
		old, new map[int32]int64
		cl       *kgo.Client
		pid      int64
		epoch    int16
	}
	txns := []*pendingTxn{
		{name: "commit-id-elsewhere", commit: true, idOwner: survivor},
		{name: "abort-id-elsewhere", commit: false, idOwner: survivor},
		{name: "commit-id-on-victim", commit: true, idOwner: victim},
		{name: "abort-id-on-victim", commit: false, idOwner: victim},
	}

	adminCl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	for i, x := range txns {
		x.id, x.group = txnOn(x.idOwner, x.name), groups[i]
		base := int64(10 * (i + 1))
		x.old = map[int32]int64{0: base, 1: base + 1}
		x.new = map[int32]int64{0: base + 100, 1: base + 101}
		var offs kadm.Offsets
		for p, at := range x.old {
			offs.Add(kadm.Offset{Topic: wireTopic, Partition: p, At: at, LeaderEpoch: -1})
		}
		if err := adm.CommitAllOffsets(ctx, x.group, offs); err != nil {
			t.Fatalf("plain commit of %s: %v", x.group, err)
		}
		x.cl, err = kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.TransactionalID(x.id),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(out),
			// Longer than the test: only its EndTxn ends the
			// transaction, never the timeout.
			kgo.TransactionTimeout(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer x.cl.Close()
		if err := x.cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := x.cl.ProduceSync(ctx, &kgo.Record{Value: []byte(x.name)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", x.name, err)
		}
		if x.pid, x.epoch, err = x.cl.ProducerID(ctx); err != nil {
			t.Fatal(err)
		}
		w := &wireTxn{t: t, cl: x.cl, id: x.id, group: x.group, pid: x.pid, epoch: x.epoch}
		w.commitOffsets(ctx, x.new)
		t.Logf("%s: id %s (coordinator %d, producer %d/%d), group %s (partition %d on coordinator %d): pending %v over %v",
			x.name, x.id, x.idOwner, x.pid, x.epoch, x.group, cluster.OffsetsPartitionFor(x.group, int32(len(leaders))), victim, x.new, x.old)
	}

	// checkPending: the stable fetch says the offsets are pending, the
	// plain one shows the ones committed before. cl is a client that
	// has not met the killed coordinator (kgo keeps asking the
	// coordinator it found last while that one's process is gone).
	checkPending := func(cl *kgo.Client, when string) {
		for _, x := range txns {
			stable := fetchOffsets(ctx, t, cl, x.group, true, 0, 1)
			plain := fetchOffsets(ctx, t, cl, x.group, false, 0, 1)
			for p, want := range x.old {
				if stable[p].code != kerr.UnstableOffsetCommit.Code {
					t.Errorf("%s, %s: stable fetch of %s-%d: %+v, want UNSTABLE_OFFSET_COMMIT", when, x.group, wireTopic, p, stable[p])
				}
				if plain[p] != (fetched{want, 0}) {
					t.Errorf("%s, %s: plain fetch of %s-%d: %+v, want %d (the pending offset invisible)", when, x.group, wireTopic, p, plain[p], want)
				}
			}
		}
	}
	checkPending(adminCl, "before the kill")

	killedAt := sc.KillCoordinator(victim)
	t.Logf("SIGKILL of coordinator %d with the offsets pending", victim)
	for _, x := range txns {
		by := sc.waitGroupMoved(ctx, x.group, victim)
		t.Logf("%s now on coordinator %d", x.group, by)
	}
	t.Logf("every group moved %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	afterCl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer afterCl.Close()
	checkPending(afterCl, "after the kill, at the groups' new owners")
	t.Logf("the pending window checked at the new owners %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	var h checker.History
	for _, x := range txns {
		how := kgo.TryAbort
		outcome := checker.Aborted
		if x.commit {
			how, outcome = kgo.TryCommit, checker.Committed
		}
		if err := x.cl.EndTransaction(ctx, how); err != nil {
			t.Fatalf("%s: EndTransaction: %v", x.name, err)
		}
		h.Txns = append(h.Txns, checker.Txn{ID: x.name, Producer: x.id, Outcome: outcome,
			Writes: []checker.Write{{Value: x.name, Partition: checker.Partition{Topic: out, Partition: 0}}}})
	}
	checkOutcome := func(when string) {
		for _, x := range txns {
			want := x.old
			if x.commit {
				want = x.new
			}
			waitOffsets(ctx, t, afterCl, x.group, want)
			// The plain fetch agrees once the stable one does.
			if plain := fetchOffsets(ctx, t, afterCl, x.group, false, 0, 1); plain[0] != (fetched{want[0], 0}) || plain[1] != (fetched{want[1], 0}) {
				t.Errorf("%s, %s (%s): plain fetch %+v, want %v", when, x.group, x.name, plain, want)
			}
		}
	}
	checkOutcome("after EndTxn")
	t.Logf("the outcomes checked %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	reads, err := workload.ReadCommitted(ctx, sc.Bootstrap(), []checker.Partition{{Topic: out, Partition: 0}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := checker.Check(h, reads)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("history checker:\n%s", rep.Table())
	if n := rep.Anomalies(); n != 0 {
		t.Fatalf("%d anomalies: %s", n, rep.Summary())
	}

	sc.StartCoordinator(victim)
	sc.waitBalanced(ctx, 0, 1, 2)
	checkOutcome("after the victim's restart")
}

// groupsOn returns n group ids (prefix-i) whose __consumer_offsets
// partitions are led by owner in Metadata's leaders.
func groupsOn(t *testing.T, leaders map[int32]int32, owner int32, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < 10000 && len(out) < n; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		if leaders[cluster.OffsetsPartitionFor(g, int32(len(leaders)))] == owner {
			out = append(out, g)
		}
	}
	if len(out) < n {
		t.Fatalf("%d of %d group ids on coordinator %d (Metadata's leaders %v)", len(out), n, owner, leaders)
	}
	return out
}

// waitGroupMoved waits until node 0's Metadata names another coordinator
// than from for group, and returns it.
func (sc *scaleCluster) waitGroupMoved(ctx context.Context, group string, from int32) int32 {
	sc.t.Helper()
	for {
		if by := sc.groupCoordinatorAt(ctx, 0, group); by >= 0 && by != from {
			return by
		}
		select {
		case <-ctx.Done():
			sc.t.Fatalf("group %s never left coordinator %d", group, from)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fetchOffsets sends OffsetFetch for group's partitions of wireTopic
// (v8+, the groups array), stable or not; a retriable group error (the
// coordinator moving or loading) is asked again.
func fetchOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group string, stable bool, partitions ...int32) map[int32]fetched {
	t.Helper()
	for {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = stable
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = wireTopic, partitions
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		var groupErr error
		if err == nil {
			for _, g := range resp.Groups {
				groupErr = kerr.ErrorForCode(g.ErrorCode)
			}
		}
		switch {
		case err == nil && groupErr == nil:
			out := map[int32]fetched{}
			for _, g := range resp.Groups {
				for _, rt := range g.Topics {
					for _, p := range rt.Partitions {
						out[p.Partition] = fetched{offset: p.Offset, code: p.ErrorCode}
					}
				}
			}
			return out
		case err == nil && !kerr.IsRetriable(groupErr):
			t.Fatalf("OffsetFetch %s: %v", group, groupErr)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("OffsetFetch %s: %v %v", group, err, groupErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitOffsets polls a stable OffsetFetch until every partition answers
// no error and the wanted offset (the markers are delivered after EndTxn
// is answered).
func waitOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group string, want map[int32]int64) {
	t.Helper()
	var parts []int32
	for p := range want {
		parts = append(parts, p)
	}
	for {
		got := fetchOffsets(ctx, t, cl, group, true, parts...)
		ok := true
		for p, o := range want {
			if got[p].code != 0 || got[p].offset != o {
				ok = false
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s: stable offsets %+v, want %v", group, got, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
