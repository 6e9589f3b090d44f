package cluster

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testFile(t *testing.T, leaders ...string) *File {
	t.Helper()
	f := &File{
		ClusterID:         "view-test",
		Coordinator:       &Node{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2"},
		DefaultPartitions: 5,
		Topics:            map[string]int32{"orders": 6, "payments": 1},
	}
	for i, v := range leaders {
		f.Leaders = append(f.Leaders, Node{NodeID: int32(i + 1), Addr: fmt.Sprintf("127.0.0.1:%d", 9093+i), KafkaVersion: v})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

// The leader of partition p of topic t is leaders[(fnv32a(t)+p) mod n],
// computed here independently, and two views of one file agree.
func TestLeadersFollowTheFormula(t *testing.T) {
	f := testFile(t, "4.2", "4.2", "4.1")
	a, b := NewView(f), NewView(f)
	for _, topic := range []string{"orders", "payments", "auto-1", "x"} {
		ta, err := a.EnsureTopic(topic)
		if err != nil {
			t.Fatal(err)
		}
		tb, _ := b.EnsureTopic(topic)
		if !ta.Equal(tb) {
			t.Fatalf("views disagree on %s: %+v vs %+v", topic, ta, tb)
		}
		h := fnv.New32a()
		h.Write([]byte(topic))
		for p := int32(0); p < ta.Partitions; p++ {
			want := f.Leaders[(uint64(h.Sum32())+uint64(p))%3]
			la, _ := a.LeaderOf(topic, p)
			lb, _ := b.LeaderOf(topic, p)
			if la != want || lb != want {
				t.Fatalf("%s/%d: leaders %d and %d, want %d", topic, p, la.NodeID, lb.NodeID, want.NodeID)
			}
		}
		if _, ok := a.LeaderOf(topic, ta.Partitions); ok {
			t.Fatalf("%s: a leader for partition %d, past the last", topic, ta.Partitions)
		}
		if _, ok := a.LeaderOf(topic, -1); ok {
			t.Fatalf("%s: a leader for partition -1", topic)
		}
	}
}

// Topic ids depend only on cluster id and name, are never null, and find
// their topic.
func TestTopicIDs(t *testing.T) {
	f := testFile(t, "4.2")
	v := NewView(f)
	orders, _ := v.Topic("orders")
	if orders.ID != TopicID("view-test", "orders") || orders.ID == [16]byte{} {
		t.Fatalf("orders id %x", orders.ID)
	}
	if TopicID("view-test", "orders") == TopicID("other", "orders") || TopicID("c", "a") == TopicID("c", "b") {
		t.Fatal("topic ids collide across clusters or names")
	}
	if got, ok := v.TopicByID(orders.ID); !ok || !got.Equal(orders) {
		t.Fatalf("TopicByID = %+v, %v", got, ok)
	}
}

// Auto-creation from many goroutines at once yields one topic with
// default_partitions; invalid names are refused.
func TestAutoCreate(t *testing.T) {
	v := NewView(testFile(t, "4.2", "4.2"))
	var wg sync.WaitGroup
	got := make([]Topic, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = v.EnsureTopic("fresh")
		}()
	}
	wg.Wait()
	for _, tp := range got {
		if !tp.Equal(got[0]) || tp.Partitions != 5 || tp.Name != "fresh" {
			t.Fatalf("EnsureTopic results differ: %+v vs %+v", tp, got[0])
		}
	}
	if len(v.Topics()) != 4 { // two of the file, "fresh", __consumer_offsets
		t.Fatalf("%d topics, want 4", len(v.Topics()))
	}
	for _, bad := range []string{"", ".", "..", "a b", "bad/name", string(make([]byte, 250))} {
		if _, err := v.EnsureTopic(bad); err == nil {
			t.Fatalf("EnsureTopic(%q) accepted", bad)
		}
	}
}

// Metadata for listed topics: auto-create only when allowed, a clear
// per-topic error otherwise (UNKNOWN_TOPIC_ID for an unknown id, which
// used to get UNKNOWN_TOPIC_OR_PARTITION), and every answer encodes and
// decodes at every version.
func TestMetadataTopicErrors(t *testing.T) {
	v := NewView(testFile(t, "4.2"))
	// From v4, where the request says whether to auto-create (below it
	// Kafka auto-creates: TestMetadataOldVersions).
	for version := int16(4); version <= MetadataMaxVersion; version++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		name := func(s string) kmsg.MetadataRequestTopic {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(s)
			return rt
		}
		req.Topics = []kmsg.MetadataRequestTopic{name("orders"), name(fmt.Sprintf("never-%d", version)), name("bad/name")}
		want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}
		if version >= 10 {
			byID := kmsg.NewMetadataRequestTopic()
			byID.TopicID = [16]byte{1, 2, 3}
			req.Topics = append(req.Topics, byID)
			want = append(want, kerr.UnknownTopicID.Code)
		}
		resp := v.Metadata(req)
		resp.SetVersion(version)
		var codes []int16
		for _, tp := range resp.Topics {
			codes = append(codes, tp.ErrorCode)
		}
		if !reflect.DeepEqual(codes, want) {
			t.Fatalf("v%d: error codes %v, want %v", version, codes, want)
		}
		encoded := resp.AppendTo(nil) // must not panic
		back := kmsg.NewPtrMetadataResponse()
		back.SetVersion(version)
		if err := back.ReadFrom(encoded); err != nil {
			t.Fatalf("v%d: response does not decode: %v", version, err)
		}
	}
	if _, ok := v.Topic(fmt.Sprintf("never-%d", 4)); ok {
		t.Fatal("topic auto-created although the request did not allow it")
	}

	// Allowed: created with default_partitions; an invalid name is
	// INVALID_TOPIC_EXCEPTION.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	for _, n := range []string{"created", "bad/name"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp := v.Metadata(req)
	if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 5 || resp.Topics[0].TopicID != TopicID("view-test", "created") {
		t.Fatalf("auto-created topic: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: error %d", resp.Topics[1].ErrorCode)
	}
}

