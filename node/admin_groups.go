package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/internal/groupby"
	"github.com/txncoord/txncoord/wire"
)

// groupsSource is what the admin API reads of the group coordinator:
// this node's (localGroups), or the whole cluster's on etcd (heldGroups).
// DescribeGroup's ok is false for an unknown group; its errors are of
// reaching another coordinator.
type groupsSource interface {
	ListGroups(ctx context.Context) ([]groups.GroupSummary, error)
	DescribeGroup(ctx context.Context, id string) (d groups.GroupDescription, ok bool, err error)
	DeleteGroup(ctx context.Context, id string) error
	PendingOffsets(producerID int64) []groups.PendingOffsetInfo
}

// groupsAdminBackend is the coordinator's admin backend with its group
// coordinator: it implements admin.GroupsBackend, and `txn describe` shows
// a transaction's pending offsets.
type groupsAdminBackend struct {
	*adminBackend
	groups groupsSource
	// endOffsets asks the partitions' leaders for their log end offsets
	// (ListOffsets, latest), for the lag; a partition missing from the
	// answer has an unknown end.
	endOffsets func(ctx context.Context, tps []admin.TopicPartition) map[admin.TopicPartition]int64
	// listOffsets asks the same with an isolation level: read_uncommitted
	// answers the high watermark, read_committed the last stable offset
	// (GET /v1/topics/{name}/offsets, admin_topics.go).
	listOffsets func(ctx context.Context, tps []admin.TopicPartition, isolation int8) map[admin.TopicPartition]int64
	// producers asks the partitions' leaders for their active producers
	// (DescribeProducers); a partition missing from the answer is unknown.
	producers func(ctx context.Context, tps []admin.TopicPartition) map[admin.TopicPartition][]admin.ProducerState
	// records reads a page of a partition from its leader (the record
	// browser, admin_records.go).
	records func(ctx context.Context, q admin.RecordsQuery) (admin.RecordPage, error)
}

// withGroupsAdmin is b with the node's group coordinator, when it has one.
func (c *Coordinator) withGroupsAdmin(b *adminBackend) admin.Backend {
	view := c.view
	_, dial, err := securityOf(view)
	if err != nil { // checked at start already; without it the lag is unknown
		dial = wire.DialConfig{}
	}
	var src groupsSource
	switch {
	case c.groups != nil:
		src = heldGroups{c: c, remote: remoteGroups{view: view, dial: dial, partitions: c.groups.partitions}}
	case c.Groups != nil:
		src = localGroups{c.Groups}
	default:
		return b
	}
	return withGroups(b, src, view, dial)
}

// localGroups is the one group coordinator of a node that serves every
// group.
type localGroups struct{ g *groups.Coordinator }

func (l localGroups) ListGroups(context.Context) ([]groups.GroupSummary, error) {
	return l.g.ListGroups(), nil
}

func (l localGroups) DescribeGroup(_ context.Context, id string) (groups.GroupDescription, bool, error) {
	d, ok := l.g.DescribeGroup(id)
	return d, ok, nil
}

func (l localGroups) DeleteGroup(ctx context.Context, id string) error {
	return l.g.DeleteGroup(ctx, id)
}

func (l localGroups) PendingOffsets(producerID int64) []groups.PendingOffsetInfo {
	return l.g.PendingOffsets(producerID)
}

// heldGroups is the group coordinator as the admin API of a coordinator
// on etcd sees it: the instances of the __consumer_offsets partitions this
// node, or another coordinator of this process, owns, and the groups of
// the partitions another process owns, asked of it over the Kafka protocol
// (remoteGroups), so that every coordinator's admin API answers for the
// whole cluster. A transaction's pending offsets (PendingOffsets) come
// from this process's instances only: no Kafka API lists them by producer.
type heldGroups struct {
	c      *Coordinator
	remote remoteGroups
}

