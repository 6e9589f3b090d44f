package groupsetcd

import (
	"context"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/txnetcd"
)

// groupsLayout is the group coordinator's layout of a cluster prefix of
// the test's own, as the node builds it: <cluster prefix>/groups.
func groupsLayout(t testing.TB) txnetcd.Layout {
	return txnetcd.Layout{Prefix: "/txncoord/" + strings.ReplaceAll(t.Name(), "/", "_") + "/groups"}
}

// acquire makes node the holder of the group coordinator with epoch, as
// an ownership.Member's acquisition would (the owner key, without the
// lease), and returns its fence.
func acquire(t testing.TB, cli *clientv3.Client, l txnetcd.Layout, node, epoch int32) txnetcd.Fence {
	t.Helper()
	o := txnetcd.Owner{NodeID: node, Epoch: epoch}
	if _, err := cli.Put(ctxT(t), l.OwnerKey(0), o.Value()); err != nil {
		t.Fatal(err)
	}
	return txnetcd.NewFence(0, o)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rec encodes one record; ops are bucket, key, value triples (a value of
// "<delete>" deletes).
func rec(t testing.TB, ops ...string) []byte {
	t.Helper()
	var out []groups.RecordOp
	for i := 0; i+2 < len(ops); i += 3 {
		o := groups.RecordOp{Bucket: []byte(ops[i]), Key: []byte(ops[i+1]), Value: []byte(ops[i+2])}
		if ops[i+2] == "<delete>" {
			o.Value = nil
		}
		out = append(out, o)
	}
	b, err := groups.EncodeRecord(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored is every key under the data prefix, by "<bucket>/<raw key>".
func stored(t testing.TB, cli *clientv3.Client, l txnetcd.Layout) map[string]*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(ctxT(t), DataPrefix(l), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		bucket, encoded, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), DataPrefix(l)), "/")
		raw, err := hex.DecodeString(encoded)
		if err != nil {
			t.Fatalf("key %q: %v", kv.Key, err)
		}
		out[bucket+"/"+string(raw)] = kv
	}
	return out
}

// loaded is what Load hands the coordinator, by bucket, in its order.
func loaded(t testing.TB, l *Log, buckets ...string) map[string][][2]string {
	t.Helper()
	out := map[string][][2]string{}
	err := l.Load(func(each func([]byte, func(k, v []byte) error) error) error {
		for _, b := range buckets {
			if err := each([]byte(b), func(k, v []byte) error {
				out[b] = append(out[b], [2]string{string(k), string(v)})
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return out
}

// failures counts OnFail calls and keeps the last error.
type failures struct {
	n   atomic.Int32
	err atomic.Pointer[error]
}

func (f *failures) onFail(err error) {
	f.n.Add(1)
	f.err.Store(&err)
}
