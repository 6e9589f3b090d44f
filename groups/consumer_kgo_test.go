package groups_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/txncoord/txncoord/groups"
)

// Real kgo clients with kgo.ServerSideBalancer() (KIP-848) against an
// embedded cluster whose coordinator node is Kafka 4.2.

// fast848 shortens the consumer heartbeat interval (Kafka's default 5 s
// makes each reconciliation step wait for the next heartbeat).
func fast848(tc *testCluster) {
	tc.e.Coordinator.Groups.SetConsumerTimeouts(10*time.Second, 200*time.Millisecond)
}

// TestKgo848GroupOfThree: members with the server-side balancer join one
// by one, one leaves halfway; they commit after every poll with
// rebalances blocked meanwhile, and together consume every record exactly
// once. The group is a "consumer" group in ListGroups and
// ConsumerGroupDescribe, its offsets reach the end of every partition and
// survive a restart.
func TestKgo848GroupOfThree(t *testing.T) {
	for _, bal := range []struct {
		name     string
		balancer kgo.GroupBalancer
		assignor string
	}{{"range", kgo.RangeBalancer(), "range"}, {"sticky", kgo.StickyBalancer(), "uniform"}} {
		t.Run(bal.name, func(t *testing.T) {
			tc := startCluster(t)
			fast848(tc)
			const n = 600
			produceNumbered(t, tc.client(), "in", n)
			group := "g848-" + bal.name

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var mu sync.Mutex
			seen := map[string]int{}
			total := 0
			var wg sync.WaitGroup
			pollCtx, allSeen := context.WithCancel(ctx)
			defer allSeen()
			perMember := make([]int, 3)
			consume := func(i int, cl *kgo.Client, stopAt int) {
				defer wg.Done()
				if stopAt > 0 {
					// The leaving member leaves also when the others
					// consumed the rest while it waited in a poll (a
					// loaded machine): the group must have two members
					// when it is described.
					defer cl.Close()
				}
				for {
					fs := cl.PollRecords(pollCtx, 10) // few at a time, so every member gets work
					if pollCtx.Err() != nil {
						cl.AllowRebalance()
						return
					}
					mu.Lock()
					fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++; perMember[i]++ })
					done, leave := total >= n, stopAt > 0 && total >= stopAt
					mu.Unlock()
					if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
						t.Errorf("commit: %v", err)
					}
					cl.AllowRebalance()
					if done {
						allSeen()
						return
					}
					if leave {
						return // the deferred Close leaves the group (epoch -1)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			start := time.Now()
			for i := range 3 {
				opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"), kgo.BlockRebalanceOnPoll(),
					kgo.DisableAutoCommit(), kgo.ClientID(fmt.Sprintf("member-%d", i)),
					kgo.Balancers(bal.balancer), kgo.ServerSideBalancer()}
				cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.addrs[0])}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				stopAt := 0
				if i == 0 {
					stopAt = n / 2
				} else {
					t.Cleanup(cl.Close)
				}
				wg.Add(1)
				go consume(i, cl, stopAt)
				time.Sleep(300 * time.Millisecond)
			}
			wg.Wait()
			if total < n {
				t.Fatalf("consumed %d of %d records before the deadline", total, n)
			}
			t.Logf("3 members (one leaving) consumed %d records in %v, by member %v", n, time.Since(start), perMember)
			for i := range n {
				if c := seen[fmt.Sprint(i)]; c != 1 {
					t.Errorf("record %d consumed %d times", i, c)
				}
			}

			adm := kadm.NewClient(tc.client())
			listed, err := adm.ListGroups(ctx)
			if err != nil || listed[group].GroupType != "consumer" || listed[group].ProtocolType != "consumer" {
				t.Fatalf("ListGroups: %+v %v", listed, err)
			}
			described, err := adm.DescribeConsumerGroups(ctx, group)
			if err != nil {
				t.Fatalf("DescribeConsumerGroups: %v", err)
			}
			dg := described[group]
			if dg.Err != nil || dg.AssignorName != bal.assignor || len(dg.Members) != 2 {
				t.Fatalf("ConsumerGroupDescribe: %+v", dg)
			}
			// The admin API's view (txncoord groups describe) of the same
			// members: two, owning every partition of "in" once between
			// them. The leaver's partitions reach the others on their next
			// heartbeats, so the view is awaited (bounded) rather than
			// sampled once.
			var owned map[int32]int
			var ad groups.GroupDescription
			converged := func() bool {
				var ok bool
				ad, ok = tc.e.Coordinator.Groups.DescribeGroup(group)
				if !ok || ad.Type != "consumer" || len(ad.Members) != 2 {
					return false
				}
				owned = map[int32]int{}
				for _, m := range ad.Members {
					for _, tp := range m.Assignment {
						for _, p := range tp.Partitions {
							if tp.Topic == "in" {
								owned[p]++
							}
						}
					}
				}
				if len(owned) != 6 {
					return false
				}
				for _, k := range owned {
					if k != 1 {
						return false
					}
				}
				return true
			}
			for deadline := time.Now().Add(15 * time.Second); !converged(); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("admin DescribeGroup: %d members owning partitions of in %v, want 2 owning 0-5 once each: %+v", len(ad.Members), owned, ad)
				}
			}
			want := endOffsets(t, adm, "in")
			checkCommitted(ctx, t, adm, group, "in", want, "before the restart")
			allSeen()
			tc.stop()
			tc.start(nil)
			adm = kadm.NewClient(tc.client())
			checkCommitted(ctx, t, adm, group, "in", want, "after the restart")
		})
	}
}