// of is the instance of partition p in this process, and its owner.
func (h heldGroups) of(p int32) (*groups.Coordinator, int32) {
	node, _, ok := h.c.groups.OwnerOf(p)
	if !ok {
		return nil, -1
	}
	if g := h.c.groups.Of(p); g != nil {
		return g, node
	}
	if peer := h.c.peer(node); peer != nil && peer.groups != nil {
		return peer.groups.Of(p), node
	}
	return nil, node
}

// inProcess reports whether node runs in this process.
func (h heldGroups) inProcess(node int32) bool {
	return node == h.c.Node.NodeID || h.c.peer(node) != nil
}

// ListGroups lists the groups of this process's instances, and those of
// every other process's coordinator that owns partitions (ListGroups to
// each, as Kafka's admin client sends it to every broker). A coordinator
// that cannot be asked fails the list rather than leaving its groups out.
func (h heldGroups) ListGroups(ctx context.Context) ([]groups.GroupSummary, error) {
	var out []groups.GroupSummary
	elsewhere := map[int32]map[int32]bool{}
	for p := range h.c.groups.partitions {
		g, node := h.of(p)
		switch {
		case g != nil:
			out = append(out, g.ListGroups()...)
		case node >= 0 && !h.inProcess(node):
			if elsewhere[node] == nil {
				elsewhere[node] = map[int32]bool{}
			}
			elsewhere[node][p] = true
		}
	}
	for node, parts := range elsewhere {
		gs, err := h.remote.list(ctx, node, parts)
		if err != nil {
			return nil, err
		}
		out = append(out, gs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

func (h heldGroups) DescribeGroup(ctx context.Context, id string) (groups.GroupDescription, bool, error) {
	p := cluster.OffsetsPartitionFor(id, h.c.groups.partitions)
	g, node := h.of(p)
	switch {
	case g != nil:
		d, ok := g.DescribeGroup(id)
		return d, ok, nil
	case node >= 0 && !h.inProcess(node):
		return h.remote.describe(ctx, node, p, id)
	}
	return groups.GroupDescription{}, false, nil
}

func (h heldGroups) DeleteGroup(ctx context.Context, id string) error {
	g, node := h.of(cluster.OffsetsPartitionFor(id, h.c.groups.partitions))
	switch {
	case g != nil:
		return g.DeleteGroup(ctx, id)
	case node >= 0 && !h.inProcess(node):
		return h.remote.delete(ctx, node, id)
	}
	return fmt.Errorf("%w: group %q's partition has no coordinator right now (a takeover in progress): retry", admin.ErrConflict, id)
}

func (h heldGroups) PendingOffsets(producerID int64) []groups.PendingOffsetInfo {
	var out []groups.PendingOffsetInfo
	for p := range h.c.groups.partitions {
		if g, _ := h.of(p); g != nil {
			out = append(out, g.PendingOffsets(producerID)...)
		}
	}
	return out
}

// withGroups adds the group coordinator g to the admin backend b; the lag
// comes from ListOffsets at the leaders of view, dialed with dial.
func withGroups(b *adminBackend, g groupsSource, view *cluster.View, dial wire.DialConfig) admin.Backend {
	return &groupsAdminBackend{adminBackend: b, groups: g, endOffsets: func(ctx context.Context, tps []admin.TopicPartition) map[admin.TopicPartition]int64 {
		return listEndOffsets(ctx, view, dial, tps, isolationUncommitted)
	}, listOffsets: func(ctx context.Context, tps []admin.TopicPartition, isolation int8) map[admin.TopicPartition]int64 {
		return listEndOffsets(ctx, view, dial, tps, isolation)
	}, producers: func(ctx context.Context, tps []admin.TopicPartition) map[admin.TopicPartition][]admin.ProducerState {
		return describeProducers(ctx, view, dial, tps)
	}, records: func(ctx context.Context, q admin.RecordsQuery) (admin.RecordPage, error) {
		return fetchRecords(ctx, view, dial, q)
	}}
}

func (b *groupsAdminBackend) Transaction(id string) (admin.Txn, error) {
	t, err := b.adminBackend.Transaction(id)
	if err == nil {
		t.PendingOffsets = pendingOffsets(b.groups.PendingOffsets(t.ProducerID))
	}
	return t, err
}

func (b *groupsAdminBackend) Groups(ctx context.Context) ([]admin.GroupSummary, error) {
	gs, err := b.groups.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.GroupSummary, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupSummary(g))
	}
	return out, nil
}

func (b *groupsAdminBackend) Group(ctx context.Context, id string) (admin.GroupDetail, error) {
	g, ok, err := b.groups.DescribeGroup(ctx, id)
	if err != nil {
		return admin.GroupDetail{}, err
	}
	if !ok {
		return admin.GroupDetail{}, fmt.Errorf("%w: %q", admin.ErrGroupNotFound, id)
	}
	d := admin.GroupDetail{GroupSummary: groupSummary(g.GroupSummary), Leader: g.Leader,
		Members: []admin.GroupMember{}, Offsets: []admin.GroupOffset{}, Pending: pendingOffsets(g.Pending)}
	parts := map[admin.TopicPartition]bool{}
	for _, m := range g.Members {
		gm := admin.GroupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
			Assignment: []admin.TopicPartition{}}
		for _, tp := range m.Assignment {
			for _, p := range tp.Partitions {
				gm.Assignment = append(gm.Assignment, admin.TopicPartition{Topic: tp.Topic, Partition: p})
				parts[admin.TopicPartition{Topic: tp.Topic, Partition: p}] = true
			}
		}
		d.Members = append(d.Members, gm)
	}
	if g.Type == "share" {
		// A share group commits no offsets: its progress is each
		// share partition's start offset at the leaders.
		for _, sp := range g.SharePartitions {
			d.SharePartitions = append(d.SharePartitions, admin.SharePartition{Topic: sp.Topic, Partition: sp.Partition,
				StartOffset: sp.StartOffset, EndOffset: sp.EndOffset, Lag: sp.Lag, Acquired: sp.Acquired, Available: sp.Available})
		}
		return d, nil
	}
	for _, o := range g.Offsets {
		d.Offsets = append(d.Offsets, admin.GroupOffset{Topic: o.Topic, Partition: o.Partition, CurrentOffset: o.Offset, Metadata: o.Metadata})
		parts[admin.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = true
	}
	tps := make([]admin.TopicPartition, 0, len(parts))
	for tp := range parts {
		tps = append(tps, tp)
	}
	admin.Lag(&d, b.endOffsets(ctx, tps))
	return d, nil
}

func (b *groupsAdminBackend) DeleteGroup(ctx context.Context, id string) error {
	err := b.groups.DeleteGroup(ctx, id)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return fmt.Errorf("%w: %q", admin.ErrGroupNotFound, id)
	case errors.Is(err, kerr.NonEmptyGroup):
		return fmt.Errorf("%w: group %q has members (NON_EMPTY_GROUP): stop its consumers first", admin.ErrConflict, id)
	}
	return err
}

