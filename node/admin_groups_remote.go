package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/wire"
)

// remoteGroups reaches the groups of the __consumer_offsets partitions
// another process owns, over the Kafka protocol as Kafka's admin client
// does: ListGroups to each coordinator owning partitions, DescribeGroups,
// OffsetFetch and DeleteGroups to a group's coordinator, dialed as this
// node dials the others (its inter-node credentials). What these APIs do
// not carry is shown as unknown: a group's generation is -1, and so are a
// pending transactional offset's offset, producer id and epoch (OffsetFetch
// with RequireStable names only the partitions that have one, asked of the
// topics the group committed or is assigned).
type remoteGroups struct {
	view       *cluster.View
	dial       wire.DialConfig
	partitions int32
}

// remoteGroupsTimeout bounds one request to another coordinator.
const remoteGroupsTimeout = 10 * time.Second

// ownerConn is one connection to another coordinator, kept for the
// requests of one admin operation (a describe asks up to five), so that
// the dial and its SASL handshake are made once per operation.
type ownerConn struct {
	node int32
	addr string
	cl   *wire.Client
}

// open dials coordinator node; the caller closes the connection.
func (r remoteGroups) open(ctx context.Context, node int32) (*ownerConn, error) {
	n, ok := r.view.Node(node)
	if !ok || n.Addr == "" {
		return nil, fmt.Errorf("coordinator %d is not in the cluster file", node)
	}
	ctx, cancel := context.WithTimeout(ctx, remoteGroupsTimeout)
	defer cancel()
	cl, err := wire.DialWith(ctx, n.Addr, "txncoord-admin", r.dial)
	if err != nil {
		return nil, fmt.Errorf("coordinator %d (%s): %w", node, n.Addr, err)
	}
	return &ownerConn{node: node, addr: n.Addr, cl: cl}, nil
}

func (c *ownerConn) Close() { c.cl.Close() }

// ask sends req to the coordinator.
func (c *ownerConn) ask(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteGroupsTimeout)
	defer cancel()
	resp, err := c.cl.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("coordinator %d (%s): %s: %w", c.node, c.addr, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// list is the groups coordinator node serves among partitions (those
// this node sees it owning: a group of a partition moving away is left to
// its next owner), each with its protocol (assignor) and member count
// (DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe), a KIP-848
// consumer or share group with its epoch as generation.
func (r remoteGroups) list(ctx context.Context, node int32, partitions map[int32]bool) ([]groups.GroupSummary, error) {
	c, err := r.open(ctx, node)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.SetVersion(5) // state (v4) and type (v5)
	resp, err := c.ask(ctx, lreq)
	if err != nil {
		return nil, err
	}
	lresp := resp.(*kmsg.ListGroupsResponse)
	if lresp.ErrorCode != 0 {
		return nil, fmt.Errorf("coordinator %d: ListGroups: %w", node, kerr.ErrorForCode(lresp.ErrorCode))
	}
	var out []groups.GroupSummary
	index := map[string]int{}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.SetVersion(5)
	creq := kmsg.NewPtrConsumerGroupDescribeRequest()
	sreq := kmsg.NewPtrShareGroupDescribeRequest()
	sreq.SetVersion(1) // v0 was Kafka's early access
	for _, g := range lresp.Groups {
		p := cluster.OffsetsPartitionFor(g.Group, r.partitions)
		if !partitions[p] {
			continue
		}
		if g.GroupType == "share" {
			p = -1 // as the share group's own summary shows it
		}
		index[g.Group] = len(out)
		out = append(out, groups.GroupSummary{Group: g.Group, Type: g.GroupType, State: g.GroupState, ProtocolType: g.ProtocolType,
			Generation: -1, Members: -1, Coordinator: node, Partition: p})
		switch g.GroupType {
		case "classic":
			dreq.Groups = append(dreq.Groups, g.Group)
		case "consumer":
			creq.Groups = append(creq.Groups, g.Group)
		case "share":
			sreq.GroupIDs = append(sreq.GroupIDs, g.Group)
		}
	}
	if len(dreq.Groups) > 0 {
		resp, err := c.ask(ctx, dreq)
		if err != nil {
			return nil, err
		}
		for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
			if i, ok := index[g.Group]; ok && g.ErrorCode == 0 {
				out[i].Protocol, out[i].Members = g.Protocol, len(g.Members)
			}
		}
	}
	if len(creq.Groups) > 0 {
		resp, err := c.ask(ctx, creq)
		if err != nil {
			return nil, err
		}
		for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			if i, ok := index[g.Group]; ok && g.ErrorCode == 0 {
				out[i].Protocol, out[i].Members, out[i].Generation = g.AssignorName, len(g.Members), g.Epoch
			}
		}
	}
	if len(sreq.GroupIDs) > 0 {
		resp, err := c.ask(ctx, sreq)
		if err != nil {
			return nil, err
		}
		for _, g := range resp.(*kmsg.ShareGroupDescribeResponse).Groups {
			if i, ok := index[g.GroupID]; ok && g.ErrorCode == 0 {
				out[i].Protocol, out[i].Members, out[i].Generation = g.Assignor, len(g.Members), g.GroupEpoch
			}
		}
	}
	return out, nil
}

