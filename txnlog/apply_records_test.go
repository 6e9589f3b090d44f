package txnlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/txncore"
)

// TestApplyRecordsMatchesOneByOne checks that ApplyRecords, which writes
// each transactional id's last state once, leaves the buckets as applying
// the same records one by one with ApplyRecord does: puts and deletes of
// the same ids mixed within and across records, epochs and high-water
// marks going up and down.
func TestApplyRecordsMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var raws [][]byte
		for range 1 + rng.IntN(8) {
			var b Batch
			for range rng.IntN(4) {
				m := txncore.Metadata{TransactionalID: fmt.Sprintf("id-%d", rng.IntN(4)), ProducerID: rng.Int64N(100),
					ProducerEpoch: int16(rng.IntN(5)), State: txncore.State(rng.IntN(4)), NextProducerID: -1, LastProducerEpoch: -1}
				b.Puts = append(b.Puts, m)
			}
			for range rng.IntN(3) {
				b.Deletes = append(b.Deletes, fmt.Sprintf("id-%d", rng.IntN(4)))
			}
			if rng.IntN(3) == 0 {
				b.CoordinatorEpoch = int32(rng.IntN(10))
			}
			if rng.IntN(3) == 0 {
				b.ProducerIDHighWater = rng.Int64N(1000)
			}
			raws = append(raws, encodeBatch(b))
		}
		one := applyInto(t, func(root *bbolt.Bucket) error {
			for _, raw := range raws {
				if err := ApplyRecord(root, raw); err != nil {
					return err
				}
			}
			return nil
		})
		all := applyInto(t, func(root *bbolt.Bucket) error { return ApplyRecords(root, raws) })
		if one != all {
			t.Fatalf("round %d: one by one\n%s\nbatched\n%s", round, one, all)
		}
	}
}

// applyInto applies records with fn into a fresh bbolt file, on top of a
// stored state (an id, an epoch and a high-water mark already there), and
// returns the buckets' contents.
func applyInto(t *testing.T, fn func(root *bbolt.Bucket) error) string {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out bytes.Buffer
	err = db.Update(func(tx *bbolt.Tx) error {
		root, err := tx.CreateBucket([]byte("space"))
		if err != nil {
			return err
		}
		base := Batch{Puts: []txncore.Metadata{{TransactionalID: "id-0", ProducerID: 7, NextProducerID: -1, LastProducerEpoch: -1}},
			CoordinatorEpoch: 3, ProducerIDHighWater: 500}
		if err := ApplyRecord(root, encodeBatch(base)); err != nil {
			return err
		}
		if err := fn(root); err != nil {
			return err
		}
		return root.ForEachBucket(func(name []byte) error {
			return root.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&out, "%s/%s=%x\n", name, k, v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}