func groupSummary(g groups.GroupSummary) admin.GroupSummary {
	return admin.GroupSummary{Group: g.Group, Type: g.Type, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Generation: g.Generation, MemberCount: g.Members, Coordinator: g.Coordinator, OffsetsPartition: g.Partition}
}

func pendingOffsets(ps []groups.PendingOffsetInfo) []admin.PendingOffset {
	out := make([]admin.PendingOffset, 0, len(ps))
	for _, p := range ps {
		out = append(out, admin.PendingOffset{Group: p.Group, Topic: p.Topic, Partition: p.Partition, Offset: p.Offset,
			ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch})
	}
	return out
}

// ListOffsets' isolation levels.
const (
	isolationUncommitted int8 = 0
	isolationCommitted   int8 = 1
)

// listEndOffsets asks each partition's leader for its log end offset
// (ListOffsets v4+, timestamp -1; read_uncommitted: the high watermark,
// what kafka-consumer-groups.sh shows as LOG-END-OFFSET; read_committed:
// the last stable offset), one request per leader in parallel, each
// bounded by 5 s; what fails is left out.
func listEndOffsets(ctx context.Context, view *cluster.View, dial wire.DialConfig, tps []admin.TopicPartition, isolation int8) map[admin.TopicPartition]int64 {
	var mu sync.Mutex
	out := map[admin.TopicPartition]int64{}
	askLeaders(ctx, view, dial, tps, func(tps []admin.TopicPartition) kmsg.Request {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		req.IsolationLevel = isolation
		var byTopic groupby.Ordered[string, kmsg.ListOffsetsRequestTopicPartition]
		for _, tp := range tps {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = tp.Partition, -1
			byTopic.Add(tp.Topic, rp)
		}
		for topic, parts := range byTopic.All() {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic, rt.Partitions = topic, parts
			req.Topics = append(req.Topics, rt)
		}
		return req
	}, func(resp kmsg.Response) {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					out[admin.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
				}
			}
		}
	})
	return out
}

