package leaderstub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareFetch sends one ShareFetch (no wait) and returns its top-level
// error code and the acquired ranges as "first-last/dc" words.
func shareFetch(f *fixture, member string, epoch, maxRecords int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int16, string) {
	f.t.Helper()
	tp, _ := f.view.Topic("t")
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxBytes, req.MaxRecords = epoch, 1<<20, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = tp.ID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := f.call(f.l.handleShareFetch, req, 2).(*kmsg.ShareFetchResponse)
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
				out = append(out, fmt.Sprintf("error=%d ack_error=%d", p.ErrorCode, p.AcknowledgeErrorCode))
			}
			if len(p.AcquiredRecords) > 0 && len(p.Records) == 0 {
				out = append(out, "no-records")
			}
			for _, a := range p.AcquiredRecords {
				out = append(out, fmt.Sprintf("%d-%d/%d", a.FirstOffset, a.LastOffset, a.DeliveryCount))
			}
		}
	}
	return resp.ErrorCode, strings.Join(out, " ")
}

func shareAck(f *fixture, member string, epoch int32, first, last int64, ackType int8) (int16, int16) {
	f.t.Helper()
	tp, _ := f.view.Topic("t")
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr("g"), kmsg.StringPtr(member), epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = tp.ID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{ackType}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := f.call(f.l.handleShareAcknowledge, req, 2).(*kmsg.ShareAcknowledgeResponse)
	part := int16(-1)
	if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		part = resp.Topics[0].Partitions[0].ErrorCode
	}
	return resp.ErrorCode, part
}

// ShareFetch and ShareAcknowledge at one leader: share-session errors as
// Kafka answers them; acquisition, acknowledgement, a restart (what was
// acknowledged or released survives, with delivery counts; locks do
// not) and a lock's expiry on the leader's clock.
func TestShareFetchAcknowledge(t *testing.T) {
	f := newFixture(t)
	f.view.SetGroupConfigs("g", map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"})
	resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1, count: 10}.bytes()), 9).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %s", codeName(code))
	}

	ack := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	ack.FirstOffset, ack.LastOffset, ack.AcknowledgeTypes = 0, 0, []int8{1}
	for _, c := range []struct {
		member string
		epoch  int32
		acks   bool
		want   int16
	}{
		{"", 0, false, kerr.InvalidRequest.Code},
		{strings.Repeat("m", 37), 0, false, kerr.InvalidRequest.Code},
		{"m2", 5, false, kerr.ShareSessionNotFound.Code},
		{"m2", -1, false, kerr.ShareSessionNotFound.Code},
		{"m2", -3, false, kerr.InvalidShareSessionEpoch.Code},
		{"m2", 0, true, kerr.InvalidRequest.Code}, // acknowledgements cannot open a session
	} {
		var acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		if c.acks {
			acks = append(acks, ack)
		}
		if code, _ := shareFetch(f, c.member, c.epoch, 5, acks...); code != c.want {
			t.Errorf("ShareFetch member %q epoch %d: %s, want %s", c.member, c.epoch, codeName(code), codeName(c.want))
		}
	}

	if code, got := shareFetch(f, "m1", 0, 4); code != 0 || got != "0-3/1" {
		t.Fatalf("first fetch: %s %q", codeName(code), got)
	}
	if code, _ := shareFetch(f, "m1", 7, 4); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %s", codeName(code))
	}
	if code, _ := shareAck(f, "m1", 0, 0, 1, 1); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge at epoch 0: %s", codeName(code))
	}
	// Another member may not acknowledge m1's records.
	if code, _ := shareFetch(f, "m3", 0, 1); code != 0 {
		t.Fatal(codeName(code))
	}
	if code, part := shareAck(f, "m3", 1, 0, 1, 1); code != 0 || part != kerr.InvalidRecordState.Code {
		t.Fatalf("ack of another member's records: %s %s", codeName(code), codeName(part))
	}
	if code, part := shareAck(f, "m1", 1, 0, 1, 1); code != 0 || part != 0 {
		t.Fatalf("accept: %s %s", codeName(code), codeName(part))
	}
	if code, part := shareAck(f, "m1", 2, 2, 3, 2); code != 0 || part != 0 {
		t.Fatalf("release: %s %s", codeName(code), codeName(part))
	}

	// m3 holds offset 4. After a restart: accepted 0-1 gone, 2-3
	// released (delivered once, so the next delivery is the second),
	// 4 available again (the lock is gone; its delivery was written with
	// the partition's last change, the release), the rest new.
	f.restart()
	f.view.SetGroupConfigs("g", map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"})
	if code, got := shareFetch(f, "m1", 0, 10); code != 0 || got != "2-4/2 5-9/1" {
		t.Fatalf("fetch after the restart: %s %q", codeName(code), got)
	}
	// The lock (15 s) expires on the leader's clock: the records come
	// back with their delivery counts.
	f.now = f.now.Add(14 * time.Second)
	if n, err := f.l.expireShareLocks(); n != 0 || err != nil {
		t.Fatalf("expired before the lock's end: %d %v", n, err)
	}
	f.now = f.now.Add(time.Second)
	if n, err := f.l.expireShareLocks(); n != 1 || err != nil {
		t.Fatalf("expired at the lock's end: %d partitions, %v", n, err)
	}
	if code, got := shareFetch(f, "m2", 0, 10); code != 0 || got != "2-4/3 5-9/2" {
		t.Fatalf("fetch after the locks expired: %s %q", codeName(code), got)
	}
	// A member that leaves gives its records back at once.
	if err := f.l.ReleaseShareMember("g", "m2"); err != nil {
		t.Fatal(err)
	}
	if code, got := shareFetch(f, "m1", 0, 10); code != 0 || got != "2-4/4 5-9/3" {
		t.Fatalf("fetch after m2 left: %s %q", codeName(code), got)
	}
}
