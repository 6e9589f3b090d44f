package txnetcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/txnlog"
)

var (
	// ErrNotOwner: the writer's fence no longer matches the partition's
	// owner key (another member took it, or the lease expired). Nothing
	// was written. The coordinator answers NOT_COORDINATOR. It is
	// txnlog.ErrNotOwner itself, so that the coordinator, which does not
	// import this package, recognises it with errors.Is.
	ErrNotOwner = txnlog.ErrNotOwner
	// ErrWrongPartition: a batch names a transactional id of another
	// partition than the fence's.
	ErrWrongPartition = errors.New("txnetcd: transactional id of another partition")
	// ErrBatchTooLarge: a batch needs more operations than one etcd Txn
	// may hold (etcd's --max-txn-ops); it cannot be written atomically.
	ErrBatchTooLarge = errors.New("txnetcd: batch exceeds the operations of one etcd transaction")
)

// DefaultMaxTxnOps is etcd's default --max-txn-ops.
const DefaultMaxTxnOps = 128

// DefaultCommitTimeout bounds one etcd Txn of a Store's shared writer.
const DefaultCommitTimeout = 10 * time.Second

// loadPageSize bounds one range response of Load (etcd refuses responses
// above its gRPC limits; a partition may hold tens of thousands of ids).
var loadPageSize = int64(1000)

// Options configures a Store.
type Options struct {
	Layout Layout
	// Partitions is transaction_state_partitions (default 50).
	Partitions int32
	// MaxTxnOps is the etcd server's --max-txn-ops (default 128): a batch
	// with more puts and deletes than that is refused before it is sent.
	MaxTxnOps int
	// CommitTimeout bounds one Txn of the writer the Store's
	// PartitionStores share (default DefaultCommitTimeout): it carries
	// many callers' batches, so no caller's context bounds it. When it
	// ends, every batch of the Txn fails (they may have been written).
	CommitTimeout time.Duration
	// KV, optional, is the etcd KV API the shared writer sends its Txns
	// to: the embedded member's in-process server (`txncoord up`). Nil:
	// the client's connection, or the client's own Txn for a client
	// without one. The writer builds etcd's requests itself, so nothing
	// is copied or cloned on the way (clientv3's Txn clones every
	// compare).
	KV pb.KVClient
}

// Store reads and writes transaction state of a cluster in etcd. It is
// safe for concurrent use; it does not own the client. Its
// PartitionStores share one writer (writer.go), whose goroutine runs only
// while they have writes queued: a Store needs no Close.
type Store struct {
	cli  *clientv3.Client
	opts Options
	w    writer
	// kv is what the writer sends its Txns to (nil: cli.Txn).
	kv pb.KVClient
	// idsPrefixes and ownerKeys are Layout.IDsPrefix and OwnerKey of
	// each partition, made once: every write names them.
	idsPrefixes, ownerKeys []string
}

