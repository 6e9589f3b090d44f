package groupcommit

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"go.etcd.io/bbolt"
)

func put(bucket, key, value string) func(Root) error {
	return func(r Root) error {
		b, err := r.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), []byte(value))
	}
}

func get(t *testing.T, s *Space, bucket, key string) string {
	t.Helper()
	var v string
	if err := s.View(func(r Root) error {
		if b := r.Bucket([]byte(bucket)); b != nil {
			v = string(b.Get([]byte(key)))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// Two spaces of one file keep their buckets apart, and everything
// committed is there after a reopen.
func TestSpacesAreSeparateAndDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := l.Space("a", SpaceOptions{})
	b, _ := l.Space("b", SpaceOptions{})
	if err := <-a.Submit(put("x", "k", "from-a"), nil); err != nil {
		t.Fatal(err)
	}
	if err := <-b.Submit(put("x", "k", "from-b"), nil); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, _ = l.Space("a", SpaceOptions{})
	b, _ = l.Space("b", SpaceOptions{})
	if got := get(t, a, "x", "k"); got != "from-a" {
		t.Fatalf("space a: %q", got)
	}
	if got := get(t, b, "x", "k"); got != "from-b" {
		t.Fatalf("space b: %q", got)
	}
}

// A space from OpenSpace keeps the file's own layout: its buckets are at
// the top level, readable by plain bbolt.
func TestOpenSpaceUsesTopLevel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "own.db")
	s, err := OpenSpace(path, Options{}, SpaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-s.Submit(put("top", "k", "v"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte("top")); b == nil || string(b.Get([]byte("k"))) != "v" {
			t.Fatal("bucket top/k not at the top level")
		}
		return nil
	})
}

// Ops from many writers queued while a commit is in progress share the
// next one; durable callbacks run in submit order per writer, and OnCommit
// sees each commit's op count of its space.
func TestGroupCommitSharesUpdatesAndKeepsOrder(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	commits, ops := 0, 0
	s, _ := l.Space("s", SpaceOptions{OnCommit: func(n int) { mu.Lock(); commits++; ops += n; mu.Unlock() }})
	const writers, each = 16, 50
	order := make([][]int, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var chans []<-chan error
			for i := range each {
				chans = append(chans, s.Submit(put("w", fmt.Sprintf("%d-%d", w, i), "v"), func() { order[w] = append(order[w], i) }))
			}
			for _, c := range chans {
				if err := <-c; err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for w, got := range order {
		for i, v := range got {
			if v != i {
				t.Fatalf("writer %d: durable order %v", w, got)
			}
		}
	}
	if ops != writers*each {
		t.Fatalf("OnCommit counted %d ops, want %d", ops, writers*each)
	}
	if commits >= ops {
		t.Fatalf("%d commits for %d ops: no group commit", commits, ops)
	}
	t.Logf("%d ops in %d commits", ops, commits)
}

// A failing op fails alone: the ops that shared its Update are retried and
// committed. In a FailStop space every later op fails too.
func TestFailureIsPerOpAndFailStop(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "f.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	plain, _ := l.Space("plain", SpaceOptions{})
	stopping, _ := l.Space("stopping", SpaceOptions{FailStop: true})
	boom := errors.New("boom")
	// Hold the writer so the next ops share one Update.
	release := make(chan struct{})
	first := plain.Submit(func(Root) error { <-release; return nil }, nil)
	c1 := plain.Submit(put("b", "ok1", "v"), nil)
	c2 := stopping.Submit(func(Root) error { return boom }, nil)
	c3 := stopping.Submit(put("b", "after", "v"), nil)
	c4 := plain.Submit(put("b", "ok2", "v"), nil)
	close(release)
	for name, c := range map[string]<-chan error{"first": first, "ok1": c1, "ok2": c4} {
		if err := <-c; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := <-c2; !errors.Is(err, boom) {
		t.Fatalf("failing op: %v", err)
	}
	if err := <-c3; !errors.Is(err, boom) {
		t.Fatalf("op after the failure in a FailStop space: %v, want the failure", err)
	}
	if err := <-stopping.Submit(put("b", "later", "v"), nil); err == nil {
		t.Fatal("FailStop space accepted an op after its failure")
	}
	if get(t, plain, "b", "ok1") != "v" || get(t, plain, "b", "ok2") != "v" {
		t.Fatal("ops sharing the failed Update were not committed alone")
	}
	if get(t, stopping, "b", "after") != "" {
		t.Fatal("an op after the failure was applied")
	}
	if err := <-plain.Submit(put("b", "ok3", "v"), nil); err != nil {
		t.Fatalf("non-FailStop space after a failure: %v", err)
	}
}

// Close commits what was submitted before it, then refuses with the
// space's own error.
func TestCloseCommitsQueuedThenRefuses(t *testing.T) {
	closedErr := errors.New("store closed")
	s, err := OpenSpace(filepath.Join(t.TempDir(), "c.db"), Options{}, SpaceOptions{Closed: closedErr})
	if err != nil {
		t.Fatal(err)
	}
	var chans []<-chan error
	for i := range 100 {
		chans = append(chans, s.Submit(put("b", fmt.Sprint(i), "v"), nil))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range chans {
		if err := <-c; err != nil {
			t.Fatalf("op %d submitted before Close: %v", i, err)
		}
	}
	if err := <-s.Submit(put("b", "late", "v"), nil); !errors.Is(err, closedErr) {
		t.Fatalf("after Close: %v", err)
	}
}
