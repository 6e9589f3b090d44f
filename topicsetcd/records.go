package topicsetcd

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnetcd"
)

// DefaultCommitTimeout bounds one etcd Txn of Commit.
const DefaultCommitTimeout = 10 * time.Second

// ErrCorrupt: a key under the data prefix is not <kind>/<hex(name)>.
var ErrCorrupt = errors.New("topicsetcd: corrupt key")

// loadPageSize bounds one range response of a load.
var loadPageSize = int64(1000)

// DataPrefix is where the records of the controller Layout l live.
func DataPrefix(l txnetcd.Layout) string { return strings.TrimRight(l.Prefix, "/") + "/data/" }

// Codec is one set of records kept under the data prefix: the kinds
// Key gives, each under <data prefix>/<kind>/.
type Codec struct {
	// Name tells the codecs' Seed marks apart ("" for the topics').
	Name string
	// Kinds are every kind Key gives.
	Kinds []string
	// Key names what a record is the whole state of (remove: delete it).
	Key func(raw []byte) (kind, name string, remove bool, err error)
	// Fenced is wrapped into a Commit refused by the fence.
	Fenced error
}

// Topics are the topic controller's records (kinds "topic", "group").
var Topics = Codec{Kinds: []string{"topic", "group"}, Key: topics.RecordKey, Fenced: topics.ErrFenced}

// AuthMeta are the security metadata's records (kinds "acl", "scram",
// "quota", "feature"), kept under the same lease and fence as the topics.
var AuthMeta = Codec{Name: "authmeta", Kinds: []string{"acl", "scram", "quota", "feature"}, Key: authmeta.RecordKey, Fenced: authmeta.ErrFenced}

// seededKey is put once the records of codec c from a single
// coordinator's store were copied in (Seed).
func seededKey(l txnetcd.Layout, c Codec) string {
	k := strings.TrimRight(l.Prefix, "/") + "/seeded"
	if c.Name != "" {
		k += "-" + c.Name
	}
	return k
}

func key(l txnetcd.Layout, kind, name string) string {
	return DataPrefix(l) + kind + "/" + hex.EncodeToString([]byte(name))
}

// Options configure Records.
type Options struct {
	// Codec is which records (default Topics).
	Codec Codec
	// MaxTxnOps is the etcd server's --max-txn-ops (default
	// txnetcd.DefaultMaxTxnOps).
	MaxTxnOps int
	// CommitTimeout bounds one etcd Txn (default DefaultCommitTimeout).
	CommitTimeout time.Duration
	// OnFail, optional, is called after a Commit failed (fenced out, an
	// etcd error or timeout): a Txn that timed out may have been applied,
	// so the controller's memory may be behind etcd and the node reopens
	// it from etcd.
	OnFail func(error)
}

// Records are the controller's records in etcd, for the holder of one
// fence. Safe for concurrent use (the controller commits one change at a
// time anyway).
type Records struct {
	store *txnetcd.Store
	fence txnetcd.Fence
	opts  Options
}

// Open returns the records of store's layout (a controller Layout) as
// written by the holder of fence.
func Open(store *txnetcd.Store, fence txnetcd.Fence, opts Options) *Records {
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = txnetcd.DefaultMaxTxnOps
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	if opts.Codec.Key == nil {
		opts.Codec = Topics
	}
	return &Records{store: store, fence: fence, opts: opts}
}

var (
	_ topics.Records   = (*Records)(nil)
	_ authmeta.Records = (*Records)(nil)
)

// Commit writes records, in order, fenced: a former holder's Commit fails
// with txnetcd.ErrNotOwner (and topics.ErrFenced) and writes nothing. Records beyond one Txn's
// keys are split into several Txns, each applied whole.
func (r *Records) Commit(records [][]byte) error {
	ops, err := r.ops(records)
	if err == nil {
		for from := 0; from < len(ops) && err == nil; from += r.opts.MaxTxnOps {
			to := min(from+r.opts.MaxTxnOps, len(ops))
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.CommitTimeout)
			err = r.store.Commit(ctx, r.fence, ops[from:to])
			cancel()
		}
	}
	if errors.Is(err, txnetcd.ErrNotOwner) {
		err = fmt.Errorf("%w: %w", r.opts.Codec.Fenced, err)
	}
	if err != nil {
		err = fmt.Errorf("topicsetcd: commit: %w", err)
		if r.opts.OnFail != nil {
			r.opts.OnFail(err)
		}
	}
	return err
}

// ops are the Txn operations of records: one per key, the last record of
// each key, in the order of each key's first record.
func (r *Records) ops(records [][]byte) ([]clientv3.Op, error) {
	l := r.store.Layout()
	var order []string
	last := map[string]clientv3.Op{}
	for _, raw := range records {
		kind, name, remove, err := r.opts.Codec.Key(raw)
		if err != nil {
			return nil, err
		}
		k := key(l, kind, name)
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		if remove {
			last[k] = clientv3.OpDelete(k)
		} else {
			last[k] = clientv3.OpPut(k, string(raw))
		}
	}
	ops := make([]clientv3.Op, 0, len(order))
	for _, k := range order {
		ops = append(ops, last[k])
	}
	return ops, nil
}

