package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/security"
)

// TestAdminGroupsOnEveryCoordinator: with three coordinators on etcd,
// each a process of its own with its own admin API, and security on (the
// coordinators ask each other with their inter-node credentials), the
// groups endpoints answer for the whole cluster on each: group A (a kgo
// consumer, Stable) and group B (offsets committed by kadm, Empty) are on
// the __consumer_offsets partitions of two different coordinators, group C
// (a KIP-848 kgo consumer) and share group D (a kgo share consumer) on
// another than B's; every
// admin API lists both with their owner, state and member count as kadm
// sees them; A described through the other process shows the members,
// assignment and committed offsets its own coordinator's admin API shows,
// and kadm's; C through B's coordinator as through its own (with its
// group epoch), and listed so; D listed through B's coordinator as
// through its own, and described by its own only (409 elsewhere); B's pending transactional offset is shown whole through its
// owner and, through the other, as the partition that has one (its offset
// and producer unknown: -1); deleting A there is refused (it has members), deleting B
// through A's coordinator deletes it at B's.
func TestAdminGroupsOnEveryCoordinator(t *testing.T) {
	f, lns, _, clusterPw := secureSeveralFile(t)
	coords, _ := startSeparateCoordinators(t, f, lns, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := cluster.NewView(f).OffsetsPartitions()

	// Every partition served by one coordinator, and every coordinator
	// agreeing on its owner.
	owners := map[int32]int32{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		clear(owners)
		for id, co := range coords {
			for p := range n {
				if co.groups.Of(p) != nil {
					owners[p] = id
				}
			}
		}
		agreed := int32(len(owners)) == n
		for _, co := range coords {
			for p, id := range owners {
				if node, _, ok := co.groups.OwnerOf(p); !ok || node != id {
					agreed = false
				}
			}
		}
		if agreed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinators do not agree on the owners of the %d __consumer_offsets partitions (%d served)", n, len(owners))
		}
	}
	groupOn := func(prefix string, not int32) (string, int32, int32) {
		for i := 0; ; i++ {
			g := fmt.Sprintf("%s-%d", prefix, i)
			p := cluster.OffsetsPartitionFor(g, n)
			if owners[p] != not {
				return g, p, owners[p]
			}
		}
	}
	groupA, partA, ownerA := groupOn("admin-a", -1)
	groupB, partB, ownerB := groupOn("admin-b", ownerA)
	groupC, partC, ownerC := groupOn("admin-c", ownerB)
	groupD, _, ownerD := groupOn("admin-d", ownerB)

	var seeds []string
	for _, c := range f.Coordinators {
		seeds = append(seeds, c.Addr)
	}
	sasl := kgo.SASL(scram.Auth{User: security.LocalClusterUser, Pass: clusterPw}.AsSha512Mechanism())
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), sasl)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for i := range 8 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), sasl, kgo.ConsumerGroup(groupA), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ClientID("admin-groups-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	consumeAndCommit(ctx, t, consumer, 8)
	// C, a KIP-848 consumer group, on another process than B's.
	consumer848, err := kgo.NewClient(kgo.SeedBrokers(seeds...), sasl, kgo.ConsumerGroup(groupC), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ServerSideBalancer())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer848.Close()
	consumeAndCommit(ctx, t, consumer848, 8)
	// D, a share group, on another process than B's.
	share, err := kgo.NewClient(kgo.SeedBrokers(seeds...), sasl, kgo.ShareGroup(groupD), kgo.ConsumeTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	shareCtx, stopShare := context.WithCancel(ctx)
	shareDone := make(chan struct{})
	go func() { // the member joins and heartbeats while it polls
		defer close(shareDone)
		for shareCtx.Err() == nil {
			share.PollFetches(shareCtx)
		}
	}()
	defer func() { stopShare(); <-shareDone; share.Close() }()
	if err := adm.CommitAllOffsets(ctx, groupB, kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 1, Offset: 0})); err != nil {
		t.Fatal(err)
	}

	const token = "groups-test-token"
	clients := map[int32]*admin.Client{}
	for id, co := range coords {
		srv, err := admin.Start("127.0.0.1:0", co.AdminBackend(), nil, admin.Auth{Token: token}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Shutdown(context.Background()) })
		clients[id] = admin.NewClientWithToken(srv.URL(), token)
	}

	// kadm's view of both groups: state, members, committed offsets.
	described, err := adm.DescribeGroups(ctx, groupA, groupB)
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := adm.FetchOffsets(ctx, groupA)
	if err != nil {
		t.Fatal(err)
	}
	kafkaOffsets := map[admin.TopicPartition]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		kafkaOffsets[admin.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.At
	})
	if len(kafkaOffsets) == 0 {
		t.Fatalf("kadm fetches no offsets of %s", groupA)
	}

	for id, c := range clients {
		gs, err := c.Groups(ctx)
		if err != nil {
			t.Fatalf("list through coordinator %d: %v", id, err)
		}
		byName := map[string]admin.GroupSummary{}
		for _, g := range gs {
			byName[g.Group] = g
		}
		for _, want := range []struct {
			group       string
			owner, part int32
		}{{groupA, ownerA, partA}, {groupB, ownerB, partB}} {
			g, ok := byName[want.group]
			k := described[want.group]
			if !ok || g.Coordinator != want.owner || g.OffsetsPartition != want.part || g.Type != "classic" ||
				g.State != k.State || g.MemberCount != len(k.Members) || g.Protocol != k.Protocol {
				t.Fatalf("coordinator %d lists %+v for %s (owner %d, partition %d; kadm: state %s, %d members, protocol %q)",
					id, g, want.group, want.owner, want.part, k.State, len(k.Members), k.Protocol)
			}
		}
	}
	if k := described[groupA]; k.State != "Stable" || len(k.Members) != 1 {
		t.Fatalf("kadm describes %s as %s with %d members, want Stable with one", groupA, k.State, len(k.Members))
	}

	local, err := clients[ownerA].Group(ctx, groupA)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := clients[ownerB].Group(ctx, groupA)
	if err != nil {
		t.Fatalf("describe %s through coordinator %d: %v", groupA, ownerB, err)
	}
	if remote.Generation != -1 || local.Generation < 1 {
		t.Fatalf("generation %d through the owner, %d through another process (-1: DescribeGroups does not carry it)", local.Generation, remote.Generation)
	}
	// Besides the generation and the leader, which no Kafka API carries,
	// the other process describes the group as its owner does.
	strip := func(d admin.GroupDetail) admin.GroupDetail {
		d.Generation, d.Leader = 0, ""
		return d
	}
	if l, r := fmt.Sprintf("%+v", strip(local)), fmt.Sprintf("%+v", strip(remote)); l != r {
		t.Fatalf("described through its owner %d:\n%s\nthrough coordinator %d:\n%s", ownerA, l, ownerB, r)
	}
	// C through B's coordinator: as its owner describes it (the group
	// epoch is ConsumerGroupDescribe's), once it is Stable there.
	var localC admin.GroupDetail
	for deadline := time.Now().Add(30 * time.Second); localC.State != "Stable"; time.Sleep(100 * time.Millisecond) {
		if localC, err = clients[ownerC].Group(ctx, groupC); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %+v at its owner, not Stable", groupC, localC)
		}
	}
	remoteC, err := clients[ownerB].Group(ctx, groupC)
	if err != nil {
		t.Fatalf("describe %s through coordinator %d: %v", groupC, ownerB, err)
	}
	if l, r := fmt.Sprintf("%+v", localC), fmt.Sprintf("%+v", remoteC); l != r || remoteC.Type != "consumer" || remoteC.Coordinator != ownerC || remoteC.OffsetsPartition != partC ||
		len(remoteC.Members) != 1 || len(remoteC.Members[0].Assignment) != 4 || len(remoteC.Offsets) != 4 {
		t.Fatalf("%s described through its owner %d:\n%s\nthrough coordinator %d:\n%s", groupC, ownerC, l, ownerB, r)
	}
	listedC, err := clients[ownerB].Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(listedC, func(g admin.GroupSummary) bool { return g.Group == groupC }); i < 0 || listedC[i] != remoteC.GroupSummary {
		t.Fatalf("coordinator %d lists %+v, describes %s as %+v", ownerB, listedC, groupC, remoteC.GroupSummary)
	}

	// D through B's coordinator: listed as its owner lists it; described
	// by its owner only (its share partitions have no Kafka API that
	// shows them as the admin API does).
	var listedD []admin.GroupSummary
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if listedD, err = clients[ownerD].Groups(ctx); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(listedD, func(g admin.GroupSummary) bool { return g.Group == groupD })
		if i >= 0 && listedD[i].MemberCount == 1 && listedD[i].State == "Stable" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group %s is not Stable with one member at its owner: %+v", groupD, listedD)
		}
	}
	if listedC, err = clients[ownerB].Groups(ctx); err != nil {
		t.Fatal(err)
	}
	i, j := slices.IndexFunc(listedD, func(g admin.GroupSummary) bool { return g.Group == groupD }),
		slices.IndexFunc(listedC, func(g admin.GroupSummary) bool { return g.Group == groupD })
	if i < 0 || j < 0 || listedD[i] != listedC[j] || listedC[j].Type != "share" || listedC[j].MemberCount != 1 || listedC[j].Coordinator != ownerD {
		t.Fatalf("%s listed by its owner %d: %+v; by coordinator %d: %+v", groupD, ownerD, listedD, ownerB, listedC)
	}
	if _, err := clients[ownerD].Group(ctx, groupD); err != nil {
		t.Fatalf("describe %s through its owner: %v", groupD, err)
	}
	var conflict *admin.APIError
	if _, err := clients[ownerB].Group(ctx, groupD); !errors.As(err, &conflict) || conflict.Status != http.StatusConflict {
		t.Fatalf("describe share group %s through coordinator %d: %v, want 409", groupD, ownerB, err)
	}

	km := described[groupA].Members[0]
	if m := remote.Members; len(m) != 1 || m[0].MemberID != km.MemberID || m[0].ClientID != "admin-groups-test" || len(m[0].Assignment) != 4 {
		t.Fatalf("members %+v, kadm's member %s", m, km.MemberID)
	}
	committed := 0
	for _, o := range remote.Offsets {
		if o.CurrentOffset < 0 {
			continue
		}
		committed++
		if want, ok := kafkaOffsets[admin.TopicPartition{Topic: o.Topic, Partition: o.Partition}]; !ok || o.CurrentOffset != want || o.MemberID != km.MemberID {
			t.Fatalf("offset %+v, kadm fetches %d (%v)", o, want, ok)
		}
	}
	if committed != len(kafkaOffsets) {
		t.Fatalf("%d committed offsets described, kadm fetches %d", committed, len(kafkaOffsets))
	}

	// A transactional offset of B, pending until its transaction ends:
	// its owner shows it whole; another process knows from OffsetFetch
	// with RequireStable only which partition has one.
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), sasl, kgo.TransactionalID("admin-groups-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("pending")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := producer.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "admin-groups-txn", pid, epoch, groupB
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = "admin-groups-txn", groupB, pid, epoch
	commit.Generation = -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "orders"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 2, 5, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if resp, err := commit.RequestWith(ctx, cl); err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
	}
	atOwner, err := clients[ownerB].Group(ctx, groupB)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := clients[ownerA].Group(ctx, groupB)
	if err != nil {
		t.Fatalf("describe %s through coordinator %d: %v", groupB, ownerA, err)
	}
	wantOwner := admin.PendingOffset{Group: groupB, Topic: "orders", Partition: 2, Offset: 5, ProducerID: pid, ProducerEpoch: epoch}
	wantElsewhere := admin.PendingOffset{Group: groupB, Topic: "orders", Partition: 2, Offset: -1, ProducerID: -1, ProducerEpoch: -1}
	if len(atOwner.Pending) != 1 || atOwner.Pending[0] != wantOwner || len(elsewhere.Pending) != 1 || elsewhere.Pending[0] != wantElsewhere {
		t.Fatalf("pending offsets through the owner %+v, through coordinator %d %+v", atOwner.Pending, ownerA, elsewhere.Pending)
	}
	if !slices.Equal(atOwner.Offsets, elsewhere.Offsets) || len(elsewhere.Offsets) != 1 || elsewhere.Offsets[0].CurrentOffset != 1 {
		t.Fatalf("committed offsets through the owner %+v, through coordinator %d %+v", atOwner.Offsets, ownerA, elsewhere.Offsets)
	}
	if err := producer.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	// The abort returns once it is durable, before its marker reaches
	// groupB's coordinator; until then the pending offset keeps the group
	// (DeleteGroup empties it but leaves it listed, as Kafka does).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		g, err := clients[ownerB].Group(ctx, groupB)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds pending offsets 10 s after the abort: %+v", groupB, g.Pending)
		}
	}

	var apiErr *admin.APIError
	if err := clients[ownerB].DeleteGroup(ctx, groupA); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("delete %s (a member) through coordinator %d: %v, want 409", groupA, ownerB, err)
	}
	if err := clients[ownerA].DeleteGroup(ctx, groupB); err != nil {
		t.Fatalf("delete %s through coordinator %d: %v", groupB, ownerA, err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := listed.Groups(); !slices.Contains(names, groupA) || slices.Contains(names, groupB) {
		t.Fatalf("kadm lists %v after %s's deletion", names, groupB)
	}
	if _, err := clients[ownerA].Group(ctx, groupB); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("describe the deleted %s through coordinator %d: %v, want 404", groupB, ownerA, err)
	}
}

// consumeAndCommit polls n records with cl, a group's member, and commits
// their offsets.
func consumeAndCommit(ctx context.Context, t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
}
