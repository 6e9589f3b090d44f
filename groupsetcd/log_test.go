package groupsetcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wal"
)

// TestOrderAndFolding: 200 records appended while the writer holds its
// first Txn (so they reach it as one round): one key changed by 150 of
// them, a record that names a key twice, one with more keys than a Txn
// (MaxTxnOps 8), deletes, and keys whose raw order differs from a naive
// string order. etcd ends with exactly the state of the records applied
// in order; the hot key was written once per Txn, not once per record;
// Load (a restart of the holder) walks every bucket in raw-key order.
func TestOrderAndFolding(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := groupsLayout(t)
	fence := acquire(t, cli, l, 0, 1)
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1})
	log := Open(store, fence, Options{MaxTxnOps: 8})
	defer log.Close()
	held, release := make(chan struct{}), make(chan struct{})
	first := true
	log.beforeCommit = func() {
		if first {
			first = false
			close(held)
			<-release
		}
	}

	model := map[string]string{}
	var last wal.Pos
	add := func(ops ...string) {
		t.Helper()
		pos, err := log.Append(rec(t, ops...))
		if err != nil {
			t.Fatal(err)
		}
		if pos != last+1 {
			t.Fatalf("position %d after %d", pos, last)
		}
		last = pos
		for i := 0; i+2 < len(ops); i += 3 {
			if ops[i+2] == "<delete>" {
				delete(model, ops[i]+"/"+ops[i+1])
			} else {
				model[ops[i]+"/"+ops[i+1]] = ops[i+2]
			}
		}
	}
	add("groups", "g", "v0")
	<-held // the writer took record 1 alone and waits: the rest queue
	for i := 1; i <= 150; i++ {
		add("offsets", "hot", fmt.Sprintf("h%d", i), "offsets", fmt.Sprintf("k%d", i%20), fmt.Sprint(i))
	}
	add("groups", "dup", "a", "groups", "dup", "b")
	var big []string
	for j := range 20 {
		big = append(big, "producers", fmt.Sprintf("p%02d", j), fmt.Sprint(j))
	}
	add(big...)
	add("offsets", "k3", "<delete>", "producers", "p07", "<delete>")
	for _, k := range []string{"a", "a\x00", "ab", "\xff", "\x00", "", "B"} {
		add("partitions", k, fmt.Sprintf("%q", k))
	}
	add("groups", "gone", "x")
	add("groups", "gone", "<delete>")
	if _, err := log.Append([]byte{9, 9}); err == nil {
		t.Fatal("a record that does not decode was appended")
	}
	close(release)
	if err := log.Log().WaitDurable(ctxT(t), last); err != nil {
		t.Fatal(err)
	}
	if d := log.Log().Durable(); d != last {
		t.Fatalf("Durable %d, want %d", d, last)
	}

	kvs := stored(t, cli, l)
	got := map[string]string{}
	for k, kv := range kvs {
		got[k] = string(kv.Value)
	}
	if fmt.Sprint(got) != fmt.Sprint(model) {
		t.Fatalf("etcd holds\n%v\nwant\n%v", got, model)
	}
	st := log.Stats()
	if hot := kvs["offsets/hot"]; hot.Version >= 150 || int(hot.Version) > int(st.Txns) {
		t.Errorf("offsets/hot written %d times in %d Txns for 150 changes: not folded", hot.Version, st.Txns)
	}
	if st.Records != uint64(last) || st.Txns >= uint64(last) {
		t.Errorf("stats %+v for %d records: want every record durable in fewer Txns", st, last)
	}

	// A restart of the holder: the same fence, a new log.
	again := Open(store, fence, Options{})
	defer again.Close()
	buckets := []string{"groups", "offsets", "producers", "partitions", "txnoffsets"}
	seen := loaded(t, again, buckets...)
	for _, b := range buckets {
		var want [][2]string
		for k, v := range model {
			if bucket, key, _ := strings.Cut(k, "/"); bucket == b {
				want = append(want, [2]string{key, v})
			}
		}
		slices.SortFunc(want, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) }) // Go compares strings bytewise
		if fmt.Sprintf("%q", seen[b]) != fmt.Sprintf("%q", want) {
			t.Errorf("Load of %s:\n got %q\nwant %q", b, seen[b], want)
		}
	}
}

