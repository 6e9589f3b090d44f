package integration

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScaleoutShareGroupSurvivesSIGKILL: a share group in the etcd mode
// (three coordinator processes, the group on the owner of its
// __consumer_offsets partition with its state in etcd; three leader
// processes). Three kgo share members consume; halfway, the owner (the
// holder) is SIGKILLed. The partition moves, the new holder loads the group from etcd and serves the members (their
// leaves at the end reach it: it describes the group empty at a higher
// epoch), and the consumption finishes: every record delivered, a record
// delivered again
// only at a higher delivery count and never after its acceptance was
// acknowledged (Kafka's at-least-once), and the group's share-partition
// start offsets, read through the new holder from the leader processes,
// at the end of every partition.
func TestScaleoutShareGroupSurvivesSIGKILL(t *testing.T) {
	const topic, group, n = "scale-shares", "scale-share-group", 600
	sc := startScaleCluster(t, scaleConfig{Topics: map[string]int32{topic: 3}, LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 3*time.Minute)
	seeds := sc.Bootstrap()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	setShareConfigs(ctx, t, cl, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "20000")
	var leaders []int32
	for _, l := range sc.file.Leaders {
		leaders = append(leaders, l.NodeID)
	}
	waitLeadersApply(ctx, t, cl, leaders, group, 20000)
	produceNumbered(ctx, t, cl, n)
	adm := kadm.NewClient(cl)

	// Halfway, the holder is SIGKILLed; the members go on.
	var holder int32 = -1
	var before kadm.DescribedShareGroup
	var killed time.Time
	got := consumeShare(ctx, t, seeds, group, topic, 3, n, func() {
		holder = sc.groupCoordinatorAt(ctx, sc.file.Leaders[0].NodeID, group)
		ds, err := adm.DescribeShareGroups(ctx, group)
		if err != nil || ds[group].Err != nil {
			t.Errorf("describe before the SIGKILL: %v %v", err, ds[group].Err)
		}
		before = ds[group]
		killed = sc.KillCoordinator(holder)
	})
	t.Logf("holder %d SIGKILLed halfway (group epoch %d, %d members); consumption done %v after",
		holder, before.GroupEpoch, len(before.Members), time.Since(killed).Round(time.Millisecond))
	if holder < 0 || holder >= scaleCoordinators {
		t.Fatalf("the group coordinator was on node %d, want a coordinator", holder)
	}
	if len(before.Members) != 3 {
		t.Errorf("%d members before the SIGKILL, want 3", len(before.Members))
	}

	// The members left through the new holder, which had loaded the
	// group from etcd: it describes the group empty, its epoch moved on
	// by their leaves. A new client each time: kgo keeps a coordinator it
	// cannot dial in its cache, and an answer given before the lease
	// moved names the dead holder.
	var after kadm.DescribedShareGroup
	deadline := time.Now().Add(30 * time.Second)
	for {
		fresh, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		ds, err := kadm.NewClient(fresh).DescribeShareGroups(ctx, group)
		fresh.Close()
		if err == nil && ds[group].Err == nil {
			after = ds[group]
			if after.Coordinator.NodeID != holder && len(after.Members) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the SIGKILL of %d the group is %+v (%v)", holder, after, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if after.GroupEpoch <= before.GroupEpoch || after.GroupState != "Empty" {
		t.Errorf("at the new holder the group is %s at epoch %d; before the SIGKILL epoch %d: want Empty at a higher epoch",
			after.GroupState, after.GroupEpoch, before.GroupEpoch)
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()

	counts := map[string][]int32{}
	for _, d := range got {
		counts[d.value] = append(counts[d.value], d.count)
	}
	again := 0
	for i := range n {
		cs := counts[strconv.Itoa(i)]
		if len(cs) == 0 {
			t.Errorf("record %d never delivered", i)
			continue
		}
		slices.Sort(cs)
		if len(slices.Compact(slices.Clone(cs))) != len(cs) {
			t.Errorf("record %d delivered twice at the same delivery count: %v", i, cs)
		}
		again += len(cs) - 1
	}
	t.Logf("%d deliveries of %d records: %d redeliveries", len(got), n, again)

	// Every acknowledgement is in the share-partition start offsets, read
	// by the new holder from the leader processes once the group is empty.
	adm = kadm.NewClient(cl2)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		// A fresh client each time: kgo keeps dialing a group
		// coordinator it learned before the SIGKILL for a while.
		fresh, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		ds, err := kadm.NewClient(fresh).DescribeShareGroupOffsets(ctx, group)
		fresh.Close()
		if err == nil {
			err = ds.Error()
		}
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("DescribeShareGroupOffsets after the SIGKILL: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		described := ds[group].Offsets
		var wrong []string
		for p := range int32(3) {
			end, _ := ends.Lookup(topic, p)
			if o, ok := described.Lookup(topic, p); !ok || o.StartOffset != end.Offset {
				wrong = append(wrong, topic+"/"+strconv.Itoa(int(p))+" start "+strconv.FormatInt(o.StartOffset, 10)+" end "+strconv.FormatInt(end.Offset, 10))
			}
		}
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share-partition start offsets not at the ends: %v", wrong)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sc.StartCoordinator(holder)
}
