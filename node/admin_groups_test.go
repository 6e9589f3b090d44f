package node

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/groups"
)

type fakeGroups struct{ g groups.GroupDescription }

func (f fakeGroups) ListGroups(context.Context) ([]groups.GroupSummary, error) {
	return []groups.GroupSummary{f.g.GroupSummary}, nil
}
func (f fakeGroups) DescribeGroup(_ context.Context, id string) (groups.GroupDescription, bool, error) {
	return f.g, id == f.g.Group, nil
}
func (f fakeGroups) DeleteGroup(_ context.Context, id string) error {
	if id != f.g.Group {
		return kerr.GroupIDNotFound
	}
	return kerr.NonEmptyGroup
}
func (f fakeGroups) PendingOffsets(pid int64) []groups.PendingOffsetInfo {
	if pid != 7 {
		return nil
	}
	return f.g.Pending
}

// The admin adapter over the group coordinator: assignments flattened, lag
// from the leaders' end offsets, pending offsets on a transaction, the
// group coordinator's errors as the admin API's.
func TestGroupsAdminBackend(t *testing.T) {
	g := groups.GroupDescription{
		GroupSummary: groups.GroupSummary{Group: "etl", State: "Stable", ProtocolType: "consumer", Members: 1, Partition: 17},
		Members: []groups.MemberInfo{{MemberID: "m1", ClientID: "c1", ClientHost: "/127.0.0.1",
			Assignment: []groups.TopicPartitions{{Topic: "in", Partitions: []int32{0, 1}}}}},
		Offsets: []groups.OffsetInfo{{Topic: "in", Partition: 0, Offset: 10}},
		Pending: []groups.PendingOffsetInfo{{Group: "etl", OffsetInfo: groups.OffsetInfo{Topic: "in", Partition: 0, Offset: 12}, ProducerID: 7, ProducerEpoch: 1}},
	}
	var asked []admin.TopicPartition
	b := &groupsAdminBackend{groups: fakeGroups{g}, endOffsets: func(_ context.Context, tps []admin.TopicPartition) map[admin.TopicPartition]int64 {
		asked = tps
		return map[admin.TopicPartition]int64{{Topic: "in", Partition: 0}: 15}
	}}
	d, err := b.Group(context.Background(), "etl")
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || d.MemberCount != 1 || d.OffsetsPartition != 17 || len(d.Members[0].Assignment) != 2 {
		t.Fatalf("detail %+v (asked %v)", d, asked)
	}
	if len(d.Offsets) != 2 || d.Offsets[0].Lag != 5 || d.Offsets[0].MemberID != "m1" || d.Offsets[1].CurrentOffset != -1 || d.Offsets[1].LogEndOffset != -1 {
		t.Fatalf("offsets %+v", d.Offsets)
	}
	if len(d.Pending) != 1 || d.Pending[0].Offset != 12 || d.Pending[0].ProducerID != 7 {
		t.Fatalf("pending %+v", d.Pending)
	}
	if _, err := b.Group(context.Background(), "nope"); !errors.Is(err, admin.ErrGroupNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	if err := b.DeleteGroup(context.Background(), "etl"); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("delete a group with members: %v", err)
	}
	if err := b.DeleteGroup(context.Background(), "nope"); !errors.Is(err, admin.ErrGroupNotFound) {
		t.Fatalf("delete an unknown group: %v", err)
	}
}
