package coordinator

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/txnlog"
)

// InitProducerId refuses a transactional id longer than Kafka can store
// (cluster.MaxTransactionalIDBytes) with INVALID_REQUEST and stores
// nothing; an id at the limit is served.
func TestInitProducerIDTransactionalIDLimit(t *testing.T) {
	store := txnlog.NewMemory()
	c, _ := openTest(t, testView("127.0.0.1:1"), store, false)
	for id, want := range map[string]int16{
		strings.Repeat("x", cluster.MaxTransactionalIDBytes+1): kerr.InvalidRequest.Code,
		strings.Repeat("y", cluster.MaxTransactionalIDBytes):   0,
	} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 1000, -1, -1
		r := call(c, 22, req).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != want {
			t.Fatalf("%d-byte id: error %d, want %d", len(id), r.ErrorCode, want)
		}
		if _, stored := c.Describe(id); stored != (want == 0) {
			t.Fatalf("%d-byte id: stored %v, want stored only when served", len(id), stored)
		}
	}
}