// NewStore returns a store over cli.
func NewStore(cli *clientv3.Client, opts Options) *Store {
	if opts.Partitions <= 0 {
		opts.Partitions = DefaultPartitions
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	s := &Store{cli: cli, opts: opts, kv: opts.KV, idsPrefixes: make([]string, opts.Partitions), ownerKeys: make([]string, opts.Partitions)}
	if s.kv == nil && cli.ActiveConnection() != nil {
		s.kv = clientv3.RetryKVClient(cli)
	}
	for p := range s.idsPrefixes {
		s.idsPrefixes[p] = opts.Layout.IDsPrefix(int32(p))
		s.ownerKeys[p] = opts.Layout.OwnerKey(int32(p))
	}
	return s
}

// Layout is the store's key layout.
func (s *Store) Layout() Layout { return s.opts.Layout }

// Client is the store's etcd client, for the reads of other state of a
// partition's owner (groupsetcd's Load); writes go through Commit.
func (s *Store) Client() *clientv3.Client { return s.cli }

// PartitionFor is the partition of a transactional id in this cluster.
func (s *Store) PartitionFor(transactionalID string) int32 {
	return PartitionFor(transactionalID, s.opts.Partitions)
}

// PartitionState is one partition as stored, read at one etcd revision.
type PartitionState struct {
	Txns map[string]txnlog.TxnMetadata
	// Epoch is the last coordinator epoch handed out for the partition (0:
	// never owned).
	Epoch int32
	// OwnerValue is the owner key's value ("" when nobody owns it).
	OwnerValue string
	// Revision is the etcd revision the state was read at.
	Revision int64
}

// Load reads partition p: every transaction record, the coordinator epoch
// and the owner, all at one revision (a consistent snapshot, even when the
// records take several range requests).
func (s *Store) Load(ctx context.Context, p int32) (PartitionState, error) {
	l := s.opts.Layout
	head, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(l.EpochKey(p)),
		clientv3.OpGet(l.OwnerKey(p)),
	).Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("txnetcd: load partition %d: %w", p, err)
	}
	st := PartitionState{Txns: map[string]txnlog.TxnMetadata{}, Revision: head.Header.Revision}
	if kvs := head.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		e, err := strconv.ParseInt(string(kvs[0].Value), 10, 32)
		if err != nil || e < 0 {
			return PartitionState{}, fmt.Errorf("txnetcd: partition %d: epoch value %q: %w", p, kvs[0].Value, txnlog.ErrCorrupt)
		}
		st.Epoch = int32(e)
	}
	if kvs := head.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		st.OwnerValue = string(kvs[0].Value)
	}

	prefix := l.IDsPrefix(p)
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithRev(st.Revision),
			clientv3.WithLimit(loadPageSize), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return PartitionState{}, fmt.Errorf("txnetcd: load partition %d: %w", p, err)
		}
		for _, kv := range resp.Kvs {
			id := strings.TrimPrefix(string(kv.Key), prefix)
			m, err := txnlog.DecodeTxn(kv.Value)
			if err != nil {
				return PartitionState{}, fmt.Errorf("txnetcd: partition %d id %q: %w", p, id, err)
			}
			// The key is the truth of where a record lives; a record
			// naming another id (or under the wrong partition) was not
			// written by Apply and is not guessed at.
			if m.TransactionalID != id || s.PartitionFor(id) != p {
				return PartitionState{}, fmt.Errorf("txnetcd: partition %d key %q holds id %q: %w", p, kv.Key, m.TransactionalID, txnlog.ErrCorrupt)
			}
			st.Txns[id] = m
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return st, nil
}

// Apply writes b's puts and deletes of partition f.Partition as ONE etcd
// Txn, conditioned on the owner key still holding f.OwnerValue. When it does
// not, nothing is written and Apply returns ErrNotOwner. It returns once
// etcd has committed the Txn (durable on a quorum). b.CoordinatorEpoch and
// b.ProducerIDHighWater are not this method's business (see
// PartitionStore) and must be zero.
func (s *Store) Apply(ctx context.Context, f Fence, b txnlog.Batch) error {
	if b.CoordinatorEpoch != 0 || b.ProducerIDHighWater != 0 {
		return fmt.Errorf("txnetcd: Store.Apply writes transactions only (coordinator epoch %d, producer-id high water %d)", b.CoordinatorEpoch, b.ProducerIDHighWater)
	}
	ops, _, err := s.ops(f.Partition, b)
	if err != nil {
		return err
	}
	return s.Commit(ctx, f, clientOps(ops))
}

