package groupsetcd

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/txnetcd"
)

// Migration moves the records of a group coordinator of every group (one
// Log at DataPrefix(From), the holder of From's single partition) to the
// per-partition data prefixes of To, where each __consumer_offsets
// partition's owner loads its groups.
type Migration struct {
	Client *clientv3.Client
	// From is the single-lease layout the records are in.
	From txnetcd.Layout
	// To is the per-partition layout they go to, and Partitions its
	// __consumer_offsets partitions.
	To         txnetcd.Layout
	Partitions int32
	// NodeID names the migrating node in the lock and the marker.
	NodeID int32
	// LeaseTTL bounds how long a migrator that died holds the lock.
	LeaseTTL time.Duration
	// MaxTxnOps is the etcd server's --max-txn-ops (default
	// txnetcd.DefaultMaxTxnOps).
	MaxTxnOps int
	Log       zerolog.Logger
}

// MigrationResult is what one Migrate did.
type MigrationResult struct {
	Groups int // distinct groups whose records it moved
	Keys   int // keys it moved (copied, or dropped because To had them)
	// Kept counts keys To already held: those win (they were written by
	// a partition's owner, so they are newer), and the old one is dropped.
	Kept int
	// Done: the marker says an earlier Migrate finished; nothing was read.
	Done bool
}

// migrationMarker is the value of the marker key, a note for whoever
// finds the old prefix.
type migrationMarker struct {
	To     string `json:"to"`
	Node   int32  `json:"node_id"`
	Groups int    `json:"groups"`
	Keys   int    `json:"keys"`
	At     string `json:"at"`
}

// MarkerKey is the key that says From's records were moved:
// <From prefix>/migrated. While it exists Migrate reads nothing else.
func (m Migration) MarkerKey() string { return strings.TrimRight(m.From.Prefix, "/") + "/migrated" }

func (m Migration) lockKey() string { return strings.TrimRight(m.From.Prefix, "/") + "/migrating" }

// retiredOwner is the value the migration leaves in From's owner key: a
// coordinator still running the single-lease layout is fenced out by it
// (its writes compare the owner key with its own value) and never
// acquires the key again (it is not bound to a lease).
var retiredOwner = txnetcd.Owner{NodeID: -1, Epoch: -1}

// Migrate moves From's records to To exactly once, before this node's
// group coordinators load anything from To: each key goes to the
// partition groups.RecordPartition names, under the same bucket and raw
// key. It returns at once when the marker exists or From holds no
// records (a cluster that never ran the single lease).
//
// One node migrates at a time: it takes a lock key bound to a lease of
// its own, with a Txn that succeeds only while neither the lock nor the
// marker exists; the other nodes wait until the lock is gone, then look
// again (the winner has usually written the marker by then; if it died,
// one of them takes over). The winner first retires From's owner key
// (fencing a coordinator of the old layout still running), then moves the
// keys a page at a time: each Txn, conditioned on the lock still being
// its own, copies each key unless To holds it already (a nested Txn per
// key) and deletes the old one, so a migration cut short resumes where it
// stopped without copying anything twice. The last Txn writes the marker
// and drops the lock.
//
// The old keys are deleted rather than kept: To holds every record, the
// retired owner key keeps an old-layout coordinator from ever using them
// again, and a cluster's offsets may be hundreds of thousands of keys that
// etcd would otherwise keep for nothing. The marker is the note of what
// happened (where the records went, how many, when, by which node).
func Migrate(ctx context.Context, m Migration) (MigrationResult, error) {
	if m.MaxTxnOps <= 0 {
		m.MaxTxnOps = txnetcd.DefaultMaxTxnOps
	}
	if m.LeaseTTL < time.Second {
		m.LeaseTTL = time.Second
	}
	cli := m.Client
	for {
		done, err := cli.Get(ctx, m.MarkerKey(), clientv3.WithCountOnly())
		if err != nil {
			return MigrationResult{}, fmt.Errorf("groupsetcd: migration marker: %w", err)
		}
		if done.Count > 0 {
			return MigrationResult{Done: true}, nil
		}
		left, err := cli.Get(ctx, DataPrefix(m.From), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return MigrationResult{}, fmt.Errorf("groupsetcd: migration: %w", err)
		}
		if left.Count == 0 {
			return MigrationResult{}, nil
		}
		res, locked, err := m.tryMigrate(ctx)
		if err != nil || locked {
			return res, err
		}
		if err := m.waitUnlocked(ctx); err != nil {
			return MigrationResult{}, err
		}
	}
}

