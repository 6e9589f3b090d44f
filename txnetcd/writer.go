package txnetcd

import (
	"context"
	"fmt"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/txnlog"
)

// The Store's one writer of its PartitionStores' batches. A coordinator
// owns many partitions (~17 of 50 with three members); when each partition
// committed its own Txn, concurrent transactions of different partitions
// each cost a Raft proposal, and etcd's CPU, which bounds the etcd mode,
// scales with proposals. One writer per Store puts everything queued,
// across partitions, into one Txn:
//
//	If(owner key of p = p's fence, for each fence in the group)
//	Then(the batches' puts and deletes, one per key, the last write winning)
//	Else(get owner key of p, for each partition in the group)
//
// When a compare fails, the Else reads say which partitions were fenced
// out: their batches fail with ErrNotOwner, the others' go back to the
// front of the queue, in order, for the next Txn (nothing of them was
// written). One FIFO queue and one Txn in flight keep each id's writes in
// submission order.
//
// The writer's goroutine runs while the queue holds work: Submit starts it
// when none runs, and it ends when it finds the queue empty, so the Store
// needs no Close and an idle Store holds no goroutine.

// queued is one batch waiting for the writer, at its position in its
// PartitionStore's log.
type queued struct {
	ps  *PartitionStore
	ops []*pb.RequestOp
	// keys are ops' keys, in their order (the writer merges ops by key).
	keys []string
	pos  durable.Pos
}

// writer is a Store's queue and the state of its writer goroutine.
type writer struct {
	mu      sync.Mutex
	queue   []*queued
	running bool // a writer goroutine is running; it clears this when it ends
	stats   StoreStats
	// inFlight is the plan the writer is committing (nil: none).
	inFlight *txnPlan

	// beforeTxn, when set (tests), runs before each Txn is sent, with
	// what it holds.
	beforeTxn func(*txnPlan)
}

// StoreStats counts the work of a Store's shared writer, over all its
// PartitionStores.
type StoreStats struct {
	// Txns is the etcd write Txns committed (each one Raft proposal).
	Txns uint64
	// Batches is the PartitionStore writes they carried.
	Batches uint64
	// Transitions is the keys they wrote.
	Transitions uint64
	// Refused is the Txns refused because a partition in them was fenced
	// out (the other partitions' batches went in a later Txn).
	Refused uint64
}

// Stats counts the shared writer's work (Store.Apply and Commit, which
// write directly, are not counted).
func (s *Store) Stats() StoreStats {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.stats
}

// enqueue gives q its position in log and appends it to the queue, and
// starts the writer if none runs. It fails, queueing nothing, when q's
// store is closed or its log stopped.
func (s *Store) enqueue(q *queued, log *durable.Tracker) error {
	w := &s.w
	w.mu.Lock()
	if q.ps.closed.Load() {
		w.mu.Unlock()
		return txnlog.ErrClosed
	}
	pos, err := log.Next(nil)
	if err != nil {
		w.mu.Unlock()
		return err
	}
	q.pos = pos
	w.queue = append(w.queue, q)
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go s.write()
	}
	return nil
}

// dropQueued closes ps and removes its queued batches, and returns the
// position of its last batch in the Txn in flight (which gets that Txn's
// outcome; 0: none), after which the caller fails its log.
func (s *Store) dropQueued(ps *PartitionStore) ([]*queued, durable.Pos) {
	w := &s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if ps.closed.Swap(true) {
		return nil, 0
	}
	var dropped []*queued
	kept := w.queue[:0:0]
	for _, q := range w.queue {
		if q.ps == ps {
			dropped = append(dropped, q)
		} else {
			kept = append(kept, q)
		}
	}
	w.queue = kept
	return dropped, w.lastInFlight(ps)
}

// write is the writer goroutine: it takes the longest prefix of the queue
// that fits in one Txn, commits it and answers each batch, until it finds
// the queue empty.
func (s *Store) write() {
	w := &s.w
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		plan := w.take(s.opts.MaxTxnOps)
		hooks := plan.hooks(w.beforeTxn)
		w.mu.Unlock()
		for _, hook := range hooks {
			hook()
		}
		resp, err := s.commitPlan(plan)
		w.mu.Lock()
		answers := w.settle(plan, resp, err)
		w.inFlight = nil
		w.mu.Unlock()
		for _, a := range answers {
			a.q.ps.settled(a.q.pos, a.err)
		}
	}
}

