package groups

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/txnrules"
)

// Offsets in the core: committed offsets, transactional offsets pending
// their marker, and per __consumer_offsets partition the producer state
// the marker rules read (txnrules, shared with leaderstub).

// offsetsPartition is one __consumer_offsets partition.
type offsetsPartition struct {
	// next is the position of the next write in the partition (a
	// logical log end: commits, transactional commits and markers each
	// take one). A producer's open transaction starts at one.
	next      int64
	producers map[int64]*ProducerState
}

// ProducerState is a producer's state on one __consumer_offsets partition.
type ProducerState struct {
	txnrules.Producer
	// TxnStart is the position its open transaction started at (-1: none),
	// what DescribeProducers shows as CurrentTxnStartOffset.
	TxnStart      int64
	LastTimestamp int64
}

func (c *Core) partitionOf(group string) int32 { return offsetsPartitionFor(group, c.partitions) }

func (c *Core) part(p int32) *offsetsPartition {
	op := c.parts[p]
	if op == nil {
		op = &offsetsPartition{producers: map[int64]*ProducerState{}}
		c.parts[p] = op
	}
	return op
}

// position takes the next position of partition p and stores the
// partition's end with the step's ops.
func (c *Core) position(p int32) int64 {
	part := c.part(p)
	pos := part.next
	part.next++
	c.ops = append(c.ops, putPartitionOp(p, part.next))
	return pos
}

// CommitRequest is an OffsetCommit or TxnOffsetCommit in plain values,
// once the shell answered the partitions it refuses by themselves
// (unknown topic, metadata too large).
type CommitRequest struct {
	Group, MemberID, InstanceID string
	Generation                  int32
	Offsets                     map[TP]Offset
	// Version is the request's version (OffsetCommit: v9+ is required of
	// a consumer group's members, and answers GROUP_ID_NOT_FOUND for a
	// group that does not exist).
	Version int16
}