// TestKgo848GroupTransactSession: three GroupTransactSessions with the
// server-side balancer (one joins late, one leaves halfway) move every
// input to the output exactly once, their offsets committed in their
// transactions (TxnOffsetCommit with the member epoch); the committed
// offsets are the inputs' end offsets at the end.
func TestKgo848GroupTransactSession(t *testing.T) {
	tc := startCluster(t)
	fast848(tc)
	const n = 300
	produceNumbered(t, tc.client(), "in", n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	moved := 0
	done, finish := context.WithCancel(ctx)
	defer finish()
	var wg sync.WaitGroup
	run := func(i int, stopAt int) {
		defer wg.Done()
		sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tc.addrs[0]), kgo.TransactionalID(fmt.Sprintf("eos848-%d", i)),
			kgo.ConsumerGroup("eos848"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.StickyBalancer()), kgo.ClientID(fmt.Sprintf("eos-%d", i)))
		if err != nil {
			t.Error(err)
			return
		}
		defer sess.Close()
		for {
			fs := sess.PollRecords(done, 20)
			if done.Err() != nil {
				return
			}
			if err := sess.Begin(); err != nil {
				t.Error(err)
				return
			}
			copyRecords(ctx, t, sess, fs)
			committed, err := sess.End(ctx, kgo.TryCommit)
			if err != nil {
				t.Errorf("end: %v", err)
				return
			}
			mu.Lock()
			if committed {
				moved += fs.NumRecords()
			}
			all, leave := moved >= n, stopAt > 0 && moved >= stopAt
			mu.Unlock()
			if all {
				finish()
				return
			}
			if leave {
				return // Close leaves the group
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := range 3 {
		stopAt := 0
		if i == 0 {
			stopAt = n / 2
		}
		wg.Add(1)
		go run(i, stopAt)
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	if moved < n {
		t.Fatalf("moved %d of %d before the deadline", moved, n)
	}
	reader := tc.client(kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	readCtx, readCancel := context.WithTimeout(ctx, 10*time.Second)
	defer readCancel()
	for readCtx.Err() == nil {
		fs := reader.PollFetches(readCtx)
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		if len(seen) >= n {
			// Read on a little: a duplicate would come after.
			more, cancel := context.WithTimeout(readCtx, 300*time.Millisecond)
			extra := reader.PollFetches(more)
			cancel()
			extra.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			if len(extra.Records()) == 0 {
				break
			}
		}
	}
	for i := range n {
		if c := seen[fmt.Sprint(i)]; c != 1 {
			t.Errorf("input %d is in the output %d times", i, c)
		}
	}
	adm := kadm.NewClient(tc.client())
	checkCommitted(ctx, t, adm, "eos848", "in", endOffsets(t, adm, "in"), "at the end")
	listed, err := adm.ListGroups(ctx)
	if err != nil || listed["eos848"].GroupType != "consumer" {
		t.Fatalf("ListGroups: %+v %v", listed, err)
	}
}