// txnPlan is one Txn of the writer: the batches it carries and what they
// make of it.
type txnPlan struct {
	batches []*queued
	// fences are the compares, one per distinct fence, in queue order;
	// fenceKeys[i] is the keys fences[i]'s batches wrote (its
	// Transitions).
	fences    []Fence
	fenceKeys []int
	// ops are the batches' operations merged, one per key: they are
	// committed together, so only the final value of a key is ever seen
	// (etcd refuses a Txn naming a key twice).
	ops []*pb.RequestOp
	// partitions are the fences' partitions, once each (two fences of one
	// partition: an old and a new owner's): the failure branch reads
	// their owner keys in this order.
	partitions []int32
}

// size is what a Txn counts against MaxTxnOps. etcd's --max-txn-ops
// bounds each of a Txn's compares, success and failure branches; the sum
// of compares and operations is a conservative bound on all three (the
// failure branch has one read per partition, at most one per compare).
func (p *txnPlan) size() int { return len(p.fences) + len(p.ops) }

// fenceIndex is f's position in p.fences, or -1. A Txn has a few dozen
// fences at most (one per owned partition): a scan costs less than a map.
func (p *txnPlan) fenceIndex(f Fence) int {
	for i := range p.fences {
		if p.fences[i] == f {
			return i
		}
	}
	return -1
}

// take dequeues the longest prefix of the queue whose Txn stays within
// maxOps (compares + operations), and at least one batch: a batch alone
// may have maxOps keys (validation allows that many) and one compare,
// which etcd takes, since its limit is per branch.
func (w *writer) take(maxOps int) *txnPlan {
	plan := &txnPlan{}
	index := map[string]int{} // key → its op in plan.ops
	n := 0
	for ; n < len(w.queue); n++ {
		q := w.queue[n]
		f := plan.fenceIndex(q.ps.fence)
		more := 0
		if f < 0 {
			more++
		}
		for _, key := range q.keys {
			if _, ok := index[key]; !ok {
				more++
			}
		}
		if n > 0 && plan.size()+more > maxOps {
			break
		}
		if f < 0 {
			f = len(plan.fences)
			plan.fences = append(plan.fences, q.ps.fence)
			plan.fenceKeys = append(plan.fenceKeys, 0)
			if !slices.Contains(plan.partitions, q.ps.fence.Partition) {
				plan.partitions = append(plan.partitions, q.ps.fence.Partition)
			}
		}
		for i, key := range q.keys {
			if j, ok := index[key]; ok {
				plan.ops[j] = q.ops[i]
				continue
			}
			index[key] = len(plan.ops)
			plan.ops = append(plan.ops, q.ops[i])
			plan.fenceKeys[f]++
		}
	}
	plan.batches = append([]*queued(nil), w.queue[:n]...)
	w.queue = w.queue[n:]
	w.inFlight = plan
	return plan
}

// lastInFlight is the position of ps's last batch in the Txn in flight (0:
// none).
func (w *writer) lastInFlight(ps *PartitionStore) durable.Pos {
	var last durable.Pos
	if w.inFlight != nil {
		for _, q := range w.inFlight.batches {
			if q.ps == ps {
				last = max(last, q.pos)
			}
		}
	}
	return last
}

// hooks are the test hooks to run before the plan's Txn is sent.
func (p *txnPlan) hooks(beforeTxn func(*txnPlan)) []func() {
	var hooks []func()
	if beforeTxn != nil {
		hooks = append(hooks, func() { beforeTxn(p) })
	}
	seen := map[*PartitionStore]bool{}
	for _, q := range p.batches {
		if !seen[q.ps] && q.ps.beforeCommit != nil {
			hooks = append(hooks, q.ps.beforeCommit)
		}
		seen[q.ps] = true
	}
	return hooks
}

