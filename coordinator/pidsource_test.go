package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/txnlog"
)

// recordingStore is a memory store that keeps every batch submitted to it.
type recordingStore struct {
	*txnlog.MemoryStore
	mu      sync.Mutex
	batches []txnlog.Batch
}

func (s *recordingStore) Submit(b txnlog.Batch) (durable.Pos, error) {
	s.mu.Lock()
	s.batches = append(s.batches, b)
	s.mu.Unlock()
	return s.MemoryStore.Submit(b)
}

func (s *recordingStore) highWaterWrites() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, b := range s.batches {
		if b.ProducerIDHighWater != 0 {
			out = append(out, b.ProducerIDHighWater)
		}
	}
	return out
}

// countingBlocks is a ProducerIDBlocks handing out blocks from 1000 up,
// or err.
type countingBlocks struct {
	mu   sync.Mutex
	next int64
	err  error
}

func (p *countingBlocks) Reserve(_ context.Context, n int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return -1, p.err
	}
	first := p.next
	p.next += n
	return first, nil
}

func initPIDNull(c *Coordinator) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	return call(c, 22, req).(*kmsg.InitProducerIDResponse)
}

// The default pool writes the epoch with the first block's end at Open,
// then one high-water raise per block, reserved when half the block is
// handed out.
func TestDefaultPIDSourceWritesHighWater(t *testing.T) {
	store := &recordingStore{MemoryStore: txnlog.NewMemory()}
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: store, Markers: &fakeMarkers{}, PIDBlockSize: 10, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(store.batches) != 1 || store.batches[0].CoordinatorEpoch != 1 || store.batches[0].ProducerIDHighWater != 10 {
		t.Fatalf("Open wrote %+v, want one batch {epoch 1, high water 10}", store.batches)
	}
	for want := int64(0); want < 12; want++ { // 12: half of the second block not yet handed out
		if r := initPIDNull(c); r.ErrorCode != 0 || r.ProducerID != want {
			t.Fatalf("id %d: %+v", want, r)
		}
	}
	if hw := store.highWaterWrites(); len(hw) != 2 || hw[0] != 10 || hw[1] != 20 {
		t.Fatalf("high-water writes %v, want [10 20]", hw)
	}
}

// With a pool of its own (etcd blocks) the coordinator takes every id
// from it and never writes a high-water mark, which a
// txnetcd.PartitionStore would refuse.
func TestConfiguredPIDSource(t *testing.T) {
	store := &recordingStore{MemoryStore: txnlog.NewMemory()}
	src := &countingBlocks{next: 1000}
	fm := &fakeMarkers{complete: true}
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: store, Markers: fm, ProducerIDs: NewProducerIDPool(src, 2), KafkaVersion: "4.2", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	fm.mu.Lock()
	fm.c = c
	fm.mu.Unlock()
	defer c.Close()
	if len(store.batches) != 1 || store.batches[0].CoordinatorEpoch != 1 || store.batches[0].ProducerIDHighWater != 0 {
		t.Fatalf("Open wrote %+v, want one batch {epoch 1} and no high water", store.batches)
	}
	if r := initPIDNull(c); r.ErrorCode != 0 || r.ProducerID != 1000 {
		t.Fatalf("idempotent InitProducerId: %+v", r)
	}
	pid, epoch := initPID(t, c, "t")
	if pid != 1001 || epoch != 0 {
		t.Fatalf("transactional InitProducerId: pid %d epoch %d, want 1001/0", pid, epoch)
	}
	if code := addPartitionsV3(c, "t", pid, epoch, "orders", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	// A TV2 commit bumps the epoch; an abort after exhausting it would
	// need a new id, from the source too.
	if r := endTxn(c, 5, "t", pid, epoch, true); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitState(t, c, "t", txnlog.CompleteCommit)
	if hw := store.highWaterWrites(); len(hw) != 0 {
		t.Fatalf("high-water writes %v with a configured source", hw)
	}

	// The blocks failing fail the request with a store error code once
	// the ids in hand are used up, as the default pool's failed block
	// write does.
	src.mu.Lock()
	src.err = errors.New("etcd unreachable")
	src.mu.Unlock()
	var r *kmsg.InitProducerIDResponse
	for range 10 {
		if r = initPIDNull(c); r.ErrorCode != 0 {
			break
		}
	}
	if r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("blocks failing, idempotent InitProducerId: %+v", r)
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	id := "u"
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
	if r := call(c, 22, req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("source failing, InitProducerId for a new id: %+v", r)
	}
	if _, ok := c.Describe("u"); ok {
		t.Fatal("a new id was stored without a producer id")
	}
}
