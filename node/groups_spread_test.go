package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
)

// waitGroupPartitionsServed waits until every __consumer_offsets
// partition has an instance open on one running coordinator, and returns
// each partition's coordinator.
func waitGroupPartitionsServed(t *testing.T, e *Embedded) map[int32]*Coordinator {
	t.Helper()
	n := e.View.OffsetsPartitions()
	deadline := time.Now().Add(20 * time.Second)
	for {
		served := map[int32]*Coordinator{}
		for _, co := range e.Coordinators {
			for p := range n {
				if co.groups.Of(p) != nil {
					served[p] = co
				}
			}
		}
		if int32(len(served)) == n {
			return served
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinators serve the groups of %d of %d __consumer_offsets partitions", len(served), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// brokerSeeds is every node's address: a client's seeds that survive the
// stop of any one coordinator.
func brokerSeeds(e *Embedded) []string {
	var seeds []string
	for _, b := range e.View.Brokers() {
		seeds = append(seeds, b.Addr)
	}
	return seeds
}

// seededClient is a kgo client of every node (brokerSeeds) and a context
// of a minute, both ended with the test.
func seededClient(t *testing.T, e *Embedded) (context.Context, *kgo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokerSeeds(e)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return ctx, cl
}

// waitPartitionMoved waits until a coordinator other than from serves
// the groups of __consumer_offsets partition p, and returns it.
func waitPartitionMoved(t *testing.T, e *Embedded, p, from int32) *Coordinator {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, co := range e.Coordinators {
			if co.Node.NodeID != from && co.groups.Of(p) != nil {
				return co
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator took partition %d over from coordinator %d", p, from)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGroupsSpreadOverCoordinators: with three coordinators on etcd each
// __consumer_offsets partition is owned by one of them, and a group's
// coordinator is its partition's owner. Group ids hashed to partitions
// of every coordinator get FindCoordinator answers naming all three, each
// the leader Metadata names for the group's partition. Two kgo consumer
// groups, A and B, on different coordinators, consume "orders" and commit
// offsets; A's coordinator stops mid-consumption. B's instance is the
// same before and after (its partition keeps its epoch) and every offset
// commit of B during A's takeover succeeds; A's partition moves, and a
// new consumer of A resumes at A's committed offsets, loaded from etcd by
// the new owner.
func TestGroupsSpreadOverCoordinators(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	served := waitGroupPartitionsServed(t, e)
	n := e.View.OffsetsPartitions()
	ownerOf := func(g string) int32 { return served[cluster.OffsetsPartitionFor(g, n)].Node.NodeID }

	// One group per coordinator, by hashing.
	byOwner := map[int32]string{}
	for i := 0; len(byOwner) < 3 && i < 1000; i++ {
		g := fmt.Sprintf("spread-%d", i)
		if _, ok := byOwner[ownerOf(g)]; !ok {
			byOwner[ownerOf(g)] = g
		}
	}
	if len(byOwner) != 3 {
		t.Fatalf("the groups of 1000 ids are on %d coordinators, want 3", len(byOwner))
	}

	seeds := brokerSeeds(e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	// FindCoordinator names each group's owner, the leader Metadata
	// names for its partition.
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType = 0
	for _, g := range byOwner {
		find.CoordinatorKeys = append(find.CoordinatorKeys, g)
	}
	fresp, err := find.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(cluster.OffsetsTopic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int32{}
	for _, tp := range mresp.Topics {
		for _, p := range tp.Partitions {
			leaders[p.Partition] = p.Leader
		}
	}
	answered := map[int32]bool{}
	for _, c := range fresp.Coordinators {
		p := cluster.OffsetsPartitionFor(c.Key, n)
		if c.ErrorCode != 0 || c.NodeID != ownerOf(c.Key) || c.NodeID != leaders[p] {
			t.Errorf("group %s (partition %d): FindCoordinator names %d (error %d), its owner is %d, Metadata's leader %d",
				c.Key, p, c.NodeID, c.ErrorCode, ownerOf(c.Key), leaders[p])
		}
		answered[c.NodeID] = true
	}
	if len(answered) != 3 {
		t.Errorf("FindCoordinator named %d coordinators for groups of three, want 3", len(answered))
	}

	// A on one coordinator, B on another; neither on the controller
	// (node 0 runs the embedded cluster's admin and bootstrap).
	var groupA, groupB string
	var ownerA, ownerB int32 = 1, 2
	groupA, groupB = byOwner[ownerA], byOwner[ownerB]

	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produce := func(k int) {
		t.Helper()
		for i := range k {
			producer.Produce(ctx, &kgo.Record{Value: fmt.Append(nil, i)}, nil)
		}
		if err := producer.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(200)
	consumer := func(group string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	// consumeCommit polls until it consumed at least k records, committing
	// each poll's records.
	consumeCommit := func(cl *kgo.Client, k int) (first map[int32]int64) {
		first = map[int32]int64{}
		got := 0
		for got < k && ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 50)
			fs.EachRecord(func(r *kgo.Record) {
				if _, ok := first[r.Partition]; !ok {
					first[r.Partition] = r.Offset
				}
			})
			got += fs.NumRecords()
			if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
				t.Errorf("commit: %v", err)
			}
		}
		return first
	}

	a := consumer(groupA)
	consumeCommit(a, 100)
	adm := kadm.NewClient(admin)
	committedA, err := adm.FetchOffsets(ctx, groupA)
	if err != nil || committedA.Error() != nil {
		t.Fatalf("A's offsets: %v %v", err, committedA.Error())
	}
	a.Close() // A leaves mid-topic, its offsets committed

	b := consumer(groupB)
	defer b.Close()
	consumeCommit(b, 10)
	pB := cluster.OffsetsPartitionFor(groupB, n)
	instanceB := e.coordinatorByID(ownerB).groups.Of(pB)
	_, epochB, _ := e.coordinatorByID(ownerB).groups.OwnerOf(pB)
	if instanceB == nil {
		t.Fatalf("coordinator %d does not serve B's partition %d", ownerB, pB)
	}

	// B commits throughout A's takeover.
	var bMu sync.Mutex
	bCommits, bFailed := 0, 0
	stopB := make(chan struct{})
	var bWG sync.WaitGroup
	bWG.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopB:
				return
			default:
			}
			// A commit of B's member, in its generation.
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group = groupB
			req.MemberID, req.Generation = b.GroupMetadata()
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "orders"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, int64(i)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, b)
			bMu.Lock()
			switch {
			case err != nil:
				bFailed++
				t.Logf("B's commit %d: %v", i, err)
			case resp.Topics[0].Partitions[0].ErrorCode != 0:
				bFailed++
				t.Logf("B's commit %d: %v", i, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
			default:
				bCommits++
			}
			bMu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})

	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	if err := e.killCoordinator(stopCtx, ownerA); err != nil {
		t.Fatal(err)
	}
	stopCancel()
	var rest []*Coordinator
	for _, co := range e.Coordinators {
		if co.Node.NodeID != ownerA {
			rest = append(rest, co)
		}
	}
	e.Coordinators = rest

	// A resumes on the new owner of its partition, at its committed
	// offsets.
	a2 := consumer(groupA)
	defer a2.Close()
	first := consumeCommit(a2, 50)
	close(stopB)
	bWG.Wait()
	committedA.Each(func(o kadm.OffsetResponse) {
		if f, ok := first[o.Partition]; ok && f != o.At {
			t.Errorf("A resumed orders/%d at %d, its committed offset is %d", o.Partition, f, o.At)
		}
	})
	if len(first) == 0 {
		t.Error("A's new consumer consumed nothing")
	}
	pA := cluster.OffsetsPartitionFor(groupA, n)
	if newOwner, _, ok := e.Coordinators[0].groups.OwnerOf(pA); !ok || newOwner == ownerA {
		t.Errorf("A's partition %d owned by %d (%v) after its owner stopped", pA, newOwner, ok)
	}

	// B never paused: the same instance, the same epoch, and every
	// commit during the takeover answered without error.
	if got := e.coordinatorByID(ownerB).groups.Of(pB); got != instanceB {
		t.Errorf("B's partition %d: instance %p after A's takeover, %p before", pB, got, instanceB)
	}
	if _, epoch, _ := e.coordinatorByID(ownerB).groups.OwnerOf(pB); epoch != epochB {
		t.Errorf("B's partition %d: epoch %d after A's takeover, %d before", pB, epoch, epochB)
	}
	bMu.Lock()
	defer bMu.Unlock()
	if bFailed > 0 || bCommits == 0 {
		t.Errorf("B's commits during A's takeover: %d answered, %d failed", bCommits, bFailed)
	}
	t.Logf("groups A=%s on %d, B=%s on %d; B committed %d times during A's takeover", groupA, ownerA, groupB, ownerB, bCommits)
}

// TestGroupsSpreadBatchedRequests: requests naming groups of several
// __consumer_offsets partitions are split by partition. kadm batches the
// groups of one coordinator into one OffsetFetch and one DescribeGroups:
// with two groups on each of three coordinators (different partitions),
// every group's committed offset and description comes back. A
// DescribeGroups sent to one coordinator for a group of its own and a
// group of another gets the first described and NOT_COORDINATOR for the
// second.
func TestGroupsSpreadBatchedRequests(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	served := waitGroupPartitionsServed(t, e)
	n := e.View.OffsetsPartitions()
	byOwner := map[int32][]string{}
	usedPartition := map[int32]bool{}
	for i := 0; i < 1000; i++ {
		g := fmt.Sprintf("batched-%d", i)
		p := cluster.OffsetsPartitionFor(g, n)
		owner := served[p].Node.NodeID
		if len(byOwner[owner]) < 2 && !usedPartition[p] {
			usedPartition[p] = true
			byOwner[owner] = append(byOwner[owner], g)
		}
	}
	var all []string
	for owner := range int32(3) {
		if len(byOwner[owner]) != 2 {
			t.Fatalf("coordinator %d: groups %v, want two of different partitions", owner, byOwner[owner])
		}
		all = append(all, byOwner[owner]...)
	}

	ctx, cl := seededClient(t, e)
	adm := kadm.NewClient(cl)
	for i, g := range all {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: int64(10 + i), LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, g, os)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit for %s: %v %v", g, err, resp.Error())
		}
	}
	fetched := adm.FetchManyOffsets(ctx, all...)
	for i, g := range all {
		r, ok := fetched[g]
		if !ok || r.Err != nil {
			t.Errorf("OffsetFetch of %s: %+v", g, r)
			continue
		}
		if o, ok := r.Fetched.Lookup("orders", 0); !ok || o.At != int64(10+i) {
			t.Errorf("OffsetFetch of %s: orders/0 at %+v (%v), want %d", g, o, ok, 10+i)
		}
	}
	described, err := adm.DescribeGroups(ctx, all...)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range all {
		if d, ok := described[g]; !ok || d.Err != nil {
			t.Errorf("DescribeGroups of %s: %+v", g, d)
		}
	}

	// One coordinator asked for its group and another's.
	own, other := byOwner[1][0], byOwner[2][0]
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{own, other}
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, g := range resp.Groups {
		codes[g.Group] = g.ErrorCode
	}
	if len(resp.Groups) != 2 || codes[own] != 0 || codes[other] != kerr.NotCoordinator.Code {
		t.Errorf("DescribeGroups at coordinator 1 of %s (its own) and %s (coordinator 2's): %v, want 0 and NOT_COORDINATOR", own, other, codes)
	}
}

// TestGroupsZombieOwnerRefused: the owner of a group's partition stops
// renewing its leases (as a paused process would) while it still answers
// on its Kafka address. Another coordinator takes the partition over and
// loads the group's offsets; an offset commit sent to the former owner
// afterwards is refused, and the new owner still has the offset committed
// before the takeover. (TestPartitionsFencedApart in groupsetcd shows the
// etcd fence refusing such a write when the former owner has not noticed
// yet.)
func TestGroupsZombieOwnerRefused(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	served := waitGroupPartitionsServed(t, e)
	n := e.View.OffsetsPartitions()
	const zombie = int32(2)
	var group string
	for i := 0; group == "" && i < 1000; i++ {
		if g := fmt.Sprintf("zombie-%d", i); served[cluster.OffsetsPartitionFor(g, n)].Node.NodeID == zombie {
			group = g
		}
	}
	if group == "" {
		t.Fatalf("no group of 1000 ids on coordinator %d", zombie)
	}
	p := cluster.OffsetsPartitionFor(group, n)
	ctx, cl := seededClient(t, e)
	adm := kadm.NewClient(cl)
	commitAt := func(offset int64) {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: offset, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
			t.Fatalf("commit %d: %v %v", offset, err, resp.Error())
		}
	}
	commitAt(5)

	co := e.coordinatorByID(zombie)
	_, epoch, _ := co.groups.OwnerOf(p)
	co.PauseLeases(true)
	defer co.PauseLeases(false)
	next := waitPartitionMoved(t, e, p, zombie)
	if _, e2, _ := next.groups.OwnerOf(p); e2 <= epoch {
		t.Errorf("partition %d taken over at epoch %d, the former owner's was %d", p, e2, epoch)
	}

	// The former owner's address still answers: a commit sent there is
	// refused.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 99
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(zombie)))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code == 0 {
		t.Error("the former owner accepted an offset commit after the takeover")
	} else {
		t.Logf("the former owner answered %v", kerr.ErrorForCode(code))
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("orders", 0); !ok || o.At != 5 {
		t.Errorf("the new owner's offset of orders/0: %+v (%v), want 5, committed before the takeover", o, ok)
	}
}

