package coordinator

// AddPartitionsToTxn (key 24), v0–v5.
//
// Behavior:
//   - v0–v3 come from clients: one transaction; the client TV becomes 0.
//   - v4–v5 come from partition leaders (KIP-890): a batch of
//     transactions, each with VerifyOnly; VerifyOnly=false adds the
//     partitions (TV2 implicit add, client TV 2), VerifyOnly=true only
//     checks them (TRANSACTION_ABORTABLE for a partition not in the txn).
//   - an unknown topic or partition gets UNKNOWN_TOPIC_OR_PARTITION and the
//     other partitions of that transaction OPERATION_NOT_ATTEMPTED; nothing
//     is written for it (Kafka's KafkaApis.handleAddPartitionsToTxnRequest,
//     for a partition its metadata cache does not contain).
//   - so does a partition without a leader that applies markers
//     (invariant 10: its markers could go nowhere, and the transaction
//     would sit in Prepare* for good): __consumer_offsets while no group
//     coordinator serves it on the coordinator node. Kafka accepts such a
//     partition and retries its markers until a leader appears; txncoord
//     refuses it up front with Kafka's code for a partition it cannot
//     place, with one debug line.
//   - a transaction-level error (51, 49, 90, 48…) is given to each of its
//     partitions. The answer waits until the Ongoing record is durable.
//
// Version notes: v<2 get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED;
// v4 gets INVALID_TXN_STATE where v5 gets TRANSACTION_ABORTABLE; v4+ has a
// top-level error code (always 0 here).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/internal/groupby"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/wire"
)

// addPartitionsAPI is AddPartitionsToTxn v0–v5; v4+ are broker-only
// (leaders registering partitions, with security on the cluster
// principal), v0–v3 clients'.
var addPartitionsAPI = wire.API[*Coordinator]{Key: 24, Min: 0, Max: 5, Access: wire.BrokersOnlyFrom(4),
	Handle: (*Coordinator).handleAddPartitionsToTxn}

// partitionResult answers one transaction of an AddPartitionsToTxn.
type partitionResult struct {
	topics groupby.Ordered[string, int32] // in request order
	d      *decision
	// badPartitions holds UNKNOWN_TOPIC_OR_PARTITION partitions; when
	// set, nothing was attempted.
	bad map[txncore.TopicPartition]bool
	// denied: the principal may not use the transactional id; nothing
	// was attempted.
	denied bool
}