// TestFencedOut: another node takes the group coordinator (its owner
// key changes). The holder's next commit fails: its waiter gets an error
// wrapping groups.ErrClosed (NOT_COORDINATOR) with txnetcd.ErrNotOwner in
// the chain, OnFail is called once, every later Append fails, nothing the
// old holder appended after the takeover is in etcd, and the old fence
// can no longer Load; the new holder loads what was durable.
func TestFencedOut(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := groupsLayout(t)
	old := acquire(t, cli, l, 0, 1)
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1})
	var fails failures
	failed := make(chan struct{})
	log := Open(store, old, Options{OnFail: func(err error) {
		fails.onFail(err)
		close(failed) // a second call would panic
	}})
	defer log.Close()

	p1, err := log.Append(rec(t, "offsets", "before", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Log().WaitDurable(ctxT(t), p1); err != nil {
		t.Fatal(err)
	}

	newFence := acquire(t, cli, l, 1, 2)
	takeover, err := cli.Get(ctxT(t), l.OwnerKey(0))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := log.Append(rec(t, "offsets", "after", "2", "offsets", "before", "changed"))
	if err != nil {
		t.Fatal(err)
	}
	err = log.Log().WaitDurable(ctxT(t), p2)
	if !errors.Is(err, groups.ErrClosed) || !errors.Is(err, txnetcd.ErrNotOwner) {
		t.Fatalf("WaitDurable after the takeover: %v, want groups.ErrClosed and txnetcd.ErrNotOwner in its chain", err)
	}
	t.Logf("failure: %v", err)
	<-failed
	if got := *fails.err.Load(); !errors.Is(got, txnetcd.ErrNotOwner) {
		t.Errorf("OnFail got %v", got)
	}
	if _, err := log.Append(rec(t, "offsets", "later", "3")); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("Append after the failure: %v, want groups.ErrClosed", err)
	}
	if err := log.Log().WaitDurable(ctxT(t), p1); err != nil {
		t.Errorf("WaitDurable of a record durable before the takeover: %v", err)
	}
	log.Close()
	if n := fails.n.Load(); n != 1 {
		t.Errorf("OnFail called %d times", n)
	}

	for k, kv := range stored(t, cli, l) {
		if kv.ModRevision > takeover.Kvs[0].ModRevision {
			t.Errorf("%s written at revision %d, after the takeover at %d", k, kv.ModRevision, takeover.Kvs[0].ModRevision)
		}
	}
	zombie := Open(store, old, Options{})
	defer zombie.Close()
	err = zombie.Load(func(func([]byte, func(k, v []byte) error) error) error { return nil })
	if !errors.Is(err, txnetcd.ErrNotOwner) || !errors.Is(err, groups.ErrClosed) {
		t.Errorf("Load with the old fence: %v", err)
	}
	holder := Open(store, newFence, Options{})
	defer holder.Close()
	if got := fmt.Sprint(loaded(t, holder, "offsets")); got != "map[offsets:[[before 1]]]" {
		t.Errorf("the new holder loads %s", got)
	}
}

// TestEtcdDown: the single etcd member dies. The next commit fails
// within CommitTimeout (the waiter gets an error wrapping
// groups.ErrClosed, not a fence error), OnFail is called once, and the
// failure is sticky.
func TestEtcdDown(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := groupsLayout(t)
	fence := acquire(t, cli, l, 0, 1)
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1})
	var fails failures
	failed := make(chan struct{})
	log := Open(store, fence, Options{CommitTimeout: 300 * time.Millisecond, OnFail: func(err error) {
		fails.onFail(err)
		close(failed)
	}})
	defer log.Close()
	p1, err := log.Append(rec(t, "groups", "g", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Log().WaitDurable(ctxT(t), p1); err != nil {
		t.Fatal(err)
	}

	c.Kill(0)
	p2, err := log.Append(rec(t, "groups", "g", "2"))
	if err != nil {
		t.Fatal(err)
	}
	// The test's own bound is far above CommitTimeout: the error must
	// come from the log, not from this context.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = log.Log().WaitDurable(ctx, p2)
	if err == nil || ctx.Err() != nil || !errors.Is(err, groups.ErrClosed) || errors.Is(err, txnetcd.ErrNotOwner) {
		t.Fatalf("WaitDurable with etcd down: %v (test context: %v), want the log's failure wrapping groups.ErrClosed", err, ctx.Err())
	}
	t.Logf("failure: %v", err)
	<-failed
	if _, err := log.Append(rec(t, "groups", "g", "3")); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("Append after the failure: %v", err)
	}
	if err := log.Log().WaitDurable(ctx, p2); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("WaitDurable again: %v", err)
	}
	log.Close()
	if n := fails.n.Load(); n != 1 {
		t.Errorf("OnFail called %d times", n)
	}
}

// TestClose: Close while a Txn is about to be sent fails its waiter with
// groups.ErrClosed (it is not reported durable), is not a failure
// (no OnFail), and is idempotent; later calls fail with groups.ErrClosed.
func TestClose(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := groupsLayout(t)
	store := txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1})
	var fails failures
	log := Open(store, acquire(t, cli, l, 0, 1), Options{OnFail: fails.onFail})
	held, release := make(chan struct{}), make(chan struct{})
	log.beforeCommit = func() {
		close(held)
		<-release
	}
	pos, err := log.Append(rec(t, "groups", "g", "1"))
	if err != nil {
		t.Fatal(err)
	}
	<-held
	closed := make(chan struct{})
	go func() {
		log.Close()
		close(closed)
	}()
	for log.Err() == nil { // Close has begun once the error is set
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-closed
	if err := log.Log().WaitDurable(ctxT(t), pos); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("WaitDurable of the record cut by Close: %v", err)
	}
	if d := log.Log().Durable(); d != 0 {
		t.Errorf("Durable %d after a cut Txn", d)
	}
	if _, err := log.Append(rec(t, "groups", "g", "2")); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := log.Load(func(func([]byte, func(k, v []byte) error) error) error { return nil }); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	if err := log.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := fails.n.Load(); n != 0 {
		t.Errorf("OnFail called %d times by Close", n)
	}
}