// Write then Load gives back the same file.
func TestWriteLoadRoundTrip(t *testing.T) {
	f := testFile(t, "4.2", "4.1", "3.9")
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, back) {
		t.Fatalf("round trip:\n%+v\n%+v", f, back)
	}
}

// Kafka's partitionFor: Utils.abs(groupId.hashCode()) % 50.
func TestOffsetsPartitionForMatchesJava(t *testing.T) {
	for _, c := range []struct {
		group string
		want  int32
	}{
		// "my-group".hashCode() is -1906497762 (31-polynomial over UTF-16
		// units, int32 overflow); abs → 1906497762, mod 50 → 12.
		{"my-group", 12},
		// "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs → 0.
		{"polygenelubricants", 0},
		// U+1F600 is the surrogate pair D83D DE00 in Java: hashCode
		// 31*0xD83D + 0xDE00 = 1772899, mod 50 → 49.
		{"\U0001F600", 49},
	} {
		if p := OffsetsPartitionFor(c.group, 50); p != c.want {
			t.Errorf("%q: partition %d, want %d", c.group, p, c.want)
		}
	}
}

func TestOffsetsTopicLedByCoordinator(t *testing.T) {
	f := &File{ClusterID: "c", Coordinator: &Node{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2"},
		Leaders: []Node{{NodeID: 1, Addr: "127.0.0.1:9093", KafkaVersion: "4.2"}}, DefaultPartitions: 3, OffsetsPartitions: 7}
	v := NewView(f)
	tp, ok := v.Topic(OffsetsTopic)
	if !ok || !tp.Internal || tp.Partitions != 7 {
		t.Fatalf("offsets topic %+v %v", tp, ok)
	}
	if n, ok := v.LeaderOf(OffsetsTopic, 6); !ok || n.NodeID != 0 {
		t.Fatalf("leader of %s-6: %+v %v", OffsetsTopic, n, ok)
	}
	if _, ok := v.LeaderOf(OffsetsTopic, 7); ok {
		t.Fatal("partition 7 of 7 has a leader")
	}
	resp := v.Metadata(kmsg.NewPtrMetadataRequest()) // all topics
	internal := map[string]bool{}
	for _, mt := range resp.Topics {
		internal[*mt.Topic] = mt.IsInternal
	}
	if !internal[OffsetsTopic] || len(internal) != 1 {
		t.Fatalf("Metadata internal flags %v, want only %s, internal", internal, OffsetsTopic)
	}
	f.Topics = map[string]int32{OffsetsTopic: 3}
	if err := f.Validate(); err == nil {
		t.Fatal("a cluster file may not size __consumer_offsets through topics")
	}
}

// With several coordinators the view lists them all as brokers, Coordinator
// is still node 0 (every single-coordinator caller unchanged), and the etcd
// settings and __transaction_state partitions take their defaults.
func TestViewOfSeveralCoordinators(t *testing.T) {
	f, err := Parse([]byte(`cluster_id: c9
coordinators:
  - {node_id: 0, addr: 127.0.0.1:9092, kafka_version: "4.2"}
  - {node_id: 1, addr: 127.0.0.1:9093, kafka_version: "4.1"}
leaders:
  - {node_id: 2, addr: 127.0.0.1:9094, kafka_version: "4.2"}
etcd: {endpoints: ["http://127.0.0.1:2379"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(f)
	if c := v.Coordinator(); c.NodeID != 0 || c.Addr != "127.0.0.1:9092" {
		t.Fatalf("Coordinator() = %+v, want node 0", c)
	}
	if g := v.GroupCoordinator(); g.NodeID != 0 {
		t.Fatalf("GroupCoordinator() = %+v, want node 0", g)
	}
	var ids []int32
	for _, n := range v.Brokers() {
		ids = append(ids, n.NodeID)
	}
	if !reflect.DeepEqual(ids, []int32{0, 1, 2}) {
		t.Fatalf("brokers %v, want [0 1 2]", ids)
	}
	if n, ok := v.Node(1); !ok || n.KafkaVersion != "4.1" {
		t.Fatalf("Node(1) = %+v, %v", n, ok)
	}
	if got := v.Coordinators(); len(got) != 2 || got[1].NodeID != 1 {
		t.Fatalf("Coordinators() = %+v", got)
	}
	v.Coordinators()[0].Addr = "changed" // a copy: the file is not changed
	if v.Coordinator().Addr != "127.0.0.1:9092" {
		t.Fatal("Coordinators() let its caller change the file")
	}
	if got := v.Etcd(); !reflect.DeepEqual(got, Etcd{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/txncoord/c9", LeaseTTLSeconds: DefaultLeaseTTLSeconds}) {
		t.Fatalf("Etcd() = %+v", got)
	}
	if n := v.TransactionStatePartitions(); n != DefaultTransactionStatePartitions {
		t.Fatalf("TransactionStatePartitions() = %d", n)
	}

	// A file built in code with the single form (as `up` builds it):
	// one coordinator, no etcd, nothing to refuse.
	one := NewView(testFile(t, "4.2"))
	if got := one.Coordinators(); len(got) != 1 || got[0] != one.Coordinator() {
		t.Fatalf("Coordinators() = %+v", got)
	}
	if got := one.Etcd(); len(got.Endpoints) != 0 || got.Prefix != "/txncoord/view-test" {
		t.Fatalf("Etcd() = %+v", got)
	}
}

// TestLiveBrokers: Metadata lists the coordinators the hook names live
// (several coordinators on etcd: those holding a lease) and every leader;
// every node when the hook cannot tell or is not set; Node still finds a
// coordinator left out.
func TestLiveBrokers(t *testing.T) {
	f := &File{ClusterID: "live", DefaultPartitions: 1, Etcd: &Etcd{Endpoints: []string{"http://127.0.0.1:2379"}}}
	for id := range int32(5) {
		n := Node{NodeID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 9092+id), KafkaVersion: "4.2"}
		if id < 3 {
			f.Coordinators = append(f.Coordinators, n)
		} else {
			f.Leaders = append(f.Leaders, n)
		}
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	v := NewView(f)
	ids := func() []int32 {
		var out []int32
		for _, b := range v.Metadata(kmsg.NewPtrMetadataRequest()).Brokers {
			out = append(out, b.NodeID)
		}
		return out
	}
	if got := ids(); !reflect.DeepEqual(got, []int32{0, 1, 2, 3, 4}) {
		t.Fatalf("no hook: brokers %v", got)
	}
	known := true
	v.SetLiveCoordinators(func() (map[int32]bool, bool) { return map[int32]bool{0: true, 2: true}, known })
	if got := ids(); !reflect.DeepEqual(got, []int32{0, 2, 3, 4}) {
		t.Fatalf("node 1 without a lease: brokers %v", got)
	}
	if _, ok := v.Node(1); !ok {
		t.Fatal("Node(1) lost with the filter")
	}
	known = false
	if got := ids(); !reflect.DeepEqual(got, []int32{0, 1, 2, 3, 4}) {
		t.Fatalf("hook cannot tell: brokers %v", got)
	}
}

// TestTopicValues: a topic's resolved configs follow SetTopic and
// RemoveTopic (resolved once, read at every produce).
func TestTopicValues(t *testing.T) {
	v := NewView(&File{ClusterID: "c", Coordinator: &Node{NodeID: 0, Addr: "a:1", KafkaVersion: "4.2"},
		Leaders: []Node{{NodeID: 1, Addr: "a:2", KafkaVersion: "4.2"}}, DefaultPartitions: 1})
	def := v.TopicValues("t")
	if def.MaxMessageBytes != 1048588 || !def.Delete {
		t.Fatalf("defaults %+v, want Kafka's max.message.bytes 1048588 and cleanup.policy delete", def)
	}
	v.SetTopic(Topic{Name: "t", Partitions: 1}, map[string]string{"max.message.bytes": "100", "message.timestamp.type": "LogAppendTime"})
	if got := v.TopicValues("t"); got.MaxMessageBytes != 100 || !got.LogAppendTime {
		t.Fatalf("after SetTopic: %+v", got)
	}
	v.SetTopic(Topic{Name: "t", Partitions: 2}, nil)
	if got := v.TopicValues("t"); got != def {
		t.Fatalf("after SetTopic without configs: %+v, want the defaults", got)
	}
	v.SetTopic(Topic{Name: "t", Partitions: 2}, map[string]string{"max.message.bytes": "7"})
	v.RemoveTopic("t")
	if got := v.TopicValues("t"); got != def {
		t.Fatalf("after RemoveTopic: %+v, want the defaults", got)
	}
}
