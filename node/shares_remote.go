package node

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/wire"
)

// remoteShares is the group coordinator's reach into the share
// partitions when the leaders run in processes of their own: over the
// Kafka protocol, with the share coordinator's requests Kafka's group
// coordinator sends (ReadShareGroupStateSummary, InitializeShareGroupState,
// DeleteShareGroupState), each to the partition's leader, which keeps the
// state of its share partitions (package leaderstub).
type remoteShares struct {
	view *cluster.View
	dial wire.DialConfig
}

// sharesClientID names the group coordinator's connections to the leaders.
const sharesClientID = "txncoord-share-state"

// ReleaseMember does nothing: each leader releases a departed member's
// records itself when the member's share session ends (its final epoch,
// or the end of its connection), as Kafka's brokers do.
func (remoteShares) ReleaseMember(string, string) {}

// leaderParts groups partitions by their leader's address: topic id →
// partitions.
type leaderParts map[string]map[[16]byte][]int32

func (s remoteShares) byLeader(topics []cluster.Topic) (leaderParts, error) {
	out := leaderParts{}
	for _, t := range topics {
		if t.Internal {
			continue
		}
		for p := range t.Partitions {
			n, ok := s.view.LeaderOf(t.Name, p)
			if !ok {
				return nil, fmt.Errorf("no leader for %s/%d: %w", t.Name, p, kerr.LeaderNotAvailable)
			}
			if out[n.Addr] == nil {
				out[n.Addr] = map[[16]byte][]int32{}
			}
			out[n.Addr][t.ID] = append(out[n.Addr][t.ID], p)
		}
	}
	return out, nil
}

// do sends req to the leader at addr on a connection of its own (these
// are admin requests, rare).
func (s remoteShares) do(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := wire.DialWith(ctx, addr, sharesClientID, s.dial)
	if err != nil {
		return nil, fmt.Errorf("leader at %s: %v: %w", addr, err, kerr.CoordinatorNotAvailable)
	}
	defer cl.Close()
	resp, err := cl.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("leader at %s: %v: %w", addr, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}

func (s remoteShares) Partitions(ctx context.Context, group string) ([]groups.SharePartition, error) {
	by, err := s.byLeader(s.view.Topics())
	if err != nil {
		return nil, err
	}
	var out []groups.SharePartition
	for addr, parts := range by {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.GroupID = group
		for id, ps := range parts {
			rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
			rt.TopicID = id
			for _, p := range ps {
				rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
				rp.Partition, rp.LeaderEpoch = p, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		raw, err := s.do(ctx, addr, req)
		if err != nil {
			return nil, err
		}
		var found []groups.SharePartition
		for _, rt := range raw.(*kmsg.ReadShareGroupStateSummaryResponse).Topics {
			t, ok := s.view.TopicByID(rt.TopicID)
			if !ok {
				continue // deleted meanwhile
			}
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return nil, fmt.Errorf("share state of %s/%d at %s: %w", t.Name, rp.Partition, addr, err)
				}
				if rp.StartOffset >= 0 {
					found = append(found, groups.SharePartition{Topic: t.Name, Partition: rp.Partition, StartOffset: rp.StartOffset})
				}
			}
		}
		if err := s.endOffsets(ctx, addr, found); err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// endOffsets fills the end offset (high watermark) and lag of each share
// partition led at addr, as `txncoord up` reports them.
func (s remoteShares) endOffsets(ctx context.Context, addr string, parts []groups.SharePartition) error {
	if len(parts) == 0 {
		return nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	at := map[string]int{}
	for _, sp := range parts {
		i, ok := at[sp.Topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = sp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			at[sp.Topic] = i
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = sp.Partition, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	raw, err := s.do(ctx, addr, req)
	if err != nil {
		return err
	}
	ends := map[string]map[int32]int64{}
	for _, rt := range raw.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 {
				if ends[rt.Topic] == nil {
					ends[rt.Topic] = map[int32]int64{}
				}
				ends[rt.Topic][rp.Partition] = rp.Offset
			}
		}
	}
	for i := range parts {
		end, ok := ends[parts[i].Topic][parts[i].Partition]
		if !ok {
			parts[i].EndOffset, parts[i].Lag = -1, -1
			continue
		}
		parts[i].EndOffset, parts[i].Lag = end, max(0, end-parts[i].StartOffset)
	}
	return nil
}

func (s remoteShares) Alter(ctx context.Context, group, topic string, partition int32, offset int64) error {
	t, ok := s.view.Known(topic)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	n, ok := s.view.LeaderOf(topic, partition)
	if !ok {
		return kerr.LeaderNotAvailable
	}
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = t.ID
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StartOffset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := s.do(ctx, n.Addr, req)
	if err != nil {
		return err
	}
	return firstPartitionError(raw.(*kmsg.InitializeShareGroupStateResponse).Topics,
		func(t kmsg.InitializeShareGroupStateResponseTopic) []kmsg.InitializeShareGroupStateResponseTopicPartition {
			return t.Partitions
		},
		func(p kmsg.InitializeShareGroupStateResponseTopicPartition) int16 { return p.ErrorCode })
}

func (s remoteShares) Delete(ctx context.Context, group, topic string) error {
	var topics []cluster.Topic
	for _, t := range s.view.Topics() {
		if topic == "" || t.Name == topic {
			topics = append(topics, t)
		}
	}
	by, err := s.byLeader(topics)
	if err != nil {
		return err
	}
	for addr, parts := range by {
		req := kmsg.NewPtrDeleteShareGroupStateRequest()
		req.GroupID = group
		for id, ps := range parts {
			rt := kmsg.NewDeleteShareGroupStateRequestTopic()
			rt.TopicID = id
			for _, p := range ps {
				rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		raw, err := s.do(ctx, addr, req)
		if err != nil {
			return err
		}
		if err := firstPartitionError(raw.(*kmsg.DeleteShareGroupStateResponse).Topics,
			func(t kmsg.DeleteShareGroupStateResponseTopic) []kmsg.DeleteShareGroupStateResponseTopicPartition {
				return t.Partitions
			},
			func(p kmsg.DeleteShareGroupStateResponseTopicPartition) int16 { return p.ErrorCode }); err != nil {
			return err
		}
	}
	return nil
}

// firstPartitionError is the first partition error of an answer's topics.
func firstPartitionError[T, P any](topics []T, partitions func(T) []P, code func(P) int16) error {
	for _, t := range topics {
		for _, p := range partitions(t) {
			if err := kerr.ErrorForCode(code(p)); err != nil {
				return err
			}
		}
	}
	return nil
}
