package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionGroups gives each producer the partitions its transactions write
// to: perTxn partitions on different leaders where the cluster has that many,
// and producers spread over all partitions of the topic so that no single
// partition serialises the whole run. The layout is read from Metadata, so
// it holds for any target whatever its leader assignment.
func partitionGroups(ctx context.Context, seeds []string, topic string, producers, perTxn int) ([][]int32, error) {
	byLeader, err := leadersOf(ctx, seeds, topic)
	if err != nil {
		return nil, err
	}
	return assignGroups(byLeader, producers, perTxn), nil
}

// assignGroups is the pure part of partitionGroups: byLeader maps a leader
// node id to the partitions it leads.
func assignGroups(byLeader map[int32][]int32, producers, perTxn int) [][]int32 {
	leaders := make([]int32, 0, len(byLeader))
	for id, parts := range byLeader {
		slices.Sort(parts)
		leaders = append(leaders, id)
	}
	slices.Sort(leaders)
	groups := make([][]int32, producers)
	for i := range groups {
		group := make([]int32, 0, perTxn)
		for j := range perTxn {
			// Producer i starts at leader i and walks the leaders, so that
			// consecutive partitions of one transaction are on different
			// leaders; the round over leaders picks which of that leader's
			// partitions.
			slot := i + j
			leader := leaders[slot%len(leaders)]
			parts := byLeader[leader]
			group = append(group, parts[(i/len(leaders)+j/len(leaders))%len(parts)])
		}
		groups[i] = group
	}
	return groups
}

// leadersOf polls Metadata until every partition of topic has a leader.
func leadersOf(ctx context.Context, seeds []string, topic string) (map[int32][]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			byLeader, lerr := parseLeaders(resp, topic)
			if lerr == nil {
				return byLeader, nil
			}
			err = lerr
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("metadata for topic %q: %w", topic, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func parseLeaders(resp *kmsg.MetadataResponse, topic string) (map[int32][]int32, error) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("topic error code %d", t.ErrorCode)
		}
		if len(t.Partitions) == 0 {
			return nil, fmt.Errorf("no partitions yet")
		}
		byLeader := map[int32][]int32{}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return nil, fmt.Errorf("partition %d has no leader", p.Partition)
			}
			byLeader[p.Leader] = append(byLeader[p.Leader], p.Partition)
		}
		return byLeader, nil
	}
	return nil, fmt.Errorf("topic not in metadata")
}
