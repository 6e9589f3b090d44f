package txnetcd

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/txncoord/txncoord/coordinator"
)

// Three members (three clients) allocating blocks of different sizes at
// once get disjoint blocks that tile [0, total) with no gap: each
// successful compare-and-swap starts where the previous one ended.
func TestConcurrentAllocatorsGetDisjointBlocks(t *testing.T) {
	l := newLayout(t)
	type block struct{ first, n int64 }
	var mu sync.Mutex
	var blocks []block
	var wg sync.WaitGroup
	const perWorker = 15
	for member := range 3 {
		s := NewStore(newClient(t), Options{Layout: l})
		for worker := range 3 {
			wg.Go(func() {
				for i := range perWorker {
					n := int64(1 + (member*7+worker*3+i)%10)
					first, err := s.AllocateProducerIDs(ctxT(t), n)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					blocks = append(blocks, block{first, n})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(blocks) != 3*3*perWorker {
		t.Fatalf("%d blocks", len(blocks))
	}
	slices.SortFunc(blocks, func(a, b block) int { return int(a.first - b.first) })
	var next int64
	for _, b := range blocks {
		if b.first != next {
			t.Fatalf("block [%d, %d) after %d: overlap or gap (blocks %v)", b.first, b.first+b.n, next, blocks)
		}
		next = b.first + b.n
	}
	// The counter in etcd is where the last block ended.
	resp, err := newClient(t).Get(ctxT(t), l.PIDNextKey())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != strconv.FormatInt(next, 10) {
		t.Fatalf("pid/next %v, %v; want %d", resp.Kvs, err, next)
	}
}

// The pools of several members, and of a member restarted with nothing on
// disk (a new pool on a new client), never hand out an id twice.
func TestProducerIDsUniqueAcrossMembersAndRestarts(t *testing.T) {
	l := newLayout(t)
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 2 { // a restart: a new client and source
				src := coordinator.NewProducerIDPool(NewStore(newClient(t), Options{Layout: l}), 7)
				for range 20 {
					id, err := src.NextID(ctxT(t))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seen[id]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != 3*2*20 {
		t.Fatalf("%d distinct ids of %d handed out", len(seen), 3*2*20)
	}
	for id, n := range seen {
		if n != 1 || id < 0 {
			t.Fatalf("id %d handed out %d times", id, n)
		}
	}
}

func TestEnsureProducerIDsFromAndExhaustion(t *testing.T) {
	cli := newClient(t)
	l := newLayout(t)
	s := NewStore(cli, Options{Layout: l})
	// Taking over from a single coordinator whose high-water mark was 5000.
	if found, err := s.EnsureProducerIDsFrom(ctxT(t), 5000); err != nil || found != 0 {
		t.Fatalf("floor 5000 on a new cluster: found %d, %v", found, err)
	}
	if first, err := s.AllocateProducerIDs(ctxT(t), 10); err != nil || first != 5000 {
		t.Fatalf("first block after the floor: %d, %v", first, err)
	}
	// A floor below the counter never lowers it.
	if found, err := s.EnsureProducerIDsFrom(ctxT(t), 100); err != nil || found != 5010 {
		t.Fatalf("floor 100 under the counter: found %d, %v", found, err)
	}
	if first, _ := s.AllocateProducerIDs(ctxT(t), 1); first != 5010 {
		t.Fatalf("after a lower floor: %d, want 5010", first)
	}
	if _, err := cli.Put(ctxT(t), l.PIDNextKey(), strconv.FormatInt(math.MaxInt64-5, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocateProducerIDs(ctxT(t), 10); !errors.Is(err, ErrProducerIDsExhausted) {
		t.Fatalf("block past the last id: %v", err)
	}
	if _, err := cli.Put(ctxT(t), l.PIDNextKey(), "twelve"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocateProducerIDs(ctxT(t), 1); err == nil {
		t.Fatal("a counter that is not a number was taken")
	}
}
