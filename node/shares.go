package node

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/leaderstub"
)

// embeddedShares is the group coordinator's reach into the share
// partitions of the leaders of `txncoord up` (groups.ShareState): each
// partition's state is at its leader, and every leader of the process is
// asked.
type embeddedShares struct{ e *Embedded }

func (s embeddedShares) leaders() []*leaderstub.Leader {
	return slices.Collect(maps.Values(s.e.partitionLeaders()))
}

func (s embeddedShares) ReleaseMember(group, member string) {
	for _, l := range s.leaders() {
		if err := l.ReleaseShareMember(group, member); err != nil {
			s.e.cfg.Log.Error().Err(err).Str("group", group).Str("member", member).Msg("share member's records not released")
		}
	}
}

func (s embeddedShares) Partitions(_ context.Context, group string) ([]groups.SharePartition, error) {
	var out []groups.SharePartition
	for _, l := range s.leaders() {
		for _, p := range l.ShareGroupPartitions(group) {
			out = append(out, groups.SharePartition{Topic: p.Topic, Partition: p.Partition, StartOffset: p.StartOffset,
				EndOffset: p.EndOffset, Lag: p.Lag, Acquired: p.Acquired, Available: p.Available})
		}
	}
	return out, nil
}

func (s embeddedShares) Alter(_ context.Context, group, topic string, partition int32, offset int64) error {
	l, err := s.leaderOf(topic, partition)
	if err != nil {
		return err
	}
	return l.AlterShareOffset(group, topic, partition, offset)
}

func (s embeddedShares) Delete(_ context.Context, group, topic string) error {
	var err error
	for _, l := range s.leaders() {
		err = errors.Join(err, l.DeleteShareState(group, topic, -1))
	}
	return err
}

// errNoLeader: the partition's leader is not one of this process's.
var errNoLeader = errors.New("the partition's leader is not in this process")

func (s embeddedShares) leaderOf(topic string, partition int32) (*leaderstub.Leader, error) {
	n, ok := s.e.View.LeaderOf(topic, partition)
	if !ok {
		return nil, errNoLeader
	}
	if l, ok := s.e.partitionLeaders()[n.NodeID]; ok {
		return l, nil
	}
	return nil, errNoLeader
}