// commitPlan sends the plan's Txn. There is no caller's context (it
// carries many callers' batches): CommitTimeout bounds it.
func (s *Store) commitPlan(p *txnPlan) (*pb.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	req := &pb.TxnRequest{
		Compare: make([]*pb.Compare, 0, len(p.fences)),
		Success: p.ops,
		Failure: make([]*pb.RequestOp, 0, len(p.partitions)),
	}
	for _, f := range p.fences {
		req.Compare = append(req.Compare, &pb.Compare{Result: pb.Compare_EQUAL, Target: pb.Compare_VALUE,
			Key: []byte(s.ownerKey(f.Partition)), TargetUnion: &pb.Compare_Value{Value: []byte(f.OwnerValue)}})
	}
	for _, partition := range p.partitions {
		req.Failure = append(req.Failure, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{
			RequestRange: &pb.RangeRequest{Key: []byte(s.ownerKey(partition))}}})
	}
	if s.kv != nil {
		// As the client's own Txn does: wait for a connection rather
		// than fail while it reconnects.
		return s.kv.Txn(ctx, req, grpc.WaitForReady(true))
	}
	cmps := make([]clientv3.Cmp, len(req.Compare))
	for i, c := range req.Compare {
		cmps[i] = clientv3.FromCompare(c)
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(clientOps(req.Success)...).Else(clientOps(req.Failure)...).Commit()
	return (*pb.TxnResponse)(resp), err
}

// clientOps are ops (puts, deletes of one key, reads of one key) as
// clientv3's, for a client the writer has no KV API of (Options.KV) and for
// Store.Apply.
func clientOps(ops []*pb.RequestOp) []clientv3.Op {
	out := make([]clientv3.Op, 0, len(ops))
	for _, op := range ops {
		switch r := op.Request.(type) {
		case *pb.RequestOp_RequestPut:
			out = append(out, clientv3.OpPut(string(r.RequestPut.Key), string(r.RequestPut.Value)))
		case *pb.RequestOp_RequestDeleteRange:
			out = append(out, clientv3.OpDelete(string(r.RequestDeleteRange.Key)))
		case *pb.RequestOp_RequestRange:
			out = append(out, clientv3.OpGet(string(r.RequestRange.Key)))
		}
	}
	return out
}

type answer struct {
	q   *queued
	err error
}

// settle turns the Txn's outcome into the batches' answers, puts back at
// the front of the queue the batches of a refused Txn whose partitions
// still hold their fences, and counts.
func (w *writer) settle(p *txnPlan, resp *pb.TxnResponse, err error) []answer {
	answers := make([]answer, 0, len(p.batches))
	switch {
	case err != nil: // it may have been committed: every batch learns so
		for _, q := range p.batches {
			answers = append(answers, answer{q, fmt.Errorf("txnetcd: partition %d: %w", q.ps.fence.Partition, err)})
		}
	case resp.Succeeded:
		w.stats.Txns++
		w.stats.Batches += uint64(len(p.batches))
		w.stats.Transitions += uint64(len(p.ops))
		counted := map[*PartitionStore]bool{}
		for _, q := range p.batches {
			if !counted[q.ps] {
				counted[q.ps] = true
				q.ps.stats.Commits++
				q.ps.stats.Transitions += uint64(p.fenceKeys[p.fenceIndex(q.ps.fence)])
			}
			q.ps.stats.Batches++
			answers = append(answers, answer{q, nil})
		}
	default:
		w.stats.Refused++
		owners := map[int32]string{} // none when the owner key is gone
		for i, r := range resp.Responses {
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 && i < len(p.partitions) {
				owners[p.partitions[i]] = string(kvs[0].Value)
			}
		}
		answers = w.refused(p, owners)
	}
	return answers
}

// refused answers the batches of a refused Txn: those whose fence no
// longer matches its partition's owner fail with ErrNotOwner, those of a
// store closed meanwhile with ErrClosed (nothing of theirs was written),
// and the rest go back to the front of the queue in their order.
func (w *writer) refused(p *txnPlan, owners map[int32]string) []answer {
	var answers []answer
	var retry []*queued
	fencedOut := false
	for _, q := range p.batches {
		f := q.ps.fence
		switch {
		case owners[f.Partition] != f.OwnerValue:
			fencedOut = true
			answers = append(answers, answer{q, fmt.Errorf("%w %d (fence %s)", ErrNotOwner, f.Partition, f.OwnerValue)})
		case q.ps.closed.Load():
			answers = append(answers, answer{q, txnlog.ErrClosed})
		default:
			retry = append(retry, q)
		}
	}
	if !fencedOut {
		// Cannot happen (the reads are at the compares' revision): fail
		// them rather than retry the same Txn forever.
		for _, q := range retry {
			answers = append(answers, answer{q, fmt.Errorf("txnetcd: partition %d: fenced Txn refused while every owner key matched its fence", q.ps.fence.Partition)})
		}
		return answers
	}
	w.queue = append(retry, w.queue...)
	return answers
}
