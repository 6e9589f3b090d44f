package leaderstub

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// TestApplyRecordsMatchesOneByOne checks that ApplyRecords, which writes a
// producer's entry only at the last change of the batch touching it,
// leaves the buckets as applying the same records one by one with
// ApplyRecord does: entries of the same and of other producers and
// partitions, expiries in between, batches and log starts, a dropped
// topic among them.
func TestApplyRecordsMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	offset := int64(0)
	for round := range 200 {
		var raws [][]byte
		for range 1 + rng.IntN(10) {
			if rng.IntN(12) == 0 {
				raws = append(raws, append([]byte{dropTopicVersion}, "t1"...))
				continue
			}
			o := &persistOp{key: []byte(fmt.Sprintf("t%d\x00%d", rng.IntN(2), rng.IntN(2)))}
			if rng.IntN(2) == 0 {
				o.addBatch(offset, []byte(fmt.Sprintf("batch-%d", offset)))
				offset++
			}
			if rng.IntN(3) != 0 {
				e := emptyEntry(rng.Int64N(3))
				e.Epoch, e.LastTimestamp, e.TxnFirstOffset = int16(rng.IntN(4)), rng.Int64N(1000), rng.Int64N(5)-1
				o.entry = &e
			}
			if rng.IntN(4) == 0 {
				o.expired = []int64{rng.Int64N(3)}
			}
			o.logStart = rng.Int64N(3)
			raws = append(raws, o.encode())
		}
		one := leaderApplyInto(t, func(root *bbolt.Bucket) error {
			for _, raw := range raws {
				if err := ApplyRecord(root, raw); err != nil {
					return err
				}
			}
			return nil
		})
		all := leaderApplyInto(t, func(root *bbolt.Bucket) error { return ApplyRecords(root, raws) })
		if one != all {
			t.Fatalf("round %d: one by one\n%s\nbatched\n%s", round, one, all)
		}
	}
}

// leaderApplyInto applies records with fn into a fresh bbolt file and
// returns every bucket's contents, nested buckets included.
func leaderApplyInto(t *testing.T, fn func(root *bbolt.Bucket) error) string {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out bytes.Buffer
	var dump func(prefix string, b *bbolt.Bucket) error
	dump = func(prefix string, b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return dump(prefix+string(k)+"/", b.Bucket(k))
			}
			fmt.Fprintf(&out, "%s%q=%x\n", prefix, k, v)
			return nil
		})
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		root, err := tx.CreateBucket([]byte("space"))
		if err != nil {
			return err
		}
		if err := fn(root); err != nil {
			return err
		}
		return dump("", root)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}