// TestGroupsMarkersFollowPartitionOwner: WriteTxnMarkers for
// __consumer_offsets partitions are answered by each partition's owner.
// One request to coordinator 1 naming a partition it owns and one that
// coordinator 2 owns gets the first accepted and NOT_LEADER_OR_FOLLOWER
// for the second (DescribeProducers likewise). Coordinator 1 then stops: the new owner of its
// partition loaded the producer's state from etcd, so a marker of an
// older coordinator epoch (a former transaction coordinator's) is fenced
// with TRANSACTION_COORDINATOR_FENCED, and one of a newer epoch accepted.
func TestGroupsMarkersFollowPartitionOwner(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	served := waitGroupPartitionsServed(t, e)
	n := e.View.OffsetsPartitions()
	ownedBy := func(node int32) int32 {
		for p := range n {
			if served[p].Node.NodeID == node {
				return p
			}
		}
		t.Fatalf("coordinator %d owns no __consumer_offsets partition", node)
		return -1
	}
	p, q := ownedBy(1), ownedBy(2)
	ctx, cl := seededClient(t, e)
	const producerID = 4242
	marker := func(to int32, coordinatorEpoch int32, partitions ...int32) map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 1
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = producerID, 1, true, coordinatorEpoch
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = cluster.OffsetsTopic, partitions
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, cl.Broker(int(to)))
		if err != nil {
			t.Fatal(err)
		}
		codes := map[int32]int16{}
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					codes[rp.Partition] = rp.ErrorCode
				}
			}
		}
		return codes
	}
	if got := marker(1, 7, p, q); len(got) != 2 || got[p] != 0 || got[q] != kerr.NotLeaderForPartition.Code {
		t.Fatalf("markers at coordinator 1 for its partition %d and coordinator 2's %d: %v, want 0 and NOT_LEADER_OR_FOLLOWER", p, q, got)
	}
	// DescribeProducers is split the same way: the producer is known at
	// its partition's owner.
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = cluster.OffsetsTopic, []int32{p, q}
	dreq.Topics = append(dreq.Topics, dt)
	dresp, err := dreq.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	described := map[int32]string{}
	for _, rt := range dresp.Topics {
		for _, rp := range rt.Partitions {
			described[rp.Partition] = fmt.Sprintf("code %d, %d producers", rp.ErrorCode, len(rp.ActiveProducers))
		}
	}
	if want := map[int32]string{p: "code 0, 1 producers", q: fmt.Sprintf("code %d, 0 producers", kerr.NotLeaderForPartition.Code)}; fmt.Sprint(described) != fmt.Sprint(want) {
		t.Errorf("DescribeProducers at coordinator 1 of partitions %d and %d: %v, want %v", p, q, described, want)
	}

	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	if err := e.killCoordinator(stopCtx, 1); err != nil {
		t.Fatal(err)
	}
	stopCancel()
	next := waitPartitionMoved(t, e, p, 1).Node.NodeID
	if got := marker(next, 3, p); got[p] != kerr.TransactionCoordinatorFenced.Code {
		t.Errorf("a marker of coordinator epoch 3 after one of 7, at partition %d's new owner %d: %v, want TRANSACTION_COORDINATOR_FENCED", p, next, got)
	}
	if got := marker(next, 8, p); got[p] != 0 {
		t.Errorf("a marker of coordinator epoch 8 at partition %d's new owner %d: %v, want accepted", p, next, got)
	}
}