// waitUnlocked returns once the lock key is gone (its holder finished or
// its lease expired).
func (m Migration) waitUnlocked(ctx context.Context) error {
	for {
		resp, err := m.Client.Get(ctx, m.lockKey(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("groupsetcd: migration lock: %w", err)
		}
		if resp.Count == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("groupsetcd: waiting for another node's migration: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tryMigrate takes the lock and, if it got it, migrates (locked true).
func (m Migration) tryMigrate(ctx context.Context) (MigrationResult, bool, error) {
	cli := m.Client
	lease, err := cli.Grant(ctx, int64((m.LeaseTTL+time.Second-1)/time.Second))
	if err != nil {
		return MigrationResult{}, false, fmt.Errorf("groupsetcd: migration lease: %w", err)
	}
	kctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cli.Revoke(rctx, lease.ID) // the lock goes with it; an error leaves it to expire
		cancel()
	}()
	lockValue := fmt.Sprintf("node %d lease %x", m.NodeID, lease.ID)
	got, err := cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(m.lockKey()), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(m.MarkerKey()), "=", 0),
	).Then(clientv3.OpPut(m.lockKey(), lockValue, clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return MigrationResult{}, false, fmt.Errorf("groupsetcd: migration lock: %w", err)
	}
	if !got.Succeeded {
		return MigrationResult{}, false, nil
	}
	alive, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		return MigrationResult{}, true, fmt.Errorf("groupsetcd: migration lease: %w", err)
	}
	go func() {
		for range alive { // drained until kctx ends
		}
	}()
	held := clientv3.Compare(clientv3.Value(m.lockKey()), "=", lockValue)
	res, err := m.move(ctx, held)
	if err != nil {
		return res, true, err
	}
	note, _ := json.Marshal(migrationMarker{To: m.To.Prefix, Node: m.NodeID, Groups: res.Groups, Keys: res.Keys,
		At: time.Now().UTC().Format(time.RFC3339)})
	end, err := cli.Txn(ctx).If(held).Then(clientv3.OpPut(m.MarkerKey(), string(note)), clientv3.OpDelete(m.lockKey())).Commit()
	if err == nil && !end.Succeeded {
		err = fmt.Errorf("the lock was lost (its lease expired)")
	}
	if err != nil {
		return res, true, fmt.Errorf("groupsetcd: migration marker: %w", err)
	}
	m.Log.Info().Str("from", m.From.Prefix).Str("to", m.To.Prefix).Int("groups", res.Groups).Int("keys", res.Keys).
		Int("kept", res.Kept).Msg("group records moved from the single lease's keys to the __consumer_offsets partitions' keys")
	return res, true, nil
}

// migrateTxnBytes bounds the keys and values one Txn of the migration
// copies (each is also deleted: the request holds them about once).
const migrateTxnBytes = 512 << 10

// move retires From's owner key and moves every record key, a page per
// Txn, each Txn fenced by held.
func (m Migration) move(ctx context.Context, held clientv3.Cmp) (MigrationResult, error) {
	cli := m.Client
	var res MigrationResult
	retire, err := cli.Txn(ctx).If(held).Then(clientv3.OpPut(m.From.OwnerKey(0), retiredOwner.Value())).Commit()
	if err == nil && !retire.Succeeded {
		err = fmt.Errorf("the lock was lost (its lease expired)")
	}
	if err != nil {
		return res, fmt.Errorf("groupsetcd: migration: retiring the single lease: %w", err)
	}
	from := DataPrefix(m.From)
	perTxn := max(m.MaxTxnOps/2, 1) // a copy and a delete per key
	groupSeen := map[string]bool{}
	for {
		page, err := cli.Get(ctx, from, clientv3.WithPrefix(), clientv3.WithLimit(int64(perTxn)),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return res, fmt.Errorf("groupsetcd: migration: %w", err)
		}
		if len(page.Kvs) == 0 {
			return res, nil
		}
		ops := make([]clientv3.Op, 0, 2*len(page.Kvs))
		var groupsOf []string
		kvs, size := page.Kvs, 0
		for i, kv := range page.Kvs {
			// etcd refuses a request above its --max-request-bytes
			// (1.5 MiB by default): a page of large group records is
			// moved over several Txns (the rest is the next page's).
			if size += len(kv.Key) + len(kv.Value); i > 0 && size > migrateTxnBytes {
				kvs = page.Kvs[:i]
				break
			}
		}
		for _, kv := range kvs {
			bucket, encoded, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), from), "/")
			raw, herr := hex.DecodeString(encoded)
			if !ok || bucket == "" || herr != nil {
				return res, fmt.Errorf("groupsetcd: migration: %w: %q", ErrCorrupt, kv.Key)
			}
			p, group, err := groups.RecordPartition([]byte(bucket), raw, m.Partitions)
			if err != nil {
				return res, fmt.Errorf("groupsetcd: migration of %q: %w", kv.Key, err)
			}
			to := PartitionDataPrefix(m.To, p) + bucket + "/" + encoded
			ops = append(ops,
				clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(to), "=", 0)},
					[]clientv3.Op{clientv3.OpPut(to, string(kv.Value))}, nil),
				clientv3.OpDelete(string(kv.Key)))
			groupsOf = append(groupsOf, group)
		}
		resp, err := cli.Txn(ctx).If(held).Then(ops...).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("the lock was lost (its lease expired)")
		}
		if err != nil {
			return res, fmt.Errorf("groupsetcd: migration: %w", err)
		}
		for i, r := range resp.Responses {
			if i%2 == 0 && !r.GetResponseTxn().GetSucceeded() {
				res.Kept++
			}
		}
		for _, g := range groupsOf {
			if g != "" && !groupSeen[g] {
				groupSeen[g] = true
				res.Groups++
			}
		}
		res.Keys += len(kvs)
	}
}
