package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// combinedClient is a kgo client of the cluster at bootstrap, closed when
// the test ends.
func combinedClient(t *testing.T, bootstrap string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createAssigned creates topic with a manual assignment (CreateTopics v7,
// replication factor and partitions -1) and returns the topic's answer.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, assignment [][]int32) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0]
}

// placement is topic's partitions as Metadata lists them at bootstrap:
// each partition's leader, replicas and ISR.
func placement(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) []kmsg.MetadataResponseTopicPartition {
	t.Helper()
	resp, err := metadataOf(topic).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata of %s: %+v", topic, resp.Topics)
	}
	ps := resp.Topics[0].Partitions
	slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	return ps
}

// consumeCommitted reads topic's partitions from the start, read_committed,
// until want records arrived, then checks for a moment that no more come;
// it returns the values by partition.
func consumeCommitted(t *testing.T, bootstrap, topic string, partitions int32, want int) map[int32][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := combinedClient(t, bootstrap, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	got := map[int32][]string{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records of %s: %v", n, want, topic, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	quiet, cancelQuiet := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelQuiet()
	cl.PollFetches(quiet).EachRecord(func(r *kgo.Record) {
		got[r.Partition] = append(got[r.Partition], string(r.Value))
		n++
	})
	if n != want {
		t.Fatalf("read %d committed records of %s, want %d: %v", n, topic, want, got)
	}
	return got
}

// With one coordinator the coordinator node is a combined node: every
// broker Metadata lists can lead. kadm's CreateTopics with a replication
// factor of every broker succeeds and reports it (the leader alone in the
// ISR); the topic is produced to and consumed. A larger factor, or a
// manual assignment naming an unknown broker or one broker twice, is
// refused with Kafka's codes.
func TestCombinedNodeReplicationFactor(t *testing.T) {
	_, e := startTwoLeaders(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := combinedClient(t, e.Bootstrap(), kgo.DefaultProduceTopic("rf-all"))
	replicateEverywhere(ctx, t, cl, 3, 1)
	for i := range 8 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumeCommitted(t, e.Bootstrap(), "rf-all", 4, 8)

	for _, bad := range [][][]int32{{{0}, {9}}, {{1, 1}}, {{0, 1}, {2}}, {{}}} {
		if rt := createAssigned(ctx, t, cl, "bad-assignment", bad); rt.ErrorCode != kerr.InvalidReplicaAssignment.Code {
			t.Fatalf("assignment %v: error %d (%v), want INVALID_REPLICA_ASSIGNMENT", bad, rt.ErrorCode, rt.ErrorMessage)
		}
	}
}

// A manual assignment putting partition 0 on the coordinator node and
// partition 1 on a leader is accepted, and Metadata names those leaders;
// kgo's TV2 transactions write both partitions, one commits and one
// aborts, and read_committed sees the committed records only. The
// coordinator node's partition keeps them across a restart of `up`.
func TestCombinedNodeManualAssignment(t *testing.T) {
	dir := t.TempDir()
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := combinedClient(t, e.Bootstrap())
	if rt := createAssigned(ctx, t, admin, "placed", [][]int32{{0, 2}, {1, 0}}); rt.ErrorCode != 0 || rt.NumPartitions != 2 || rt.ReplicationFactor != 2 {
		t.Fatalf("CreateTopics with an assignment: error %d (%v), %d partitions, replication factor %d", rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions, rt.ReplicationFactor)
	}
	check := func() {
		t.Helper()
		ps := placement(ctx, t, admin, "placed")
		if len(ps) != 2 || ps[0].Leader != 0 || !slices.Equal(ps[0].Replicas, []int32{0, 2}) || ps[1].Leader != 1 || !slices.Equal(ps[1].Replicas, []int32{1, 0}) {
			t.Fatalf("Metadata of placed: %+v, want partition 0 led by 0 ([0 2]) and 1 by 1 ([1 0])", ps)
		}
	}
	check()

	producer := combinedClient(t, e.Bootstrap(), kgo.TransactionalID("placed-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	write := func(commit bool, tag string) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			for i := range 3 {
				rec := &kgo.Record{Topic: "placed", Partition: p, Value: fmt.Appendf(nil, "%s-p%d-%d", tag, p, i)}
				if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
					t.Fatalf("%s, partition %d: %v", tag, p, err)
				}
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %s: %v", tag, err)
		}
	}
	write(true, "committed")
	write(false, "aborted")
	write(true, "again")
	offsetsWithRecords(ctx, t, producer, admin)
	want := map[int32][]string{}
	for p := range int32(2) {
		for _, tag := range []string{"committed", "again"} {
			for i := range 3 {
				want[p] = append(want[p], fmt.Sprintf("%s-p%d-%d", tag, p, i))
			}
		}
	}
	want[0] = append(want[0], "with-offsets")
	same := func(got map[int32][]string) {
		t.Helper()
		for p := range int32(2) {
			if !slices.Equal(got[p], want[p]) {
				t.Fatalf("partition %d read_committed: %v, want %v", p, got[p], want[p])
			}
		}
	}
	same(consumeCommitted(t, e.Bootstrap(), "placed", 2, 13))
	describeBoth(ctx, t, admin, producer, e.View.OffsetsPartitions())
	if _, ok := e.Coordinator.Partitions.HeldTopics()["placed"]; !ok {
		t.Fatal("the coordinator node holds no data of placed: partition 0 was not written there")
	}
	producer.Close()
	admin.Close()
	stopWithin(t, e.Stop)

	f2, lns2 := twoLeaderFileAt(t, f)
	e, err = StartEmbedded(EmbeddedConfig{File: f2, DataDir: dir, Listeners: lns2, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, e.Stop)
	admin = combinedClient(t, e.Bootstrap())
	check()
	same(consumeCommitted(t, e.Bootstrap(), "placed", 2, 13))
}

// offsetsWithRecords runs one transaction that writes the coordinator
// node's partition 0 of placed and commits a group offset
// (AddOffsetsToTxn, TxnOffsetCommit): its markers to the coordinator node
// name __consumer_offsets and placed together, split between the group
// coordinator and the node's partitions. The offset is committed and the
// record readable (the caller counts it).
func offsetsWithRecords(ctx context.Context, t *testing.T, producer, admin *kgo.Client) {
	t.Helper()
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "placed", Partition: 0, Value: []byte("with-offsets")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := producer.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "placed-txn", pid, epoch, "placed-group"
	for {
		resp, err := add.RequestWith(ctx, admin)
		// The previous transaction's markers may still be in flight: the
		// coordinator answers CONCURRENT_TRANSACTIONS, which a client
		// retries (kgo does).
		if err == nil && resp.ErrorCode == kerr.ConcurrentTransactions.Code && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
		}
		break
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = "placed-txn", "placed-group", pid, epoch
	commit.Generation, commit.MemberID = -1, ""
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "placed"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 42, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, admin)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit with offsets: %v", err)
	}
	// The commit returns at the durable Prepare; the offset is committed
	// once the group's marker is written. Until then a stable fetch of
	// the partition answers UNSTABLE_OFFSET_COMMIT (a fetch of every
	// partition lists only committed ones, as Kafka's does, so it would
	// show none here).
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group, fetch.RequireStable = "placed-group", true
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "placed", []int32{0}
	fetch.Topics = append(fetch.Topics, ft)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := fetch.RequestWith(ctx, admin)
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch: %v %+v", err, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode == 0 && p.Offset == 42 {
			return
		}
		if p.ErrorCode != kerr.UnstableOffsetCommit.Code || time.Now().After(deadline) {
			t.Fatalf("placed-group's committed offset of placed/0: %+v, want 42 (UNSTABLE_OFFSET_COMMIT until the marker)", p)
		}
	}
}