// describe describes group id of partition p at its coordinator node:
// members and their assignment (DescribeGroups, or ConsumerGroupDescribe
// for a KIP-848 consumer group), committed offsets and the partitions with
// pending transactional offsets (OffsetFetch, then again with
// RequireStable). ok is false for a group the coordinator does not know;
// a share group is a conflict: its share partitions have no Kafka API
// that describes them as the admin API does.
func (r remoteGroups) describe(ctx context.Context, node, p int32, id string) (d groups.GroupDescription, ok bool, err error) {
	// The owner's Kafka version says which group APIs it serves.
	n, _ := r.view.Node(node)
	c, err := r.open(ctx, node)
	if err != nil {
		return d, false, err
	}
	defer c.Close()
	if d, ok, err = c.describeClassic(ctx, p, id); err == nil && !ok && groups.ServesConsumerProtocol(n.KafkaVersion) {
		d, ok, err = c.describeConsumer(ctx, p, id)
	}
	if err == nil && !ok && groups.ServesShareGroups(n.KafkaVersion) {
		err = c.notShare(ctx, id)
	}
	if err != nil || !ok {
		return d, false, err
	}
	committed, err := r.fetch(ctx, c, id, nil, false)
	if err != nil {
		return d, false, err
	}
	// A pending offset may be on a partition without a committed one:
	// RequireStable is asked of every partition of the group's topics.
	topics := map[string]bool{}
	for _, o := range committed {
		topics[o.topic] = true
		if o.ErrorCode == 0 && o.Offset >= 0 {
			d.Offsets = append(d.Offsets, groups.OffsetInfo{Topic: o.topic, Partition: o.Partition, Offset: o.Offset, Metadata: deref(o.Metadata)})
		}
	}
	for _, m := range d.Members {
		for _, tp := range m.Assignment {
			topics[tp.Topic] = true
		}
	}
	if len(topics) == 0 {
		return d, true, nil
	}
	stable, err := r.fetch(ctx, c, id, topics, true)
	if err != nil {
		return d, false, err
	}
	for _, o := range stable {
		if o.ErrorCode == kerr.UnstableOffsetCommit.Code {
			d.Pending = append(d.Pending, groups.PendingOffsetInfo{Group: id, OffsetInfo: groups.OffsetInfo{Topic: o.topic, Partition: o.Partition, Offset: -1},
				ProducerID: -1, ProducerEpoch: -1})
		}
	}
	return d, true, nil
}