func (pr *partitionResult) code(tp txncore.TopicPartition, version int16) int16 {
	if pr.denied {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if pr.bad != nil {
		if pr.bad[tp] {
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.OperationNotAttempted.Code
	}
	o := pr.d.peek() // a caller on the same log is answered before its write is durable
	code := o.Err
	if code == 0 && o.PartitionErrs != nil {
		code = o.PartitionErrs[tp]
	}
	code = oldFenced(code, version, 2)
	if code == kerr.TransactionAbortable.Code && version < 5 {
		code = kerr.InvalidTxnState.Code
	}
	return code
}

// validPartition: a partition of a topic the view knows (which includes
// __consumer_offsets, added by the group coordinator for TV2 offsets).
func (c *Coordinator) validPartition(tp txncore.TopicPartition) bool {
	t, ok := c.cfg.View.Topic(tp.Topic)
	return ok && tp.Partition >= 0 && tp.Partition < t.Partitions
}

// noLeader says why a transaction may not contain tp, a partition of a
// known topic (invariant 10), or "" when tp has a leader that applies
// markers. Every partition of a data topic has one by the placement rule;
// __consumer_offsets is led by the coordinator node, which applies its
// markers only when a group coordinator serves WriteTxnMarkers there.
func (c *Coordinator) noLeader(tp txncore.TopicPartition) string {
	n, ok := c.cfg.View.LeaderOf(tp.Topic, tp.Partition)
	switch {
	case !ok || n.Addr == "":
		return "the partition has no leader"
	case tp.Topic == cluster.OffsetsTopic && !c.servesOffsets():
		return "no group coordinator serves __consumer_offsets on the coordinator node"
	}
	return ""
}

// servesOffsets reports whether this node's registry has a WriteTxnMarkers
// handler of its own (the group coordinator's), not the stand-in every node
// advertises (cluster.RegisterNotServed).
func (c *Coordinator) servesOffsets() bool {
	reg := c.reg.Load()
	return reg != nil && reg.Serves(writeTxnMarkersKey)
}

// refuseLeaderless logs, at debug, a partition refused by noLeader.
func (c *Coordinator) refuseLeaderless(api, id string, tp txncore.TopicPartition, reason string) {
	c.log.Debug().Str("api", api).Str("txn_id", id).Str("topic", tp.Topic).Int32("partition", tp.Partition).
		Str("reason", reason).Msg("partition refused: a transaction never contains a partition without a leader")
}

// maxConcurrentWait bounds how long an AddPartitionsToTxn that meets a
// transition in flight (the previous transaction's Prepare* waiting for its
// markers, or a write being persisted) waits for it before answering
// CONCURRENT_TRANSACTIONS as Kafka does. A TV2 producer begins its next
// transaction as soon as EndTxn returns, while the markers are still on
// their way, so without the wait nearly every transaction's first produce
// costs the leader a retry backoff.
const maxConcurrentWait = 2 * time.Second

// addPartitionsWaiting is addPartitions that, on CONCURRENT_TRANSACTIONS,
// waits for the entry's next write and tries again, until maxConcurrentWait.
// It blocks: call it from a Reply, never from a handler.
//
// For an in-process caller (a leader of `txncoord up`, which shares the
// process log, see handleAddPartitionsToTxn) an accepted registration is
// answered once appended rather than durable.
//
// An in-process caller that gives up (wire.CallerDone of the handler's
// ctx) ends the wait too: an Inline caller waits for this Reply itself.
func (c *Coordinator) addPartitionsWaiting(ctx context.Context, first *partitionResult, retry func() *partitionResult, until time.Time, inProcess bool) *partitionResult {
	return settle(c, first, func(pr *partitionResult) *decision { return pr.d }, retry, until, inProcess, wire.CallerDone(ctx))
}

// settle waits, while v's decision answers CONCURRENT_TRANSACTIONS (a
// transition of the id in flight, or a previous transaction's markers
// being written), for the id's next write and decides again with again,
// until until; then it returns the last result. With appended set (an
// in-process caller), an acceptance is returned as soon as its write is
// appended: the caller's own later write is durable only with it. A close
// of giveUp (nil: never) ends the wait as until does. It blocks: call it
// from a Reply, never from a handler.
func settle[T any](c *Coordinator, v T, decisionOf func(T) *decision, again func() T, until time.Time, appended bool, giveUp <-chan struct{}) T {
	var deadline *time.Timer // made at the first wait: most calls decide at once
	for {
		d := decisionOf(v)
		if d != nil && appended && d.Err == 0 {
			break
		}
		if d == nil || d.wait(c.ctx).Err != kerr.ConcurrentTransactions.Code {
			break
		}
		changed := d.changed()
		if changed == nil {
			break
		}
		if deadline == nil {
			deadline = time.NewTimer(time.Until(until))
		}
		select {
		case <-changed:
		case <-deadline.C:
			return v
		case <-giveUp:
			deadline.Stop()
			return v
		case <-c.stop:
			deadline.Stop()
			return v
		}
		v = again()
	}
	if deadline != nil {
		deadline.Stop()
	}
	return v
}

// addTxn is one transaction of a leader's AddPartitionsToTxn: its
// request, and its result so far.
type addTxn struct {
	c      *Coordinator
	req    addRequest
	result *partitionResult
}

// add decides the transaction's registration (again).
func (a *addTxn) add() *partitionResult { return a.c.addPartitions(a.req) }

// addRequest is one transaction's add or verify.
type addRequest struct {
	id         string
	pid        int64
	epoch      int16
	verifyOnly bool
	clientTV   int16
	// overlap: a txncoord leader's registration, which may start the next
	// transaction while the previous one's markers are in flight.
	overlap bool
	// sameLog: the caller appends to the store's log and is answered at
	// append; its data, appended next, carries the registration's write
	// to disk (durable.Lazy).
	sameLog bool
	topics  groupby.Ordered[string, int32]
}

// addPartitions runs one transaction's add or verify.
func (c *Coordinator) addPartitions(a addRequest) *partitionResult {
	id, pid, epoch, verifyOnly, topics := a.id, a.pid, a.epoch, a.verifyOnly, a.topics
	pr := &partitionResult{topics: topics}
	var tps []txncore.TopicPartition
	for name, parts := range topics.All() {
		for _, p := range parts {
			tp := txncore.TopicPartition{Topic: name, Partition: p}
			tps = append(tps, tp)
			bad := !c.validPartition(tp)
			if !bad && !verifyOnly {
				if why := c.noLeader(tp); why != "" {
					c.refuseLeaderless("AddPartitionsToTxn", id, tp, why)
					bad = true
				}
			}
			if bad {
				if pr.bad == nil {
					pr.bad = map[txncore.TopicPartition]bool{}
				}
				pr.bad[tp] = true
			}
		}
	}
	if pr.bad != nil {
		return pr
	}
	now := c.nowMs()
	// A registration is pipelined behind the id's writes in flight (see
	// stepWith); a verification answers only from durable state.
	urgency := durable.Gather
	if a.sameLog {
		urgency = durable.Lazy
	}
	pr.d = c.stepWith(id, stepOpts{speculate: !verifyOnly, urgency: urgency}, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
		if verifyOnly {
			return txncore.VerifyPartitions(cur, pending, pid, epoch, tps)
		}
		return txncore.AddPartitions(cur, pending, txncore.AddPartitionsRequest{ProducerID: pid, ProducerEpoch: epoch, Partitions: tps,
			ClientTV: a.clientTV, Overlap: a.overlap && c.strictMarkers(cur)}, now)
	})
	return pr
}

// strictMarkers reports whether every marker of cur's Prepare goes out as
// WriteTxnMarkers v2, so that its leader applies KIP-1228's strict rule
// (marker epoch > current). Only then may the id's next transaction start
// while those markers are in flight: a leader on v1 applies Kafka's legacy
// rule (epoch >=), and a marker resent after a restart, or retried, would
// commit or abort the next transaction, which has the same epoch under
// TV2. It reads the cluster file's versions: a leader restarted at a lower
// version than the file says is not seen (the file is what operators
// change for a rolling downgrade).
func (c *Coordinator) strictMarkers(cur *Metadata) bool {
	if cur == nil {
		return false
	}
	if negotiation.MaxVersion(c.cfg.KafkaVersion, writeTxnMarkersKey) < 2 {
		return false // a 4.1 coordinator sends v1 only
	}
	for _, tp := range cur.Partitions {
		n, ok := c.cfg.View.LeaderOf(tp.Topic, tp.Partition)
		if !ok || negotiation.MaxVersion(n.KafkaVersion, writeTxnMarkersKey) < 2 {
			return false
		}
	}
	return true
}

// writeTxnMarkersKey is WriteTxnMarkers' API key.
const writeTxnMarkersKey = 27

func (c *Coordinator) handleAddPartitionsToTxn(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	c.counters.addPartitions.Add(1)
	if req.Version < 4 {
		var topics groupby.Ordered[string, int32]
		for _, t := range req.Topics {
			topics.Add(t.Topic, t.Partitions...)
		}
		add := func() *partitionResult {
			if txnIDDenied(r, kmsg.ACLOperationWrite, req.TransactionalID) {
				return &partitionResult{topics: topics, denied: true}
			}
			return c.addPartitions(addRequest{id: req.TransactionalID, pid: req.ProducerID, epoch: req.ProducerEpoch, topics: topics})
		}
		pr := add()
		return func() (kmsg.Response, error) {
			pr = c.addPartitionsWaiting(ctx, pr, add, time.Now().Add(maxConcurrentWait), false)
			for name, parts := range pr.topics.All() {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = name
				for _, p := range parts {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, pr.code(txncore.TopicPartition{Topic: name, Partition: p}, req.Version)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
	}
	// A txncoord leader's registration (TV2) may start the next
	// transaction while the previous one's markers are still being
	// written: it holds data at the bumped epoch back until the marker.
	overlap := r.ClientID != nil && *r.ClientID == cluster.LeaderClientID
	// A leader appending to the transaction log's own log (`txncoord up`)
	// gets its accepted registrations once appended: its data, appended
	// after them, is durable only with them, so the registration and the
	// data share one group commit instead of two.
	inProcess := durable.Shares(r.CallerLog(), c.storeLog)
	txns := make([]addTxn, len(req.Transactions))
	for i, t := range req.Transactions {
		a := &txns[i]
		a.c = c
		a.req = addRequest{id: t.TransactionalID, pid: t.ProducerID, epoch: t.ProducerEpoch, verifyOnly: t.VerifyOnly,
			clientTV: 2, overlap: overlap, sameLog: inProcess}
		for _, tt := range t.Topics {
			a.req.topics.Add(tt.Topic, tt.Partitions...)
		}
		a.result = a.add()
	}
	return func() (kmsg.Response, error) {
		until := time.Now().Add(maxConcurrentWait) // one budget for the whole batch
		resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, 0, len(txns))
		for i := range txns {
			a := &txns[i]
			pr := a.result
			if d := pr.d; d == nil || !inProcess || d.Err != 0 {
				pr = c.addPartitionsWaiting(ctx, pr, a.add, until, inProcess)
			}
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = a.req.id
			for t := range pr.topics.Len() {
				name, parts := pr.topics.Group(t)
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = name
				rt.Partitions = make([]kmsg.AddPartitionsToTxnResponseTransactionTopicPartition, len(parts))
				for j, p := range parts {
					rp := &rt.Partitions[j]
					rp.Default()
					rp.Partition, rp.ErrorCode = p, pr.code(txncore.TopicPartition{Topic: name, Partition: p}, req.Version)
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, rtx)
		}
		return resp, nil
	}
}
