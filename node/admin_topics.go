package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/topics"
)

// The admin API's topics (admin.TopicsBackend), through the topic
// controller: the same checks and answers as CreateTopics and DeleteTopics
// over the Kafka protocol, their Kafka errors mapped to HTTP statuses.

var _ admin.TopicsBackend = (*adminBackend)(nil)

func (b *adminBackend) adminTopic(i topics.Info) admin.Topic {
	t := adminTopic(i)
	if b.cleanable == nil {
		return t
	}
	for j := range t.PartitionInfo {
		if r, ok := b.cleanable(t.Name, t.PartitionInfo[j].Partition); ok {
			t.PartitionInfo[j].CleanableRatio = &r
		}
	}
	return t
}

func adminTopic(i topics.Info) admin.Topic {
	t := admin.Topic{Name: i.Name, ID: i.ID, Partitions: i.Partitions, ReplicationFactor: i.ReplicationFactor,
		RequestedReplicationFactor: i.RequestedReplicationFactor, Internal: i.Internal, Configs: i.Configs}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	for p, leader := range i.Leaders {
		// The replicas as Metadata reports them; the leader keeps the
		// one copy, the only replica in sync.
		replicas := []int32{leader}
		if p < len(i.Replicas) {
			replicas = i.Replicas[p]
		}
		t.PartitionInfo = append(t.PartitionInfo, admin.TopicPartitionInfo{Partition: int32(p), Leader: leader,
			Replicas: replicas, Isr: []int32{leader}})
	}
	return t
}

// errNotController answers the topic admin API on a coordinator that
// does not run the controller: node 0, or with several coordinators on
// etcd the holder of its lease (Metadata's ControllerID).
var errNotController = fmt.Errorf("%w: topics are administered by the controller (Metadata's ControllerID): use its admin API", admin.ErrConflict)

// controller is the topic controller this backend administers, or nil.
func (b *adminBackend) controller() *topics.Controller {
	if b.topics == nil {
		return nil
	}
	return b.topics()
}

func (b *adminBackend) Topics(context.Context) ([]admin.Topic, error) {
	ctl := b.controller()
	if ctl == nil {
		return nil, errNotController
	}
	var out []admin.Topic
	for _, i := range ctl.List() {
		out = append(out, b.adminTopic(i))
	}
	return out, nil
}

func (b *adminBackend) Topic(_ context.Context, name string) (admin.Topic, error) {
	ctl := b.controller()
	if ctl == nil {
		return admin.Topic{}, errNotController
	}
	i, ok := ctl.Describe(name)
	if !ok {
		return admin.Topic{}, fmt.Errorf("%w: %q", admin.ErrTopicNotFound, name)
	}
	return b.adminTopic(i), nil
}

func (b *adminBackend) CreateTopic(ctx context.Context, req admin.CreateTopic) (admin.Topic, error) {
	ctl := b.controller()
	if ctl == nil {
		return admin.Topic{}, errNotController
	}
	spec := topics.Spec{Name: req.Name, Partitions: req.Partitions, ReplicationFactor: req.ReplicationFactor}
	if spec.Partitions == 0 {
		spec.Partitions = -1
	}
	if spec.ReplicationFactor == 0 {
		spec.ReplicationFactor = -1
	}
	if len(req.Configs) > 0 {
		spec.Configs = map[string]*string{}
		for k, v := range req.Configs {
			spec.Configs[k] = &v
		}
	}
	res := ctl.Create(ctx, []topics.Spec{spec}, req.ValidateOnly)[0]
	if res.Err != nil {
		return admin.Topic{}, topicError(req.Name, res)
	}
	if req.ValidateOnly {
		return adminTopic(res.Info), nil
	}
	if i, ok := ctl.Describe(req.Name); ok {
		return adminTopic(i), nil
	}
	return adminTopic(res.Info), nil
}

func (b *adminBackend) DeleteTopic(ctx context.Context, name string) error {
	ctl := b.controller()
	if ctl == nil {
		return errNotController
	}
	if res := ctl.Delete(ctx, []string{name})[0]; res.Err != nil {
		return topicError(name, res)
	}
	return nil
}

// topicError words a controller's refusal with its Kafka error, wrapped
// in the admin error that picks the HTTP status.
func topicError(name string, res topics.Result) error {
	var kind error
	switch res.Err {
	case kerr.UnknownTopicOrPartition:
		kind = admin.ErrTopicNotFound
	case kerr.TopicAlreadyExists:
		kind = admin.ErrTopicExists
	case kerr.InvalidTopicException, kerr.InvalidPartitions, kerr.InvalidReplicationFactor, kerr.InvalidReplicaAssignment,
		kerr.InvalidConfig, kerr.PolicyViolation, kerr.InvalidRequest:
		kind = admin.ErrInvalid
	default:
		return fmt.Errorf("topic %q: %s (%s)", name, res.Msg, res.Err.Message)
	}
	return fmt.Errorf("%w: topic %q: %s (%s)", kind, name, res.Msg, res.Err.Message)
}

var _ admin.PartitionOffsetsBackend = (*groupsAdminBackend)(nil)

// PartitionOffsets asks each partition's leader for its high watermark and
// last stable offset. It is served by the backend that reaches the
// leaders (the one with the group coordinator, which asks them for the
// lag too).
func (b *groupsAdminBackend) PartitionOffsets(ctx context.Context, name string) ([]admin.PartitionOffsets, error) {
	offsets, _, err := b.PartitionOffsetsPage(ctx, name, 0, 0)
	return offsets, err
}

// PartitionOffsetsPage is admin.PartitionOffsetsPager: the leaders are
// asked for the page's partitions only (limit 0: all from offset).
func (b *groupsAdminBackend) PartitionOffsetsPage(ctx context.Context, name string, offset, limit int) ([]admin.PartitionOffsets, int, error) {
	t, err := b.Topic(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	total := len(t.PartitionInfo)
	start, end := admin.TxnPageQuery{Offset: offset, Limit: limit}.Bounds(total)
	t.PartitionInfo = t.PartitionInfo[start:end]
	tps := make([]admin.TopicPartition, 0, len(t.PartitionInfo))
	for _, p := range t.PartitionInfo {
		tps = append(tps, admin.TopicPartition{Topic: name, Partition: p.Partition})
	}
	var hw, lso map[admin.TopicPartition]int64
	var producers map[admin.TopicPartition][]admin.ProducerState
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		hw = b.listOffsets(ctx, tps, isolationUncommitted)
	}()
	go func() {
		defer wg.Done()
		if b.producers != nil {
			producers = b.producers(ctx, tps)
		}
	}()
	lso = b.listOffsets(ctx, tps, isolationCommitted)
	wg.Wait()
	out := make([]admin.PartitionOffsets, 0, len(t.PartitionInfo))
	for _, p := range t.PartitionInfo {
		tp := admin.TopicPartition{Topic: name, Partition: p.Partition}
		o := admin.PartitionOffsets{Partition: p.Partition, Leader: p.Leader, HighWatermark: -1, LastStableOffset: -1}
		if v, ok := hw[tp]; ok {
			o.HighWatermark = v
		}
		if v, ok := lso[tp]; ok {
			o.LastStableOffset = v
		}
		o.Producers = producers[tp]
		out = append(out, o)
	}
	return out, total, nil
}