// validateCommit is ClassicGroup.validateOffsetCommit (transactional for
// TxnOffsetCommit, where v3+ checks are KIP-447's).
func validateCommit(g *Group, req CommitRequest, transactional bool) int16 {
	if g.Type == TypeConsumer {
		return validateConsumerCommit(g, req, transactional)
	}
	if g.Type != TypeClassic {
		return kerr.GroupIDNotFound.Code
	}
	if g.State == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if req.Generation < 0 && g.State == Empty {
		return 0 // a simple consumer or the admin client
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "" {
		if code := validateMember(g, req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.Generation {
			return kerr.IllegalGeneration.Code
		}
	} else if !transactional && g.State != Empty {
		return kerr.UnknownMemberID.Code
	}
	if !transactional && g.State == CompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// commitGroup finds or creates (for a generation below 0) the group of a
// commit.
func (c *Core) commitGroup(now time.Time, req CommitRequest, transactional bool) (*Group, int16) {
	if c.shareGroups[req.Group] != nil {
		return nil, kerr.GroupIDNotFound.Code // a share group commits no offsets
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 && !transactional && req.Version >= 9 {
			return nil, kerr.GroupIDNotFound.Code
		}
		if req.Generation >= 0 {
			return nil, kerr.IllegalGeneration.Code // the group expired
		}
		g = c.newGroup(req.Group, now)
		g.metadataDirty = true
	}
	if code := validateCommit(g, req, transactional); code != 0 {
		c.event(g.ID, false, "offset commit refused: "+errName(code)+" member="+req.MemberID+
			" generation="+itoa(int64(req.Generation)))
		return nil, code
	}
	return g, 0
}

// Commit handles an OffsetCommit: a group-level error, or 0 and the
// offsets stored.
func (c *Core) Commit(now time.Time, req CommitRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	g, code := c.commitGroup(now, req, false)
	if code != 0 {
		return code
	}
	if m := g.Members[req.MemberID]; m != nil {
		m.heartbeatDeadline = now.Add(m.SessionTimeout)
	}
	for tp, o := range req.Offsets {
		o.CommitTime = now
		o.Record = c.position(g.partition)
		g.Offsets[tp] = o
		c.ops = append(c.ops, putOffsetOp(bucketOffsets, g.ID, 0, tp, o))
	}
	return 0
}

// TxnCommit handles a TxnOffsetCommit once the transaction coordinator
// accepted its partition: the offsets wait in the group, by producer id,
// for the marker.
func (c *Core) TxnCommit(now time.Time, req CommitRequest, producerID int64, producerEpoch int16) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	g, code := c.commitGroup(now, req, true)
	if code != 0 {
		return code
	}
	part := c.part(g.partition)
	ps := part.producers[producerID]
	if ps == nil {
		ps = &ProducerState{Producer: txnrules.None, TxnStart: -1, LastTimestamp: -1}
	}
	if err := txnrules.CheckTxnWrite(ps.Producer, producerEpoch); err != nil {
		c.event(g.ID, false, "transactional offset commit refused: INVALID_PRODUCER_EPOCH pid="+itoa(producerID))
		return kerr.InvalidProducerEpoch.Code
	}
	pos := c.position(g.partition)
	next := *ps
	next.Producer = txnrules.ApplyTxnWrite(ps.Producer, producerEpoch)
	if !ps.TxnOpen {
		next.TxnStart = pos
	}
	next.LastTimestamp = now.UnixMilli()
	part.producers[producerID] = &next
	c.ops = append(c.ops, putProducerOp(g.partition, producerID, &next))
	if g.Txn[producerID] == nil {
		g.Txn[producerID] = map[TP]Offset{}
	}
	for tp, o := range req.Offsets {
		o.CommitTime, o.Record, o.ProducerEpoch = now, pos, producerEpoch
		g.Txn[producerID][tp] = o
		c.ops = append(c.ops, putOffsetOp(bucketTxn, g.ID, producerID, tp, o))
	}
	return 0
}

// Marker handles one WriteTxnMarkers partition of __consumer_offsets:
// validated by txnrules exactly as a leader validates it (tv is the rule's
// TV, already mapped from the request); on accept a COMMIT moves the
// producer's pending offsets of every group of the partition into the
// committed ones, an ABORT drops them.
func (c *Core) Marker(now time.Time, partition int32, producerID int64, epoch int16, coordinatorEpoch int32, tv int8, commit bool) error {
	part := c.part(partition)
	ps := part.producers[producerID]
	if ps == nil {
		ps = &ProducerState{Producer: txnrules.None, TxnStart: -1, LastTimestamp: -1}
	}
	if err := txnrules.CheckMarker(ps.Producer, epoch, coordinatorEpoch, tv); err != nil {
		return err
	}
	c.position(partition)
	next := *ps
	next.Producer = txnrules.ApplyMarker(ps.Producer, epoch, coordinatorEpoch)
	next.TxnStart = -1
	next.LastTimestamp = now.UnixMilli()
	part.producers[producerID] = &next
	c.ops = append(c.ops, putProducerOp(partition, producerID, &next))
	for _, gid := range c.GroupIDs() {
		g := c.groups[gid]
		pending := g.Txn[producerID]
		if g.partition != partition || pending == nil {
			continue
		}
		for tp, o := range pending {
			c.ops = append(c.ops, op{bucket: bucketTxn, key: offsetKey(g.ID, producerID, tp)})
			if !commit {
				continue
			}
			if cur, ok := g.Offsets[tp]; ok && cur.Record > o.Record {
				continue // a plain commit written after the transaction's wins, as in Kafka
			}
			o.ProducerEpoch = 0
			g.Offsets[tp] = o
			c.ops = append(c.ops, putOffsetOp(bucketOffsets, g.ID, 0, tp, o))
		}
		delete(g.Txn, producerID)
	}
	return nil
}

// Producers returns the producer states of a __consumer_offsets partition.
func (c *Core) Producers(partition int32) map[int64]ProducerState {
	out := map[int64]ProducerState{}
	if part := c.parts[partition]; part != nil {
		for pid, ps := range part.producers {
			out[pid] = *ps
		}
	}
	return out
}

// FetchedOffset is one partition of an OffsetFetch answer.
type FetchedOffset struct {
	TP
	Offset
	Err int16
}

// Fetch handles one group of an OffsetFetch: tps nil means every
// partition with a committed offset. Pending transactional offsets are
// not shown; with requireStable a partition that has some is
// UNSTABLE_OFFSET_COMMIT.
func (c *Core) Fetch(group string, tps []TP, requireStable bool) []FetchedOffset {
	g := c.groups[group]
	if tps == nil {
		if g == nil {
			return nil
		}
		for tp := range g.Offsets {
			tps = append(tps, tp)
		}
		sortTPs(tps)
	}
	out := make([]FetchedOffset, 0, len(tps))
	for _, tp := range tps {
		f := FetchedOffset{TP: tp, Offset: Offset{Offset: -1, LeaderEpoch: -1}}
		if g != nil {
			if requireStable && g.hasPending(tp) {
				f.Err = kerr.UnstableOffsetCommit.Code
			} else if o, ok := g.Offsets[tp]; ok {
				f.Offset = o
			}
		}
		out = append(out, f)
	}
	return out
}

func (g *Group) hasPending(tp TP) bool {
	for _, pending := range g.Txn {
		if _, ok := pending[tp]; ok {
			return true
		}
	}
	return false
}

// DeleteGroup handles one group of DeleteGroups: GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, or 0 with the group and its committed offsets gone.
// Pending transactional offsets stay until their marker, which commits
// them into a group of their own again, as in Kafka.
func (c *Core) DeleteGroup(now time.Time, id string) int16 {
	g := c.groups[id]
	switch {
	case g == nil || g.State == Dead:
		return kerr.GroupIDNotFound.Code
	case g.State != Empty:
		c.event(id, false, "delete refused: NON_EMPTY_GROUP")
		return kerr.NonEmptyGroup.Code
	}
	for tp := range g.Offsets {
		c.ops = append(c.ops, op{bucket: bucketOffsets, key: offsetKey(id, 0, tp)})
	}
	g.Offsets = map[TP]Offset{}
	if len(g.Txn) > 0 {
		g.metadataDirty = true // an empty group holding pending offsets
		return 0
	}
	c.deleteGroup(g)
	c.event(id, true, "group deleted")
	return 0
}

// OffsetDelete handles OffsetDelete: a group-level error, or a code per
// partition (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member of the group
// subscribes to).
func (c *Core) OffsetDelete(now time.Time, id string, tps []TP) (int16, []int16) {
	g := c.groups[id]
	if g == nil || g.State == Dead {
		return kerr.GroupIDNotFound.Code, nil
	}
	if g.State != Empty && g.ProtocolType != "consumer" {
		return kerr.NonEmptyGroup.Code, nil
	}
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		if g.State != Empty && subscribed(g, tp.Topic) {
			codes[i] = kerr.GroupSubscribedToTopic.Code
			continue
		}
		if _, ok := g.Offsets[tp]; ok {
			delete(g.Offsets, tp)
			c.ops = append(c.ops, op{bucket: bucketOffsets, key: offsetKey(id, 0, tp)})
		}
	}
	return 0, codes
}

// ExpireOffsets drops offsets older than the retention: of an Empty
// consumer group counted from when it became Empty, of a group without a
// protocol (simple consumers, the admin client) from each commit. An
// Empty group left with no offsets is deleted.
func (c *Core) ExpireOffsets(now time.Time) (expired int) {
	for _, id := range c.GroupIDs() {
		g := c.groups[id]
		if g.Type == TypeConsumer {
			expired += c.expireConsumerOffsets(now, g)
			continue
		}
		if g.State != Empty || g.Type != TypeClassic {
			continue
		}
		for tp, o := range g.Offsets {
			base := o.CommitTime
			if g.ProtocolType != "" && g.StateSince.After(base) {
				base = g.StateSince
			}
			if !now.Before(base.Add(c.t.OffsetsRetention)) {
				delete(g.Offsets, tp)
				c.ops = append(c.ops, op{bucket: bucketOffsets, key: offsetKey(id, 0, tp)})
				expired++
			}
		}
		if len(g.Offsets) == 0 && len(g.Txn) == 0 && len(g.Pending) == 0 {
			c.deleteGroup(g)
			c.event(id, true, "empty group with no offsets left: deleted")
		}
	}
	return expired
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func errName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return itoa(int64(code))
}
