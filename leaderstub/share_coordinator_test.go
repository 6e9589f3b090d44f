package leaderstub

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// The share coordinator's requests at the leader of the partitions
// (InitializeShareGroupState, ReadShareGroupStateSummary,
// DeleteShareGroupState), and a share session ended by its connection:
// the member's records come back at once, at their delivery count.
func TestShareCoordinatorRequestsAndConnectionEnd(t *testing.T) {
	f := newFixture(t)
	f.view.SetGroupConfigs("g", map[string]string{"share.auto.offset.reset": "earliest"})
	resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1, count: 10}.bytes()), 9).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %s", codeName(code))
	}
	tp, _ := f.view.Topic("t")
	summary := func(id [16]byte, partition int32) (int16, int64) {
		t.Helper()
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.GroupID = "g"
		rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		rt.TopicID = id
		rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		rp.Partition = partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := f.call(f.l.handleReadShareGroupStateSummary, req, 1).(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0]
		return p.ErrorCode, p.StartOffset
	}
	if code, start := summary(tp.ID, 0); code != 0 || start != -1 {
		t.Fatalf("summary with no state: %s start %d, want start -1", codeName(code), start)
	}
	if code, _ := summary([16]byte{9}, 0); code != kerr.UnknownTopicID.Code {
		t.Fatalf("summary of an unknown topic id: %s", codeName(code))
	}
	if code, _ := summary(tp.ID, 3); code == 0 {
		t.Fatal("summary of a partition the topic does not have: no error")
	}

	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = "g"
	it := kmsg.NewInitializeShareGroupStateRequestTopic()
	it.TopicID = tp.ID
	ip := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	ip.Partition, ip.StartOffset = 0, 4
	it.Partitions = append(it.Partitions, ip)
	init.Topics = append(init.Topics, it)
	if code := f.call(f.l.handleInitializeShareGroupState, init, 0).(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("initialize: %s", codeName(code))
	}
	if code, start := summary(tp.ID, 0); code != 0 || start != 4 {
		t.Fatalf("summary after initialize: %s start %d, want 4", codeName(code), start)
	}

	// A session opened on connection 7 acquires 4-7; the connection ends.
	fetch := func(member string, conn uint64) string {
		t.Helper()
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr(member)
		req.MaxBytes, req.MaxRecords = 1<<20, 4
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = tp.ID
		rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		req.SetVersion(2)
		raw, err := f.l.handleShareFetch(context.Background(), &wire.Request{Body: req, Key: 78, Version: 2, ConnID: conn, Log: zerolog.Nop()})()
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, a := range raw.(*kmsg.ShareFetchResponse).Topics[0].Partitions[0].AcquiredRecords {
			got += fmt.Sprintf("%d-%d/%d", a.FirstOffset, a.LastOffset, a.DeliveryCount)
		}
		return got
	}
	if got := fetch("m1", 7); got != "4-7/1" {
		t.Fatalf("m1 acquired %q, want 4-7/1", got)
	}
	f.l.connectionEnded(8) // another connection: nothing
	if got := fetch("m2", 9); got != "8-9/1" {
		t.Fatalf("m2 acquired %q while m1 holds 4-7, want 8-9/1", got)
	}
	f.l.connectionEnded(7)
	if got := fetch("m3", 10); got != "4-7/2" {
		t.Fatalf("after m1's connection ended m3 acquired %q, want 4-7/2", got)
	}

	del := kmsg.NewPtrDeleteShareGroupStateRequest()
	del.GroupID = "g"
	dt := kmsg.NewDeleteShareGroupStateRequestTopic()
	dt.TopicID = tp.ID
	dp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	if code := f.call(f.l.handleDeleteShareGroupState, del, 0).(*kmsg.DeleteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %s", codeName(code))
	}
	if code, start := summary(tp.ID, 0); code != 0 || start != -1 {
		t.Fatalf("summary after delete: %s start %d, want -1", codeName(code), start)
	}
}
