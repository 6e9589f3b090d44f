package groupsetcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/wal"
)

// write is the writer goroutine: it commits what is queued, round after
// round, until Close or the first failure.
func (l *Log) write() {
	err := l.run()
	// A call cut by Close is not a failure of the log: Close has set
	// its error already.
	failed := err != nil && l.ctx.Err() == nil && l.setErr(failure(err))
	if failed {
		ev := l.log.Error()
		if isFenced(err) {
			ev = l.log.Warn() // another node owns the partition now: expected after a takeover
		}
		ev.Err(err).Msg("group coordinator records not written; the log is closed")
	}
	close(l.done)
	if failed && l.opts.OnFail != nil {
		l.opts.OnFail(l.Err())
	}
}

func (l *Log) run() error {
	for {
		select {
		case <-l.ctx.Done():
			return nil
		case <-l.wake:
		}
		for {
			recs := l.take()
			if len(recs) == 0 {
				break
			}
			for _, t := range plan(recs, l.opts.MaxTxnOps) {
				if err := l.commit(t); err != nil {
					return err
				}
			}
		}
	}
}

// take dequeues everything queued.
func (l *Log) take() []pending {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.queue
	l.queue = nil
	return recs
}

// commit runs one planned Txn, fenced, and then (only then) marks the
// records it completes durable.
func (l *Log) commit(t txn) error {
	if l.beforeCommit != nil {
		l.beforeCommit()
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CommitTimeout)
	err := l.store.Commit(ctx, l.fence, t.ops)
	cancel()
	if err != nil {
		if t.partial {
			return fmt.Errorf("commit of records %d-%d (a part of %d): %w", t.from, t.upTo+1, t.upTo+1, err)
		}
		return fmt.Errorf("commit of records %d-%d: %w", t.from, t.upTo, err)
	}
	l.mu.Lock()
	l.stats.Txns++
	l.stats.Keys += uint64(len(t.ops))
	if d := l.positions.Durable(); t.upTo > d {
		l.stats.Records += uint64(t.upTo - d)
	}
	l.mu.Unlock()
	l.positions.Advance(t.upTo)
	return nil
}

// txn is one planned etcd Txn: one operation per key, and the records it
// covers, from the first it holds a change of (from) to the last it
// completes (upTo: the records before it in the round are durable once
// it is). partial: it ends inside record upTo+1, a record too large for
// one Txn.
type txn struct {
	ops      []clientv3.Op
	from     wal.Pos
	upTo     wal.Pos
	partial  bool
	keyIndex map[string]int
}

func (t *txn) add(r pending, ops []keyedOp) {
	if t.from == 0 {
		t.from = r.pos
	}
	for _, o := range ops {
		if i, ok := t.keyIndex[o.key]; ok {
			t.ops[i] = o.op // the later change wins: only the last is ever seen
			continue
		}
		t.keyIndex[o.key] = len(t.ops)
		t.ops = append(t.ops, o.op)
	}
}

// fresh counts ops' keys the txn does not name yet.
func (t *txn) fresh(ops []keyedOp) int {
	n := 0
	for _, o := range ops {
		if _, ok := t.keyIndex[o.key]; !ok {
			n++
		}
	}
	return n
}

func newTxn() *txn { return &txn{keyIndex: map[string]int{}} }

// plan packs records, in order, into as few Txns of at most maxOps keys
// as possible, each holding whole records, so that etcd always holds the
// state after some prefix of the records: a Txn takes the next record
// while its keys fit, and a record is never split across Txns unless it
// alone names more than maxOps keys.
//
// Such a record spans consecutive Txns (the last one may carry later
// records too). If the process dies between them, or the fence is lost
// in between, etcd holds part of the record. Its answer was not given yet
// (it is durable only once its last part is), so no client was told it
// happened; but the next holder loads the part (for example some of the
// offsets of one large OffsetCommit, or some changes of a deletion), as a
// state no single step of the coordinator produced; a client that retries
// gets its change written whole by the retry.
func plan(recs []pending, maxOps int) []txn {
	var out []txn
	cur, open := newTxn(), false
	flush := func() {
		out = append(out, *cur)
		upTo := cur.upTo // the next Txn completes nothing before it
		cur, open = newTxn(), false
		cur.upTo = upTo
	}
	for _, r := range recs {
		ops := foldRecord(r.ops)
		if len(cur.ops)+cur.fresh(ops) > maxOps && len(cur.ops) > 0 {
			flush()
		}
		for len(ops) > maxOps { // a record too large for one Txn (cur names no key here)
			cur.add(r, ops[:maxOps])
			cur.partial = true
			flush()
			ops = ops[maxOps:]
		}
		cur.add(r, ops)
		cur.upTo, open = r.pos, true
	}
	if open {
		flush()
	}
	return out
}

// foldRecord keeps one change per key of one record, the last, at the
// place of the key's first change: a record whose ops exceed a Txn is cut
// between distinct keys.
func foldRecord(ops []keyedOp) []keyedOp {
	index := make(map[string]int, len(ops))
	out := make([]keyedOp, 0, len(ops))
	for _, o := range ops {
		if i, ok := index[o.key]; ok {
			out[i] = o
			continue
		}
		index[o.key] = len(out)
		out = append(out, o)
	}
	return out
}
