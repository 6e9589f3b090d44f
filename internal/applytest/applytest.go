package applytest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/storage"
)

// Same fails t unless applying raws one by one with apply and all at once
// with batch leave the same buckets, on top of what base (nil: nothing)
// writes first.
func Same(t *testing.T, apply storage.ApplyFunc, batch storage.BatchApplyFunc, base func(storage.Root) error, raws [][]byte) {
	t.Helper()
	one := dumpAfter(t, base, func(root storage.Root) error {
		for _, raw := range raws {
			if err := apply(root, raw); err != nil {
				return err
			}
		}
		return nil
	})
	all := dumpAfter(t, base, func(root storage.Root) error { return batch(root, raws) })
	if one != all {
		t.Fatalf("one by one:\n%s\nbatched:\n%s", one, all)
	}
}

// dumpAfter runs base and fn on a fresh bucket of a fresh bbolt file and
// returns everything under it, nested buckets included.
func dumpAfter(t *testing.T, base, fn func(storage.Root) error) string {
	t.Helper()
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
		if base != nil {
			if err := base(root); err != nil {
				return err
			}
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
