package groupsetcd

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/txnetcd"
)

// ErrCorrupt: a key under the data prefix is not <bucket>/<hex(key)> as
// Append writes it.
var ErrCorrupt = errors.New("groupsetcd: corrupt key")

// loadPageSize bounds one range response of Load (a group coordinator may
// hold hundreds of thousands of offsets; etcd refuses responses above its
// gRPC limits).
var loadPageSize = int64(1000)

type storedKV struct{ key, value []byte }

// Load reads every record key at one etcd revision, and calls fn once
// with each: each(bucket, f) calls f for the bucket's keys in ascending
// order of the raw keys (as bbolt's ForEach). It fails, wrapping
// txnetcd.ErrNotOwner and groups.ErrClosed, when the fence no longer holds
// at that revision: a state loaded by a former holder would be stale at
// once.
func (l *Log) Load(fn func(each func(bucket []byte, f func(k, v []byte) error) error) error) error {
	ctx, cancel := context.WithTimeout(l.ctx, txnetcd.LoadTimeout)
	defer cancel()
	buckets, err := l.read(ctx)
	if err != nil {
		if l.ctx.Err() != nil {
			return errClosed
		}
		return err
	}
	return fn(func(bucket []byte, f func(k, v []byte) error) error {
		for _, kv := range buckets[string(bucket)] {
			if err := f(kv.key, kv.value); err != nil {
				return err
			}
		}
		return nil
	})
}

// read returns every bucket's keys, ascending, at the revision of one
// read of the owner key.
func (l *Log) read(ctx context.Context) (map[string][]storedKV, error) {
	cli := l.store.Client()
	ownerKey := l.store.Layout().OwnerKey(l.fence.Partition)
	head, err := cli.Get(ctx, ownerKey)
	if err != nil {
		return nil, fmt.Errorf("groupsetcd: load: %w", err)
	}
	owner := ""
	if len(head.Kvs) > 0 {
		owner = string(head.Kvs[0].Value)
	}
	if owner != l.fence.OwnerValue {
		return nil, fmt.Errorf("groupsetcd: load: %w %d: owner is %q, fence %s (%w)", txnetcd.ErrNotOwner, l.fence.Partition, owner, l.fence.OwnerValue, groups.ErrClosed)
	}
	rev := head.Header.Revision

	buckets := map[string][]storedKV{}
	end := clientv3.GetPrefixRangeEnd(l.dataPrefix)
	from := l.dataPrefix
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithRev(rev),
			clientv3.WithLimit(loadPageSize), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return nil, fmt.Errorf("groupsetcd: load at revision %d: %w", rev, err)
		}
		for _, kv := range resp.Kvs {
			bucket, key, err := l.parseKey(string(kv.Key))
			if err != nil {
				return nil, err
			}
			// etcd's key order within a bucket is the raw keys' order:
			// every key of a bucket shares "<bucket>/", and lowercase hex
			// (checked by parseKey) sorts as the bytes it encodes.
			buckets[bucket] = append(buckets[bucket], storedKV{key: key, value: kv.Value})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return buckets, nil
}

// parseKey is key's inverse.
func (l *Log) parseKey(k string) (bucket string, key []byte, err error) {
	rest := strings.TrimPrefix(k, l.dataPrefix)
	bucket, encoded, ok := strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", nil, fmt.Errorf("%w: %q has no bucket", ErrCorrupt, k)
	}
	key, err = hex.DecodeString(encoded)
	if err != nil || hex.EncodeToString(key) != encoded {
		return "", nil, fmt.Errorf("%w: %q: the key is not lowercase hex", ErrCorrupt, k)
	}
	return bucket, key, nil
}
