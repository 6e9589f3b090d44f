package leaderstub

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DropTopic forgets a topic's partitions in memory and in the store: after
// a restart nothing of it is recovered, and a topic of that name created
// again starts at offset 0.
func TestDropTopic(t *testing.T) {
	f := newFixture(t)
	produce := func() int64 {
		t.Helper()
		resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1, count: 3}.bytes()), 9).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("produce: %s", codeName(p.ErrorCode))
		}
		return p.BaseOffset
	}
	produce()
	if base := produce(); base != 3 {
		t.Fatalf("second batch at %d, want 3", base)
	}
	f.restart() // the batches are in bbolt now
	if got := f.l.HeldTopics(); got["t"] != 1 {
		t.Fatalf("held topics before the drop: %v", got)
	}
	if err := f.l.DropTopic("t"); err != nil {
		t.Fatal(err)
	}
	if got := f.l.HeldTopics(); len(got) != 0 {
		t.Fatalf("held topics after the drop: %v", got)
	}
	f.restart()
	if got := f.l.HeldTopics(); len(got) != 0 {
		t.Fatalf("held topics after a restart: %v", got)
	}
	if base := produce(); base != 0 {
		t.Fatalf("first batch after the drop at %d, want 0", base)
	}
}
