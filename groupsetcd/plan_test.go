package groupsetcd

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/wal"
)

// applyOps applies etcd operations to a model of the keys.
func applyOps(state map[string]string, ops []clientv3.Op) {
	for _, o := range ops {
		if o.IsDelete() {
			delete(state, string(o.KeyBytes()))
		} else {
			state[string(o.KeyBytes())] = string(o.ValueBytes())
		}
	}
}

func keyed(key, value string) keyedOp {
	if value == "" {
		return keyedOp{key: key, op: clientv3.OpDelete(key)}
	}
	return keyedOp{key: key, op: clientv3.OpPut(key, value)}
}

// TestPlanProperties: random records (some naming a key twice, some
// larger than a Txn) packed by plan: every Txn names at most maxOps keys,
// each once; a Txn that completes records leaves the state after exactly
// those records (whole records, in order); a Txn that completes none is a
// part of one record larger than a Txn; and records that fit together
// share Txns (fewer Txns than records).
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		maxOps := 1 + rng.IntN(10)
		var recs []pending
		for i := range 1 + rng.IntN(60) {
			r := pending{pos: wal.Pos(i + 1)}
			n := rng.IntN(4)
			if rng.IntN(10) == 0 {
				n = maxOps + rng.IntN(2*maxOps) // larger than a Txn (before folding)
			}
			for range n {
				v := ""
				if rng.IntN(4) > 0 {
					v = fmt.Sprintf("v%d-%d", i, rng.IntN(100))
				}
				r.ops = append(r.ops, keyed(fmt.Sprintf("k%d", rng.IntN(3*maxOps)), v))
			}
			recs = append(recs, r)
		}
		// after[i] is the state after records 1..i.
		after := []map[string]string{{}}
		for _, r := range recs {
			st := maps.Clone(after[len(after)-1])
			for _, o := range r.ops {
				applyOps(st, []clientv3.Op{o.op})
			}
			after = append(after, st)
		}

		txns := plan(recs, maxOps)
		state := map[string]string{}
		var durable wal.Pos
		fits := 0
		for _, r := range recs {
			if len(foldRecord(r.ops)) <= maxOps {
				fits++
			}
		}
		for i, tx := range txns {
			if len(tx.ops) > maxOps {
				t.Fatalf("round %d txn %d: %d ops, max %d", round, i, len(tx.ops), maxOps)
			}
			seen := map[string]bool{}
			for _, o := range tx.ops {
				if seen[string(o.KeyBytes())] {
					t.Fatalf("round %d txn %d names %s twice", round, i, o.KeyBytes())
				}
				seen[string(o.KeyBytes())] = true
			}
			applyOps(state, tx.ops)
			if tx.upTo < durable || (tx.upTo == durable && !tx.partial) {
				t.Fatalf("round %d txn %d: completes up to %d after %d", round, i, tx.upTo, durable)
			}
			durable = tx.upTo
			if tx.partial {
				if big := foldRecord(recs[tx.upTo].ops); len(big) <= maxOps {
					t.Fatalf("round %d txn %d ends inside record %d, which fits a Txn (%d keys)", round, i, tx.upTo+1, len(big))
				}
				continue
			}
			if !maps.Equal(state, after[durable]) {
				t.Fatalf("round %d txn %d: state %v, want the state after records 1..%d: %v", round, i, state, durable, after[durable])
			}
		}
		if durable != wal.Pos(len(recs)) {
			t.Fatalf("round %d: durable %d of %d records", round, durable, len(recs))
		}
		if fits > 1 && maxOps >= 4 && len(txns) >= len(recs) {
			t.Errorf("round %d: %d Txns for %d records (max %d ops): records were not grouped", round, len(txns), len(recs), maxOps)
		}
	}
}

// TestPlanLargeRecord: a record of 20 keys with max 8 spans three Txns,
// of which only the last completes it; the records around it are whole
// in their Txns (the one after it shares the last part's Txn).
func TestPlanLargeRecord(t *testing.T) {
	var big []keyedOp
	for i := range 20 {
		big = append(big, keyed(fmt.Sprintf("b%02d", i), "x"))
	}
	recs := []pending{
		{pos: 1, ops: []keyedOp{keyed("a", "1"), keyed("a2", "1")}},
		{pos: 2, ops: big},
		{pos: 3, ops: []keyedOp{keyed("c", "1")}},
	}
	txns := plan(recs, 8)
	var got []string
	for _, tx := range txns {
		got = append(got, fmt.Sprintf("%d ops from %d up to %d partial %v", len(tx.ops), tx.from, tx.upTo, tx.partial))
	}
	want := []string{"2 ops from 1 up to 1 partial false", "8 ops from 2 up to 1 partial true", "8 ops from 2 up to 1 partial true",
		"5 ops from 2 up to 3 partial false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("plan:\n got %q\nwant %q", got, want)
	}
}
