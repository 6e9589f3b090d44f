package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestGroupTransactSession: franz-go's EOS loop (consume "in", produce
// "out", commit the group's offsets in the same transaction: TV2, so
// TxnOffsetCommit v5+ adds __consumer_offsets implicitly) moves every input
// to the output exactly once, and the committed offsets are the inputs'
// end offsets once every transaction ended; on Kafka 4.2 nodes with
// TxnOffsetCommit v5, on 4.4 nodes with v6 (topics named by id).
func TestGroupTransactSession(t *testing.T) {
	for _, at := range []struct {
		kafkaVersion string
		txnOffsetMax int16
	}{{"4.2", 5}, {"4.4", 6}} {
		t.Run(at.kafkaVersion, func(t *testing.T) {
			tc := startClusterAt(t, at.kafkaVersion)
			if got := advertisedMax(t, tc, 28); got != at.txnOffsetMax {
				t.Fatalf("TxnOffsetCommit advertised up to v%d, want v%d", got, at.txnOffsetMax)
			}
			groupTransactSession(t, tc)
		})
	}
}

// advertisedMax is the highest version of key the coordinator advertises.
func advertisedMax(t *testing.T, tc *testCluster, key int16) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := tc.client().SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range raw.(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	return -1
}

func groupTransactSession(t *testing.T, tc *testCluster) {
	const n = 200
	produceNumbered(t, tc.client(), "in", n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tc.addrs[0]), kgo.TransactionalID("eos-1"),
		kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	moved := 0
	for moved < n {
		fs := sess.PollRecords(ctx, 50)
		if ctx.Err() != nil {
			t.Fatalf("moved %d of %d before the deadline", moved, n)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		copyRecords(ctx, t, sess, fs)
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			moved += fs.NumRecords()
		}
	}
	reader := tc.client(kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for len(seen) < n {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d distinct outputs of %d", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("output %s seen %d times", v, c)
		}
	}
	adm := kadm.NewClient(tc.client())
	checkCommitted(ctx, t, adm, "eos", "in", endOffsets(t, adm, "in"), "at the end")
}

// copyRecords produces each fetched record's key and value in the
// session's transaction (to its default topic).
func copyRecords(ctx context.Context, t *testing.T, sess *kgo.GroupTransactSession, fs kgo.Fetches) {
	fs.EachRecord(func(r *kgo.Record) {
		sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	})
}

// TxnOffsetCommit v6 names topics by id: an unknown id is UNKNOWN_TOPIC_ID
// for each of its partitions, and a known id is committed
// under its name (here refused by the transaction coordinator, since the
// producer id was never issued); the answer echoes every id.
func TestTxnOffsetCommitV6TopicIDs(t *testing.T) {
	tc := startClusterAt(t, "4.4")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	details, err := adm.ListTopics(ctx, "in")
	if err != nil || details["in"].Err != nil {
		t.Fatalf("ListTopics: %v %+v", err, details)
	}
	known, unknown := [16]byte(details["in"].ID), [16]byte{0xde, 0xad}
	commit := func(ids ...[16]byte) *kmsg.TxnOffsetCommitResponse {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 6
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "v6-txn", "v6-group", 424242, 0
		for _, id := range ids {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.TopicID = id
			for p := int32(0); p < 2; p++ {
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = p, 1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		raw, err := tc.client().Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := raw.(*kmsg.TxnOffsetCommitResponse)
		if len(resp.Topics) != len(ids) {
			t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(ids))
		}
		for i, rt := range resp.Topics {
			if rt.TopicID != ids[i] || len(rt.Partitions) != 2 {
				t.Fatalf("topic %d answered as %x with %d partitions, want %x with 2", i, rt.TopicID, len(rt.Partitions), ids[i])
			}
		}
		return resp
	}

	resp := commit(unknown)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("unknown id, partition %d: error %d, want UNKNOWN_TOPIC_ID", p.Partition, p.ErrorCode)
		}
	}
	resp = commit(known, unknown)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode == 0 || p.ErrorCode == kerr.UnknownTopicID.Code || p.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("known id, partition %d: error %d, want the transaction coordinator's refusal of an unknown producer", p.Partition, p.ErrorCode)
		}
	}
	for _, p := range resp.Topics[1].Partitions {
		if p.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("unknown id beside a known one, partition %d: error %d, want UNKNOWN_TOPIC_ID", p.Partition, p.ErrorCode)
		}
	}
}

// DeleteGroups v3 (Kafka 4.4) explains each refused group: a group that
// does not exist is GROUP_ID_NOT_FOUND with its description; below v3 the
// field does not exist.
func TestDeleteGroupsV3ErrorMessage(t *testing.T) {
	tc := startClusterAt(t, "4.4")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range []int16{2, 3} {
		caps := kversion.V4_4_0()
		caps.SetMaxKeyVersion(42, v) // kgo sends the highest version both sides know
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"never-existed"}
		raw, err := tc.client(kgo.MaxVersions(caps)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := raw.(*kmsg.DeleteGroupsResponse)
		if resp.GetVersion() != v {
			t.Fatalf("answered at v%d, want v%d", resp.GetVersion(), v)
		}
		g := resp.Groups[0]
		if g.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("v%d: error %d, want GROUP_ID_NOT_FOUND", v, g.ErrorCode)
		}
		if hasMessage := g.ErrorMessage != nil && *g.ErrorMessage == kerr.GroupIDNotFound.Description; hasMessage != (v >= 3) {
			t.Fatalf("v%d: error message %v", v, g.ErrorMessage)
		}
	}
}