// describeClassic describes a classic group (DescribeGroups); ok is false
// for another (DescribeGroups answers it Dead, as an unknown one).
func (c *ownerConn) describeClassic(ctx context.Context, p int32, id string) (d groups.GroupDescription, ok bool, err error) {
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.SetVersion(5)
	dreq.Groups = []string{id}
	resp, err := c.ask(ctx, dreq)
	if err != nil {
		return d, false, err
	}
	g, err := onlyGroup(c.node, dreq, resp.(*kmsg.DescribeGroupsResponse).Groups)
	if err != nil {
		return d, false, err
	}
	if err := groupErr(c.node, g.ErrorCode); err != nil || g.State == "Dead" {
		return d, false, err
	}
	d = newDescription(groups.GroupSummary{Group: id, Type: "classic", State: g.State, ProtocolType: g.ProtocolType,
		Protocol: g.Protocol, Generation: -1, Members: len(g.Members), Coordinator: c.node, Partition: p})
	for _, m := range g.Members {
		mi := groups.MemberInfo{MemberID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, ClientHost: m.ClientHost,
			AssignmentBytes: m.MemberAssignment}
		var a kmsg.ConsumerMemberAssignment
		if g.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 && a.ReadFrom(m.MemberAssignment) == nil {
			for _, t := range a.Topics {
				mi.Assignment = append(mi.Assignment, groups.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		d.Members = append(d.Members, mi)
	}
	return d, true, nil
}

// describeConsumer describes a KIP-848 consumer group
// (ConsumerGroupDescribe); ok is false for another.
func (c *ownerConn) describeConsumer(ctx context.Context, p int32, id string) (d groups.GroupDescription, ok bool, err error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{id}
	resp, err := c.ask(ctx, req)
	if err != nil {
		return d, false, err
	}
	g, err := onlyGroup(c.node, req, resp.(*kmsg.ConsumerGroupDescribeResponse).Groups)
	if err != nil {
		return d, false, err
	}
	if g.ErrorCode == kerr.GroupIDNotFound.Code {
		return d, false, nil
	}
	if err := groupErr(c.node, g.ErrorCode); err != nil {
		return d, false, err
	}
	d = newDescription(groups.GroupSummary{Group: id, Type: "consumer", State: g.State, ProtocolType: "consumer",
		Protocol: g.AssignorName, Generation: g.Epoch, Members: len(g.Members), Coordinator: c.node, Partition: p})
	for _, m := range g.Members {
		mi := groups.MemberInfo{MemberID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, ClientHost: m.ClientHost}
		for _, t := range m.Assignment.TopicPartitions {
			mi.Assignment = append(mi.Assignment, groups.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
		d.Members = append(d.Members, mi)
	}
	return d, true, nil
}

// notShare is the conflict of a share group of another process
// (ShareGroupDescribe knows it), nil for no group.
func (c *ownerConn) notShare(ctx context.Context, id string) error {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.SetVersion(1) // v0 was Kafka's early access
	req.GroupIDs = []string{id}
	resp, err := c.ask(ctx, req)
	if err != nil {
		return err
	}
	for _, g := range resp.(*kmsg.ShareGroupDescribeResponse).Groups {
		if g.GroupID == id && g.ErrorCode == 0 {
			return fmt.Errorf("%w: %q is a share group of coordinator %d: its share partitions are described by that coordinator's admin API", admin.ErrConflict, id, c.node)
		}
	}
	return nil
}

func newDescription(s groups.GroupSummary) groups.GroupDescription {
	return groups.GroupDescription{GroupSummary: s, Members: []groups.MemberInfo{}, Offsets: []groups.OffsetInfo{}, Pending: []groups.PendingOffsetInfo{}}
}

// fetchedOffset is one partition of an OffsetFetch answer.
type fetchedOffset struct {
	topic string
	kmsg.OffsetFetchResponseTopicPartition
}

// fetch is group id's committed offsets at coordinator node (OffsetFetch
// v7): of every partition of topics, or with topics nil, of every
// partition with a committed offset; with requireStable a partition with
// pending transactional offsets answers UNSTABLE_OFFSET_COMMIT.
func (r remoteGroups) fetch(ctx context.Context, c *ownerConn, id string, topics map[string]bool, requireStable bool) ([]fetchedOffset, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group, req.RequireStable = id, requireStable
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		t, ok := r.view.Known(name)
		if !ok {
			continue
		}
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic = name
		for p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	if topics != nil && req.Topics == nil {
		return nil, nil
	}
	resp, err := c.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	oresp := resp.(*kmsg.OffsetFetchResponse)
	if err := groupErr(c.node, oresp.ErrorCode); err != nil {
		return nil, err
	}
	var out []fetchedOffset
	for _, t := range oresp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fetchedOffset{topic: t.Topic, OffsetFetchResponseTopicPartition: p})
		}
	}
	return out, nil
}

// delete deletes group id at its coordinator node (DeleteGroups): its
// error code as the group coordinator's own DeleteGroup returns it.
func (r remoteGroups) delete(ctx context.Context, node int32, id string) error {
	c, err := r.open(ctx, node)
	if err != nil {
		return err
	}
	defer c.Close()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.SetVersion(2)
	req.Groups = []string{id}
	resp, err := c.ask(ctx, req)
	if err != nil {
		return err
	}
	g, err := onlyGroup(node, req, resp.(*kmsg.DeleteGroupsResponse).Groups)
	if err != nil {
		return err
	}
	switch code := g.ErrorCode; code {
	case kerr.GroupIDNotFound.Code, kerr.NonEmptyGroup.Code:
		return kerr.ErrorForCode(code)
	default:
		return groupErr(node, code)
	}
}

// onlyGroup is the one group of the answer to req, which names one.
func onlyGroup[G any](node int32, req kmsg.Request, gs []G) (G, error) {
	if len(gs) != 1 {
		var none G
		return none, fmt.Errorf("coordinator %d: %s answered %d groups for one", node, kmsg.NameForKey(req.Key()), len(gs))
	}
	return gs[0], nil
}

// groupErr is the admin error of a group coordinator's error code: a
// coordinator that no longer owns the group's partition (a takeover) is a
// conflict to retry.
func groupErr(node int32, code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		return fmt.Errorf("%w: coordinator %d: %v: the group's partition is moving: retry", admin.ErrConflict, node, kerr.ErrorForCode(code))
	}
	return fmt.Errorf("coordinator %d: %w", node, kerr.ErrorForCode(code))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