// startSeparate starts f's nodes as separate processes would run them
// (each with its own view and store; the leaders reach the coordinator
// over TCP), stopped when the test ends, and returns the coordinator and a
// restart of it (stopped, then started again on its data dir and address).
func startSeparate(t *testing.T, f *cluster.File, lns map[int32]net.Listener) (*Coordinator, func() *Coordinator) {
	t.Helper()
	dir := t.TempDir()
	start := func(ln net.Listener) *Coordinator {
		t.Helper()
		co, err := StartCoordinator(CoordinatorConfig{View: cluster.NewView(f), DataDir: dir, Listener: ln, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return co
	}
	co := start(lns[0])
	t.Cleanup(func() { stopWithin(t, co.Stop) })
	for _, n := range f.Leaders {
		l, err := StartLeader(LeaderConfig{View: cluster.NewView(f), NodeID: n.NodeID, DataDir: dir, Listener: lns[n.NodeID], Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopWithin(t, l.Stop) })
	}
	return co, func() *Coordinator {
		t.Helper()
		stopWithin(t, co.Stop)
		coordOnly := *f
		coordOnly.Leaders = nil
		_, again := twoLeaderFileAt(t, &coordOnly)
		co = start(again[0])
		return co
	}
}

// replicateEverywhere checks that Metadata lists want brokers (the
// coordinators first, then the leaders from node id firstLeader), creates
// rf-all with 4 partitions and a replication factor of every broker, and
// checks Metadata's answer: every partition placed by the rule on a
// leader, its replicas every broker led by it, its ISR the leader alone.
// One more replica is INVALID_REPLICATION_FACTOR.
func replicateEverywhere(ctx context.Context, t *testing.T, cl *kgo.Client, want int, firstLeader int32) {
	t.Helper()
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != want {
		t.Fatalf("Metadata lists %d brokers, want %d (the coordinator nodes and the leaders)", len(brokers), want)
	}
	res, err := adm.CreateTopic(ctx, 4, int16(len(brokers)), nil, "rf-all")
	if err != nil || res.Err != nil {
		t.Fatalf("CreateTopic with replication factor %d: %v %v", len(brokers), err, res.Err)
	}
	for _, p := range placement(ctx, t, cl, "rf-all") {
		if len(p.Replicas) != len(brokers) || p.Replicas[0] != p.Leader || !slices.Equal(p.ISR, []int32{p.Leader}) {
			t.Fatalf("partition %d: leader %d replicas %v isr %v, want %d replicas led by the first, the leader alone in sync", p.Partition, p.Leader, p.Replicas, p.ISR, len(brokers))
		}
		if p.Leader < firstLeader {
			t.Fatalf("partition %d placed by the rule on coordinator node %d: the rule places on the leaders", p.Partition, p.Leader)
		}
	}
	if res, _ := adm.CreateTopic(ctx, 1, int16(len(brokers)+1), nil, "rf-too-many"); !errors.Is(res.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("CreateTopic with replication factor %d: %v, want INVALID_REPLICATION_FACTOR", len(brokers)+1, res.Err)
	}
}

// metadataOf is a Metadata request for one topic, without auto-creation.
func metadataOf(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req
}

// mustDo sends req on cl and fails the test on an error.
func mustDo(ctx context.Context, t *testing.T, cl *wire.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// leadersAt asks the node at addr itself for topic's partitions' leaders.
func leadersAt(ctx context.Context, addr, topic string) ([]int32, error) {
	cl, err := wire.Dial(ctx, addr, "combined-test")
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	raw, err := cl.Do(ctx, metadataOf(topic))
	if err != nil {
		return nil, err
	}
	mt := raw.(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(mt.ErrorCode)
	}
	leaders := make([]int32, len(mt.Partitions))
	for _, p := range mt.Partitions {
		leaders[p.Partition] = p.Leader
	}
	return leaders, nil
}

// describeBoth asks DescribeProducers about placed/0 and placed-group's
// __consumer_offsets partition, both led by the coordinator node: one
// request there, split between its partitions and its group coordinator.
// Both answer, placed/0 with the transactional producer.
func describeBoth(ctx context.Context, t *testing.T, admin, producer *kgo.Client, offsetsPartitions int32) {
	t.Helper()
	pid, _, err := producer.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	offsets := cluster.OffsetsPartitionFor("placed-group", offsetsPartitions)
	set := kadm.TopicsSet{}
	set.Add("placed", 0)
	set.Add(cluster.OffsetsTopic, offsets)
	described, err := kadm.NewClient(admin).DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	placed, ok := described["placed"].Partitions[0]
	if !ok || placed.Err != nil || placed.Leader != 0 {
		t.Fatalf("DescribeProducers placed/0: %+v (found %v), want an answer from node 0", placed, ok)
	}
	if _, ok := placed.ActiveProducers[pid]; !ok {
		t.Fatalf("DescribeProducers placed/0 lists %+v, not the transactional producer %d", placed.ActiveProducers, pid)
	}
	if o, ok := described[cluster.OffsetsTopic].Partitions[offsets]; !ok || o.Err != nil || o.Leader != 0 {
		t.Fatalf("DescribeProducers %s/%d: %+v (found %v), want an answer from node 0", cluster.OffsetsTopic, offsets, o, ok)
	}
}

// twoLeaderFileAt binds the addresses of f again (a restart on the same
// cluster file), retrying while the old listeners close.
func twoLeaderFileAt(t *testing.T, f *cluster.File) (*cluster.File, map[int32]net.Listener) {
	t.Helper()
	lns := map[int32]net.Listener{}
	for _, n := range append([]cluster.Node{*f.Coordinator}, f.Leaders...) {
		lns[n.NodeID] = listenAgain(t, n.Addr)
	}
	return f, lns
}

// listenAgain binds addr again (a node restarted on its address),
// retrying while the old listener closes.
func listenAgain(t *testing.T, addr string) net.Listener {
	t.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

// sarama's ClusterAdmin creates a topic with a ReplicaAssignment over the
// coordinator node and a leader; a reassignment that keeps each leader
// first and changes the followers is recorded, one that moves a leader is
// refused (txncoord keeps one copy, on the leader).
func TestCombinedNodeSaramaAssignment(t *testing.T) {
	_, e := startTwoLeaders(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	adm, err := sarama.NewClusterAdmin([]string{e.Bootstrap()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	detail := &sarama.TopicDetail{NumPartitions: -1, ReplicationFactor: -1, ReplicaAssignment: map[int32][]int32{0: {0, 1}, 1: {2, 0}}}
	if err := adm.CreateTopic("sarama-placed", detail, false); err != nil {
		t.Fatalf("CreateTopic with a ReplicaAssignment: %v", err)
	}
	meta, err := adm.DescribeTopics([]string{"sarama-placed"})
	if err != nil || len(meta) != 1 || len(meta[0].Partitions) != 2 {
		t.Fatalf("DescribeTopics: %v %+v", err, meta)
	}
	for _, p := range meta[0].Partitions {
		want := detail.ReplicaAssignment[p.ID]
		if p.Leader != want[0] || !slices.Equal(p.Replicas, want) || !slices.Equal(p.Isr, []int32{want[0]}) {
			t.Fatalf("partition %d: leader %d replicas %v isr %v, want %v led by its first", p.ID, p.Leader, p.Replicas, p.Isr, want)
		}
	}
	producer, err := sarama.NewSyncProducer([]string{e.Bootstrap()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for p := range int32(2) {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "sarama-placed", Partition: p, Value: sarama.StringEncoder(fmt.Sprint("p", p))}); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	consumeCommitted(t, e.Bootstrap(), "sarama-placed", 2, 2)

	if err := adm.AlterPartitionReassignments("sarama-placed", [][]int32{{0, 2}, {2}}); err != nil {
		t.Fatalf("reassignment keeping the leaders first: %v", err)
	}
	meta, err = adm.DescribeTopics([]string{"sarama-placed"})
	if err != nil || len(meta) != 1 {
		t.Fatal(err)
	}
	for _, p := range meta[0].Partitions {
		want := [][]int32{{0, 2}, {2}}[p.ID]
		if !slices.Equal(p.Replicas, want) {
			t.Fatalf("after the reassignment partition %d has replicas %v, want %v", p.ID, p.Replicas, want)
		}
	}
	err = adm.AlterPartitionReassignments("sarama-placed", [][]int32{{1, 0}, {2}})
	if !errors.Is(err, sarama.ErrInvalidReplicaAssignment) {
		t.Fatalf("reassignment moving partition 0's leader: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
}

// In separate processes (`txncoord coordinator` and `txncoord leader`,
// each with its own view and store) the coordinator node leads the
// partitions placed on it too: a manual assignment sent to a leader is
// forwarded to the controller, every node's Metadata shows it, and TV2
// transactions committed and aborted across the coordinator node's and a
// leader's partition read back read_committed, again after a restart of
// the coordinator process.
func TestCombinedNodeSeparateProcesses(t *testing.T) {
	f, lns := twoLeaderFile(t)
	co, restart := startSeparate(t, f, lns)
	if co.Partitions == nil {
		t.Fatal("a coordinator process with one coordinator and no etcd leads no partitions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bootstrap := f.Leaders[0].Addr
	admin := combinedClient(t, f.Leaders[1].Addr)
	if rt := createAssigned(ctx, t, admin, "apart", [][]int32{{0}, {1}}); rt.ErrorCode != 0 {
		t.Fatalf("CreateTopics with an assignment at a leader: error %d (%v)", rt.ErrorCode, rt.ErrorMessage)
	}
	// Each node learns the topic from the controller (the forwarding
	// leader before it answers, the other at its next sync).
	for _, n := range append([]cluster.Node{*f.Coordinator}, f.Leaders...) {
		for {
			leaders, err := leadersAt(ctx, n.Addr, "apart")
			if err == nil && slices.Equal(leaders, []int32{0, 1}) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("node %d's Metadata of apart: leaders %v (%v), want partition 0 led by 0 and 1 by 1", n.NodeID, leaders, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	producer := combinedClient(t, bootstrap, kgo.TransactionalID("apart-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "apart", Partition: p, Value: fmt.Appendf(nil, "t%d-p%d", i, p)}).FirstErr(); err != nil {
				t.Fatalf("transaction %d, partition %d: %v", i, p, err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	check := func() {
		t.Helper()
		got := consumeCommitted(t, bootstrap, "apart", 2, 4)
		for p := range int32(2) {
			if want := []string{fmt.Sprintf("t0-p%d", p), fmt.Sprintf("t2-p%d", p)}; !slices.Equal(got[p], want) {
				t.Fatalf("apart/%d read_committed: %v, want %v", p, got[p], want)
			}
		}
	}
	check()
	// The coordinator process restarted: its partition is in its store.
	producer.Close()
	if co = restart(); co.Partitions == nil {
		t.Fatal("the restarted coordinator leads no partitions")
	}
	if _, ok := co.Partitions.HeldTopics()["apart"]; !ok {
		t.Fatal("the restarted coordinator holds no data of apart")
	}
	check()
}