// ops turns b into etcd operations, one per key, and their keys: a later
// put or delete of the same id in the batch wins (etcd refuses a Txn naming
// a key twice).
func (s *Store) ops(p int32, b txnlog.Batch) ([]*pb.RequestOp, []string, error) {
	if len(b.Puts)+len(b.Deletes) == 1 {
		// Most batches are one transition of one id: no merging to do.
		if len(b.Puts) == 1 {
			return s.opsOf(p, []string{b.Puts[0].TransactionalID}, func(int) *txnlog.TxnMetadata { return &b.Puts[0] })
		}
		return s.opsOf(p, b.Deletes, func(int) *txnlog.TxnMetadata { return nil })
	}
	order := make([]string, 0, len(b.Puts)+len(b.Deletes))
	last := make(map[string]*txnlog.TxnMetadata, len(b.Puts)+len(b.Deletes)) // nil: deleted
	note := func(id string, put *txnlog.TxnMetadata) {
		if _, seen := last[id]; !seen {
			order = append(order, id)
		}
		last[id] = put
	}
	// txnlog applies a batch's puts, then its deletes.
	for i := range b.Puts {
		note(b.Puts[i].TransactionalID, &b.Puts[i])
	}
	for _, id := range b.Deletes {
		note(id, nil)
	}
	return s.opsOf(p, order, func(i int) *txnlog.TxnMetadata { return last[order[i]] })
}

// opsOf is the operations of ids, distinct ids of partition p, each put
// with putOf(its index) or deleted (nil), and their keys.
func (s *Store) opsOf(p int32, ids []string, putOf func(int) *txnlog.TxnMetadata) ([]*pb.RequestOp, []string, error) {
	for _, id := range ids {
		if q := s.PartitionFor(id); q != p {
			return nil, nil, fmt.Errorf("%w: %q is in partition %d, the fence's is %d", ErrWrongPartition, id, q, p)
		}
	}
	if len(ids) > s.opts.MaxTxnOps {
		return nil, nil, fmt.Errorf("%w: %d keys, at most %d", ErrBatchTooLarge, len(ids), s.opts.MaxTxnOps)
	}
	ops := make([]*pb.RequestOp, len(ids))
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.idsPrefixes[p] + id // Layout.IDKey
		if m := putOf(i); m != nil {
			ops[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(keys[i]), Value: txnlog.EncodeTxn(*m)}}}
		} else {
			ops[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(keys[i])}}}
		}
	}
	return ops, keys, nil
}

// Commit runs ops in one Txn fenced by f (ErrNotOwner when the owner key
// no longer holds f's value: nothing is written). With no ops it still
// checks the fence, at a linearizable point: the caller learns it owned
// the partition after every write before it. Other state of the
// partition's owner (groupsetcd) writes through it too.
func (s *Store) Commit(ctx context.Context, f Fence, ops []clientv3.Op) error {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(s.ownerKey(f.Partition)), "=", f.OwnerValue)).
		Then(ops...).
		Commit()
	if err != nil {
		return fmt.Errorf("txnetcd: partition %d: %w", f.Partition, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w %d (fence %s)", ErrNotOwner, f.Partition, f.OwnerValue)
	}
	return nil
}

// ownerKey is Layout.OwnerKey(p).
func (s *Store) ownerKey(p int32) string {
	if p >= 0 && int(p) < len(s.ownerKeys) {
		return s.ownerKeys[p]
	}
	return s.opts.Layout.OwnerKey(p)
}

// Get reads one transactional id's record (ok false when there is none),
// for a reader that does not own its partition (the admin API of another
// coordinator).
func (s *Store) Get(ctx context.Context, transactionalID string) (m txnlog.TxnMetadata, ok bool, err error) {
	resp, err := s.cli.Get(ctx, s.opts.Layout.IDKey(s.PartitionFor(transactionalID), transactionalID))
	if err != nil {
		return m, false, fmt.Errorf("txnetcd: get %q: %w", transactionalID, err)
	}
	if len(resp.Kvs) == 0 {
		return m, false, nil
	}
	if m, err = txnlog.DecodeTxn(resp.Kvs[0].Value); err != nil {
		return m, false, fmt.Errorf("txnetcd: get %q: %w", transactionalID, err)
	}
	return m, true, nil
}
