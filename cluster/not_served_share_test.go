package cluster

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A ShareFetch or ShareAcknowledge at a node that leads no partitions:
// NOT_LEADER_OR_FOLLOWER per partition with no leader hint (-1), the
// request-level error none, as for Fetch.
func TestNotServedShare(t *testing.T) {
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.SetVersion(2)
	rt := kmsg.NewShareFetchRequestTopic()
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = 3
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch())
	rt.Partitions = append(rt.Partitions, rp)
	fetch.Topics = append(fetch.Topics, rt)
	raw, err := notServed(fetch)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	p := resp.Topics[0].Partitions[0]
	if resp.ErrorCode != 0 || p.Partition != 3 || p.ErrorCode != kerr.NotLeaderForPartition.Code ||
		p.AcknowledgeErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 {
		t.Fatalf("ShareFetch not served: %+v", resp)
	}

	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.SetVersion(2)
	at := kmsg.NewShareAcknowledgeRequestTopic()
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ap.Partition = 1
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	raw, err = notServed(ack)
	if err != nil {
		t.Fatal(err)
	}
	aresp := raw.(*kmsg.ShareAcknowledgeResponse)
	if aresp.ErrorCode != 0 || aresp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code ||
		aresp.Topics[0].Partitions[0].CurrentLeader.LeaderID != -1 {
		t.Fatalf("ShareAcknowledge not served: %+v", aresp)
	}
}