// Load calls fn with every record, read at the revision of one read of
// the owner key, and only while it is this fence's: a former holder loads
// nothing (txnetcd.ErrNotOwner).
func (r *Records) Load(fn func(raw []byte) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnetcd.LoadTimeout)
	defer cancel()
	cli, l := r.store.Client(), r.store.Layout()
	head, err := cli.Get(ctx, l.OwnerKey(r.fence.Partition))
	if err != nil {
		return fmt.Errorf("topicsetcd: load: %w", err)
	}
	owner := ""
	if len(head.Kvs) > 0 {
		owner = string(head.Kvs[0].Value)
	}
	if owner != r.fence.OwnerValue {
		return fmt.Errorf("topicsetcd: load: %w %d: owner is %q, fence %s", txnetcd.ErrNotOwner, r.fence.Partition, owner, r.fence.OwnerValue)
	}
	return read(ctx, cli, l, r.opts.Codec, head.Header.Revision, fn)
}

// Close does nothing: the records hold no resource of their own.
func (r *Records) Close() error { return nil }

// Snapshot calls fn with every record of the controller Layout l as etcd
// holds them now, without a fence: for a node that shows the topics (a
// process's view before its leaders recover), not for a writer.
func Snapshot(ctx context.Context, cli *clientv3.Client, l txnetcd.Layout, c Codec, fn func(raw []byte) error) error {
	return read(ctx, cli, l, c, 0, fn)
}

// SnapshotRecords are codec c's records of the controller Layout l as
// etcd holds them at each Load, without a fence (Snapshot as Records; it
// commits nothing): for authmeta.State.Show.
type SnapshotRecords struct {
	Client *clientv3.Client
	Layout txnetcd.Layout
	Codec  Codec
}

func (s SnapshotRecords) Load(fn func(raw []byte) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnetcd.LoadTimeout)
	defer cancel()
	return Snapshot(ctx, s.Client, s.Layout, s.Codec, fn)
}

// Commit refuses: a snapshot has no fence to write under.
func (s SnapshotRecords) Commit([][]byte) error {
	return fmt.Errorf("topicsetcd: a snapshot is not written: %w", s.Codec.Fenced)
}

func (s SnapshotRecords) Close() error { return nil }

// read walks codec c's kinds at rev (0: the latest), a page at a time.
func read(ctx context.Context, cli *clientv3.Client, l txnetcd.Layout, c Codec, rev int64, fn func(raw []byte) error) error {
	for _, kind := range c.Kinds {
		var err error
		if rev, err = readPrefix(ctx, cli, l, c, DataPrefix(l)+kind+"/", rev, fn); err != nil {
			return err
		}
	}
	return nil
}

// readPrefix walks prefix at rev (0: the latest, whose revision it
// returns for the next prefix).
func readPrefix(ctx context.Context, cli *clientv3.Client, l txnetcd.Layout, c Codec, prefix string, rev int64, fn func(raw []byte) error) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPageSize),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return 0, fmt.Errorf("topicsetcd: load at revision %d: %w", rev, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision // every later page at the first one's revision
		}
		for _, kv := range resp.Kvs {
			if err := check(l, c, string(kv.Key), kv.Value); err != nil {
				return 0, err
			}
			if err := fn(kv.Value); err != nil {
				return 0, fmt.Errorf("topicsetcd: %s: %w", kv.Key, err)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// check refuses a key that is not the one its record would be written at.
func check(l txnetcd.Layout, c Codec, k string, value []byte) error {
	kind, name, _, err := c.Key(value)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrCorrupt, k, err)
	}
	if want := key(l, kind, name); want != k {
		return fmt.Errorf("%w: %q holds the record of %s %q", ErrCorrupt, k, kind, name)
	}
	return nil
}

// Seed copies codec c's records (a single coordinator's store:
// topics.SpaceRecords, authmeta.SpaceRecords) into the controller Layout
// l once: only when etcd holds none of c's records and c was never
// seeded, in one Txn (more records than one Txn may hold fail it). It
// reports whether it copied them.
func Seed(ctx context.Context, cli *clientv3.Client, l txnetcd.Layout, c Codec, records [][]byte, maxTxnOps int) (bool, error) {
	if maxTxnOps <= 0 {
		maxTxnOps = txnetcd.DefaultMaxTxnOps
	}
	r := &Records{store: txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1}), opts: Options{Codec: c}}
	ops, err := r.ops(records)
	if err != nil {
		return false, err
	}
	if len(ops)+1 > maxTxnOps {
		return false, fmt.Errorf("topicsetcd: seed: %d records is more than one etcd Txn holds (%d)", len(ops), maxTxnOps)
	}
	conds := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(seededKey(l, c)), "=", 0)}
	for _, kind := range c.Kinds {
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(DataPrefix(l)+kind+"/").WithPrefix(), "=", 0))
	}
	resp, err := cli.Txn(ctx).
		If(conds...).
		Then(append(ops, clientv3.OpPut(seededKey(l, c), time.Now().UTC().Format(time.RFC3339)))...).
		Commit()
	if err != nil {
		return false, fmt.Errorf("topicsetcd: seed: %w", err)
	}
	return resp.Succeeded, nil
}