// describeProducers asks each partition's leader for its active producers
// (DescribeProducers v0).
func describeProducers(ctx context.Context, view *cluster.View, dial wire.DialConfig, tps []admin.TopicPartition) map[admin.TopicPartition][]admin.ProducerState {
	var mu sync.Mutex
	out := map[admin.TopicPartition][]admin.ProducerState{}
	askLeaders(ctx, view, dial, tps, func(tps []admin.TopicPartition) kmsg.Request {
		req := kmsg.NewPtrDescribeProducersRequest()
		var byTopic groupby.Ordered[string, int32]
		for _, tp := range tps {
			byTopic.Add(tp.Topic, tp.Partition)
		}
		for topic, parts := range byTopic.All() {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = topic, parts
			req.Topics = append(req.Topics, rt)
		}
		return req
	}, func(resp kmsg.Response) {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range resp.(*kmsg.DescribeProducersResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					continue
				}
				states := make([]admin.ProducerState, 0, len(p.ActiveProducers))
				for _, ap := range p.ActiveProducers {
					states = append(states, admin.ProducerState{ProducerID: ap.ProducerID, ProducerEpoch: ap.ProducerEpoch,
						LastSequence: ap.LastSequence, LastTimestampMs: ap.LastTimestamp, CoordinatorEpoch: ap.CoordinatorEpoch,
						CurrentTxnStartOffset: ap.CurrentTxnStartOffset})
				}
				out[admin.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = states
			}
		}
	})
	return out
}

// askLeaders sends, to each leader of tps at once, the request build makes
// for its partitions (sorted by topic), and hands each answer to read
// (concurrently). A leader that cannot be reached within 5 s is left out:
// its partitions are missing from what read sees.
func askLeaders(ctx context.Context, view *cluster.View, dial wire.DialConfig, tps []admin.TopicPartition,
	build func([]admin.TopicPartition) kmsg.Request, read func(kmsg.Response)) {
	byLeader := map[string][]admin.TopicPartition{}
	for _, tp := range tps {
		if n, ok := view.LeaderOf(tp.Topic, tp.Partition); ok && n.Addr != "" {
			byLeader[n.Addr] = append(byLeader[n.Addr], tp)
		}
	}
	var wg sync.WaitGroup
	for addr, tps := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			cl, err := wire.DialWith(ctx, addr, "txncoord-admin", dial)
			if err != nil {
				return
			}
			defer cl.Close()
			sort.Slice(tps, func(i, j int) bool { return tps[i].Topic < tps[j].Topic })
			resp, err := cl.Do(ctx, build(tps))
			if err != nil {
				return
			}
			read(resp)
		}()
	}
	wg.Wait()
}
