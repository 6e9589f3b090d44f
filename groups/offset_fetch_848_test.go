package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// OffsetFetch before v9 names no member, so a KIP-848 consumer group's
// offsets are answered to it as to an admin client (kafka-consumer-groups.sh,
// a coordinator's admin API asking another): v7, every partition and
// named partitions, shows what a kgo consumer with the server-side
// balancer committed.
func TestOffsetFetchV7ConsumerGroup(t *testing.T) {
	tc := startCluster(t)
	fast848(tc)
	produceNumbered(t, tc.client(), "in", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := tc.client(kgo.ConsumerGroup("fetch848"), kgo.ConsumeTopics("in"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for got := 0; got < 10; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 10: %v", got, err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	// kgo sends its highest version a broker serves: held at v7 here.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(9, 7)
	admin := tc.client(kgo.MaxVersions(versions))
	for _, named := range []bool{false, true} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group = "fetch848"
		if named {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "in", []int32{0, 1, 2, 3, 4, 5}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("named %v: partition %s/%d: error %d", named, rt.Topic, p.Partition, p.ErrorCode)
				}
				sum += max(p.Offset, 0)
			}
		}
		if resp.Version != 7 || resp.ErrorCode != 0 || sum != 10 {
			t.Fatalf("named %v: OffsetFetch v7 answers %+v (offsets summing to %d), want the 10 consumed", named, resp, sum)
		}
	}
}
